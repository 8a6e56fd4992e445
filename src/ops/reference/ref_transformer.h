#pragma once
// Reference kernels for the transformer fusions: streamline.LayerNormalization, streamline.Gelu and
// streamline.Attention, and for the transformer ops of opset 23: Attention, RotaryEmbedding and
// RMSNormalization (plain loops in double precision, one thread). register_reference_kernels()
// calls both, so a reference registry runs fused graphs too.

#include "ops/registry.h"

namespace streamline::ops::reference {

Status register_transformer(KernelRegistry& reg);  // streamline.LayerNormalization, Gelu, Attention;
                                                   // RotaryEmbedding, RMSNormalization
Status register_attention(KernelRegistry& reg);    // Attention (opset 23+), ref_attention.cc

}  // namespace streamline::ops::reference
