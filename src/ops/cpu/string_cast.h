#pragma once
// Cast and CastLike with a string side (strings.cc registers the string-input defs; cast.cc hands
// numeric -> string casts here). Numbers become their shortest decimal form that reads back to the
// same value ("0.039187793"), NaN and infinities "NaN", "INF", "-INF", bools "True"/"False"; strings
// parse as decimal or scientific numbers ("1e-5"), "INF"/"+INF"/"-INF"/"NaN" in any case, and a
// string such as "100.5" cast to an integer type truncates (100). A string that is no number is an
// InvalidArgument naming the element.
//
//   if (target == DType::kString) return make_string_cast(args, /*like=*/false);

#include "ops/registry.h"

namespace streamline::ops::cpu {

// The kernel for a Cast (`like` false: target from `to`) or CastLike (target: input 1's dtype) whose
// input or target is a string.
Result<std::unique_ptr<Kernel>> make_string_cast(const KernelCreateArgs& args, bool like);

}  // namespace streamline::ops::cpu
