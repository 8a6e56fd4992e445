#include "ops/cpu/families.h"

namespace streamline::ops::cpu {

Status register_normalization(KernelRegistry& reg) { return ok_status(); }

}  // namespace streamline::ops::cpu
