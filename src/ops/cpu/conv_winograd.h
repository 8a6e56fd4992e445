#pragma once
// Winograd F(2x2, 3x3) and F(4x4, 3x3) for 3x3, stride-1, ungrouped float32 convolutions on
// blocked activations (nChw8c or nChw16c: `block` channels per vector).
//
// Each f x f block of outputs comes from a (f+2) x (f+2) block of inputs: with the input tile d
// and the filter g, Y = A^T [(G g G^T) . (B^T d B)] A, where . multiplies element by element.
// Summed over input channels, the (f+2)^2 element-wise products become as many matrix products
// (tiles x C times C x M): per output and channel pair F(2x2, 3x3) costs 4 multiply-adds and
// F(4x4, 3x3) 2.25 instead of 9. F(2x2)'s transforms use only 0, +-1 and +-1/2, so it rounds like
// the direct convolution; F(4x4)'s (points 0, +-1, +-2) lose a few more bits (tests bound both
// against a direct convolution in double).
//
//   WinogradWeights u = winograd_weights(w, m, c, f);        // once, at load: [(f+2)^2][C][M]
//   WinogradGeom g = winograd_geom(f, n, c, m, ih, iw, oh, ow, pad_top, pad_left);
//   winograd_conv(g, u, x, y, epilogue, workspace /* g.workspace_bytes() */, threads);
//
// Work goes through in chunks of tiles sized so the transformed inputs and products of one chunk
// stay in cache; each chunk is three phases (input transform over tiles and channel blocks, the
// matrix products, output transform with bias, residual and activation over tiles and output
// channel blocks). On several threads, a convolution with enough tiles gives each thread ranges
// of tiles that it takes through all three phases in its own share of the workspace (tasks of
// task_runner.h); one with few tiles shares each phase between the threads instead.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/allocator.h"
#include "core/status.h"
#include "ops/cpu/onednn_common.h"

namespace streamline::ops::cpu {

// Transformed filters U[T*T][C][M] (tile position, input channel, output channel) for output
// tiles of f x f (f = 2 or 4; T = f + 2).
struct WinogradWeights {
  int64_t c = 0, m = 0;
  int f = 2;
  int block = 8;  // channels per block of the activations these filters were made for
  std::shared_ptr<AlignedBuffer> u;
};

// From ONNX weights [M][C][3][3]. Null `u` when out of memory.
WinogradWeights winograd_weights(const float* w, int64_t m, int64_t c, int f);

struct WinogradGeom {
  int f = 2;  // output tile side
  int64_t n = 0, c = 0, m = 0, ih = 0, iw = 0, oh = 0, ow = 0, pad_top = 0, pad_left = 0;
  int64_t tiles_h = 0, tiles_w = 0;  // output tiles down and across one image
  int64_t tiles = 0;                 // over the batch
  int64_t chunk = 0;                 // tiles per pass
  int block = 8;                     // channels per block of x and y: 8 (nChw8c) or 16 (nChw16c)
  int64_t positions() const { return (f + 2) * (f + 2); }
  size_t workspace_bytes() const;
};

WinogradGeom winograd_geom(int f, int64_t n, int64_t c, int64_t m, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                           int64_t pad_top, int64_t pad_left);

// Activations the output transform applies itself (none, Relu, LeakyRelu, Clip).
bool winograd_activation_ok(const Activation& a);

// The output tile to transform a convolution's filters for at load, from its channels and the
// declared output size of one image: 0 (not a candidate: fewer than 16 channels either way, or
// not whole blocks of `block`), 4 from 28x28 outputs up, 2 below. On ResNet-50 (one thread) F(4x4)
// runs the 56x56 and 28x28 layers 1.25x faster than F(2x2) and the 14x14 ones 1.4x slower (16
// tiles of 4x4, a quarter of them padding, and 36/16 more transformed filters to stream). It
// rounds a little more: ResNet-50's output against PyTorch's moves from 2.3e-5 of its scale
// (direct or F(2x2) only) to 4.8e-5.
int winograd_tile(int block, int64_t c, int64_t m, int64_t oh, int64_t ow);

// Whether Winograd with filters for tile f pays for a batch of n images of oh x ow outputs:
// enough 2x2 tiles (32) that streaming the larger transformed filters does not outweigh the
// saved arithmetic. On ResNet-50 (one thread, AVX2) Winograd runs the 56x56, 28x28 and 14x14
// layers 1.4x to 2x faster than oneDNN's direct convolution and gains nothing at 7x7 for one
// image (16 tiles), which it uses from a batch of two.
bool winograd_worthwhile(int block, int f, int64_t c, int64_t m, int64_t n, int64_t oh, int64_t ow);

struct WinogradEpilogue {
  const float* bias = nullptr;  // [M], or null
  bool accumulate = false;      // y already holds the residual Z: y = act(conv + bias + y)
  Activation act;
};

// y ([n, m, oh, ow]) = act(conv(x, w) + bias [+ y]); x is [n, c, ih, iw]; both blocked by
// g.block, c and m multiples of it; `workspace` at least g.workspace_bytes(), 64-byte aligned. Internal error only
// if oneDNN's sgemm refuses its arguments.
Status winograd_conv(const WinogradGeom& g, const WinogradWeights& w, const float* x, float* y,
                     const WinogradEpilogue& e, void* workspace, int threads);

}  // namespace streamline::ops::cpu
