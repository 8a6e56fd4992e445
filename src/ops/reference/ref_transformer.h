#pragma once
// Reference kernels for the transformer fusions: streamline.LayerNormalization, streamline.Gelu and
// streamline.Attention (plain loops in double precision, one thread). register_reference_kernels()
// calls register_transformer(), so a reference registry runs fused graphs too.

#include "ops/registry.h"

namespace streamline::ops::reference {

Status register_transformer(KernelRegistry& reg);  // streamline.LayerNormalization, Gelu, Attention

}  // namespace streamline::ops::reference
