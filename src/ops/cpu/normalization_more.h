#pragma once
// BatchNormalization in training mode (normalization_more.cc), reached from the inference def.
//
//   if (node.attr_int("training_mode", 0) != 0) return make_batch_norm_training(args);

#include "ops/registry.h"

namespace streamline::ops::cpu {

// The training-mode kernel for a BatchNormalization node: batch statistics, running mean/variance.
Result<std::unique_ptr<Kernel>> make_batch_norm_training(const KernelCreateArgs& args);

}  // namespace streamline::ops::cpu
