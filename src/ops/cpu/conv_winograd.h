#pragma once
// Winograd F(2x2, 3x3) for 3x3, stride-1, ungrouped float32 convolutions on nChw8c activations.
//
// Each 2x2 block of outputs comes from a 4x4 block of inputs: with the input tile d and the filter
// g, Y = A^T [(G g G^T) . (B^T d B)] A, where . multiplies element by element. Summed over input
// channels, the 16 element-wise products become 16 matrix products (tiles x C times C x M), so a
// convolution costs 16 multiply-adds per 4 outputs and channel pair instead of 36: 2.25x fewer.
// The transforms use only 0, +-1 and +-1/2, so the result rounds like the direct convolution
// (tests compare against the reference kernel at 1e-4 of the output scale).
//
//   WinogradWeights u = winograd_weights(w, m, c);           // once, at load: [16][C][M]
//   WinogradGeom g = winograd_geom(n, c, m, ih, iw, oh, ow, pad_top, pad_left);
//   winograd_conv(g, u, x, y, epilogue, workspace /* g.workspace_bytes() */, threads);
//
// Work goes through in chunks of tiles sized so the transformed inputs and products of one chunk
// stay in cache; each chunk is three parallel phases (input transform over tiles and channel
// blocks, the 16 products split between threads, output transform with bias, residual and
// activation over tiles and output channel blocks).

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/allocator.h"
#include "core/status.h"
#include "ops/cpu/onednn_common.h"

namespace streamline::ops::cpu {

// Transformed filters U[16][C][M]: tile position, input channel, output channel.
struct WinogradWeights {
  int64_t c = 0, m = 0;
  std::shared_ptr<AlignedBuffer> u;
};

// From ONNX weights [M][C][3][3]. Null `u` when out of memory.
WinogradWeights winograd_weights(const float* w, int64_t m, int64_t c);

struct WinogradGeom {
  int64_t n = 0, c = 0, m = 0, ih = 0, iw = 0, oh = 0, ow = 0, pad_top = 0, pad_left = 0;
  int64_t tiles_h = 0, tiles_w = 0;  // 2x2 output tiles down and across one image
  int64_t tiles = 0;                 // over the batch
  int64_t chunk = 0;                 // tiles per pass
  size_t workspace_bytes() const;
};

WinogradGeom winograd_geom(int64_t n, int64_t c, int64_t m, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                           int64_t pad_top, int64_t pad_left);

// Activations the output transform applies itself (none, Relu, LeakyRelu, Clip).
bool winograd_activation_ok(const Activation& a);

// Whether Winograd pays for a convolution of c -> m channels over `tiles` 2x2 output tiles (the
// whole batch): enough channels for the products to run near peak, and enough tiles that
// streaming the 16/9 larger transformed filters does not outweigh the saved arithmetic. On
// ResNet-50 (one thread, AVX2) it runs the 56x56, 28x28 and 14x14 layers 1.4x to 2x faster than
// oneDNN's direct convolution and gains nothing at 7x7 for one image (16 tiles), so 32 tiles is
// the floor: a 7x7 layer uses it from a batch of two.
bool winograd_worthwhile(int64_t c, int64_t m, int64_t tiles);
// Whether to transform a convolution's filters at load: it would use them for a batch of two.
bool winograd_candidate(int64_t c, int64_t m, int64_t tiles_per_image);

struct WinogradEpilogue {
  const float* bias = nullptr;  // [M], or null
  bool accumulate = false;      // y already holds the residual Z: y = act(conv + bias + y)
  Activation act;
};

// y (nChw8c, [n, m, oh, ow]) = act(conv(x, w) + bias [+ y]); x is nChw8c [n, c, ih, iw]; c and m
// multiples of 8; `workspace` at least g.workspace_bytes(), 64-byte aligned. Internal error only
// if oneDNN's sgemm refuses its arguments.
Status winograd_conv(const WinogradGeom& g, const WinogradWeights& w, const float* x, float* y,
                   const WinogradEpilogue& e, void* workspace, int threads);

}  // namespace streamline::ops::cpu
