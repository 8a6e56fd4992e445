#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu::math {

std::string node_prefix(const graph::Node& node) {
  return node.describe() + ": ";
}

Result<std::vector<int64_t>> normalize_axes(const graph::Node& node, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t axis : axes) {
    SL_ASSIGN_OR_RETURN(const int64_t a, normalize_axis(axis, rank, node.describe()));
    out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Status check_dtype(const graph::Node& node, DType dtype, std::initializer_list<DType> allowed, const char* what) {
  for (DType t : allowed)
    if (t == dtype) return ok_status();
  std::string names;
  for (DType t : allowed) names += std::string(names.empty() ? "" : ", ") + dtype_name(t);
  return unsupported(node_prefix(node) + what + " dtype " + dtype_name(dtype) + " is not supported (expected " + names +
                     ")");
}

Status register_ops(KernelRegistry& reg, std::initializer_list<const char*> ops, int since, int end,
                    const KernelFactory& factory, const char* provider) {
  for (const char* op : ops) {
    KernelDef def;
    def.op = op;
    def.domain = "";
    def.since_version = since;
    def.end_version = end;
    def.device = Device::kCpu;
    def.dtype = DType::kUndefined;
    def.provider = provider;
    def.create = factory;
    SL_RETURN_IF_ERROR(reg.add(std::move(def)));
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu::math
