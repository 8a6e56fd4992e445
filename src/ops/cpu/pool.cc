#include "ops/cpu/families.h"

namespace streamline::ops::cpu {

Status register_pool(KernelRegistry& reg) { return ok_status(); }

}  // namespace streamline::ops::cpu
