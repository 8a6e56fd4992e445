#pragma once
// Conversions between plain (NCHW), channels-last (NHWC) and blocked (nChw8c, nChw16c) storage of rank-4
// tensors.
//
//   Tensor nhwc = to_layout(t, Layout::kChannelsLast);   // new owned tensor, same logical shape
//   convert_layout(src, dst);                              // into preallocated dst (no allocation)

#include "core/status.h"
#include "core/tensor.h"

namespace streamline {

// Copies src into dst, changing layout as dst.layout() says. Shapes and dtypes must match;
// a layout other than plain needs rank 4. `num_threads` bounds OpenMP threads used.
Status convert_layout(const Tensor& src, Tensor& dst, int num_threads = 1);
// Returns src in `layout` (src itself when already so), converted on up to `num_threads` threads.
Result<Tensor> to_layout(const Tensor& src, Layout layout, int num_threads = 1);

}  // namespace streamline
