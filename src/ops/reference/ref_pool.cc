#include "ops/reference/reference.h"

namespace streamline::ops::reference {

Status register_pool(KernelRegistry& reg) { return ok_status(); }

}  // namespace streamline::ops::reference
