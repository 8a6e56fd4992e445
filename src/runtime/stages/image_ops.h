#pragma once
// Image and classification helpers behind the ready-made pipeline stages: JPEG/PNG codecs
// (libjpeg-turbo, libpng), bilinear resize, centre crop, normalisation, HWC -> NCHW, softmax and
// top-k. Plain functions on Tensors, usable without a pipeline (tools, tests).
//
//   SL_ASSIGN_OR_RETURN(Tensor rgb, decode_image(bytes.data(), bytes.size(), {}));   // uint8 [H,W,3]
//   SL_ASSIGN_OR_RETURN(Tensor small, resize_bilinear(rgb, 224, 224));
//   SL_ASSIGN_OR_RETURN(Tensor x, normalize_hwc(small, mean, std, 1.f / 255.f));   // float32 [H,W,3]
//   SL_ASSIGN_OR_RETURN(Tensor nchw, hwc_to_nchw(x));                             // float32 [1,3,H,W]
//
// Every function validates its inputs (dtype, rank, sizes) and returns InvalidArgument instead of
// crashing; none keeps state, so all are thread-safe.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace streamline::runtime {

enum class ImageFormat { kUnknown, kJpeg, kPng };
// From the file's magic bytes.
ImageFormat sniff_image_format(const uint8_t* data, size_t size);

struct ImageDecodeOptions {
  int channels = 3;                       // 3 = RGB, 1 = grey
  int64_t max_pixels = int64_t{1} << 26;  // larger images are refused before allocation
};
// JPEG or PNG bytes -> uint8 [H, W, channels]. Corrupt, truncated or unsupported data ->
// InvalidArgument with the codec's message (libjpeg warnings count as errors).
Result<Tensor> decode_image(const uint8_t* data, size_t size, const ImageDecodeOptions& options);
Result<Tensor> decode_jpeg(const uint8_t* data, size_t size, const ImageDecodeOptions& options);
Result<Tensor> decode_png(const uint8_t* data, size_t size, const ImageDecodeOptions& options);

// uint8 [H, W, C] (C = 1 or 3) -> file bytes. For tests and tools.
Result<std::vector<uint8_t>> encode_jpeg(const Tensor& hwc, int quality);
Result<std::vector<uint8_t>> encode_png(const Tensor& hwc);

// uint8 or float32 [H, W, C] -> same dtype [out_h, out_w, C]. Bilinear with half-pixel centres
// (source x = (x + 0.5) * in / out - 0.5, clamped at the edges), no anti-aliasing; uint8 results
// are rounded to nearest.
Result<Tensor> resize_bilinear(const Tensor& hwc, int64_t out_h, int64_t out_w);
// Scales so the shorter side is `shorter` (the longer side truncated, at least 1).
Result<Tensor> resize_shorter_side(const Tensor& hwc, int64_t shorter);
// The centred h x w window; top = round((H - h) / 2), likewise left. h <= H and w <= W.
Result<Tensor> center_crop(const Tensor& hwc, int64_t h, int64_t w);
// uint8 or float32 [H, W, C] -> float32 [H, W, C]: (x * scale - mean[c]) / std[c]. mean and std
// hold C values or one for every channel; std values must be non-zero.
Result<Tensor> normalize_hwc(const Tensor& hwc, std::span<const float> mean, std::span<const float> std, float scale);
// [H, W, C] -> [1, C, H, W], same dtype (any fixed-size dtype).
Result<Tensor> hwc_to_nchw(const Tensor& hwc);

// float32 [..., K] -> softmax over the last axis (max-subtracted).
Result<Tensor> softmax_last_axis(const Tensor& logits);
struct TopK {
  Tensor indices;  // int64
  Tensor scores;   // float32
};
// float32 [N, K] -> [N, k]; [K] -> [k]. Highest first, ties by lower index, NaN after every number.
// k is clamped to K (k >= 1).
Result<TopK> top_k_last_axis(const Tensor& scores, int k);

}  // namespace streamline::runtime
