#pragma once
// Reference elementwise programs (graph/ew_program.h): every output element on its own, inputs
// indexed with NumPy broadcasting in plain layout, arithmetic in double. Used by the reference
// streamline.Elementwise and by the epilogues of the reference FusedConv, FusedMatMul and
// FusedGemm.
//
//   ref_apply_program(program, y.data<float>(), y.shape(), extras);   // y = program(y, extras...)

#include <span>

#include "core/tensor.h"
#include "graph/ew_program.h"

namespace streamline::ops::reference {

// y = program(y, inputs...): register 0 is y itself (shape y_shape), registers 1.. are `inputs`
// (float32 or bool, plain, broadcasting to y_shape).
void ref_apply_program(const graph::EwProgram& p, float* y, const Shape& y_shape, std::span<const Tensor> inputs);

// out = program(inputs...) with out of the inputs' broadcast shape.
void ref_run_program(const graph::EwProgram& p, std::span<const Tensor> inputs, float* out, const Shape& out_shape);

}  // namespace streamline::ops::reference
