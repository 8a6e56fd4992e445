#pragma once
// Sub-families of the CPU data kernels. register_shape_ops() and register_tensor_ops() (families.h)
// call these; each lives in its own data_*.cc file.

#include "ops/registry.h"

namespace streamline::ops::cpu {

// data_generate.cc: Constant, ConstantOfShape, Range, EyeLike, Trilu, OneHot.
Status register_generate_ops(KernelRegistry& reg);
// data_index.cc: Slice, Gather, GatherElements, GatherND, ScatterND, ScatterElements, Scatter.
Status register_index_ops(KernelRegistry& reg);
// data_pad.cc: Pad, Tile, Expand.
Status register_pad_ops(KernelRegistry& reg);
// data_resize.cc: Resize, Upsample.
Status register_resize_ops(KernelRegistry& reg);

}  // namespace streamline::ops::cpu
