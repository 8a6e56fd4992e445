#include "ops/registry.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

namespace streamline::ops {

const char* device_name(Device d) { return d == Device::kCuda ? "cuda" : "cpu"; }

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kFp16: return "fp16";
  }
  return "?";
}

Status KernelRegistry::add(KernelDef def) {
  if (!def.create) return invalid_argument("kernel def for " + def.op + " has no factory");
  for (const auto& d : defs_) {
    if (d.op == def.op && d.domain == def.domain && d.device == def.device && d.dtype == def.dtype &&
        d.since_version <= def.end_version && def.since_version <= d.end_version) {
      return invalid_argument("duplicate kernel registration for " + def.op + " (domain '" + def.domain +
                              "', opsets " + std::to_string(def.since_version) + ".." +
                              std::to_string(def.end_version) + ", " + device_name(def.device) + ", " +
                              dtype_name(def.dtype) + ")");
    }
  }
  defs_.push_back(std::move(def));
  return ok_status();
}

Result<const KernelDef*> KernelRegistry::find(const std::string& op, const std::string& domain, int opset,
                                              Device device, DType dtype) const {
  const KernelDef* generic = nullptr;
  bool op_known = false;
  for (const auto& d : defs_) {
    if (d.op != op || d.domain != domain || d.device != device) continue;
    if (opset < d.since_version || opset > d.end_version) continue;
    op_known = true;
    if (d.dtype == dtype) return &d;
    // A dtype-generic kernel moves fixed-size elements; string tensors take kernels made for them.
    if (d.dtype == DType::kUndefined && !generic && dtype != DType::kString) generic = &d;
  }
  if (generic) return generic;
  if (op_known)
    return unsupported(op + " has no " + device_name(device) + " kernel for dtype " + dtype_name(dtype));
  return unsupported(op + (domain.empty() ? "" : " (domain " + domain + ")") + " opset " + std::to_string(opset) +
                     " has no " + device_name(device) + " kernel");
}

Result<const KernelDef*> KernelRegistry::find_for_inputs(const std::string& op, const std::string& domain, int opset,
                                                         Device device, const std::vector<DType>& input_dtypes) const {
  SL_ASSIGN_OR_RETURN(const KernelDef* def, find(op, domain, opset, device, selector_dtype(input_dtypes, 0)));
  SL_ASSIGN_OR_RETURN(def, find(op, domain, opset, device, selector_dtype(input_dtypes, def->dtype_input)));
  const bool strings = std::find(input_dtypes.begin(), input_dtypes.end(), DType::kString) != input_dtypes.end();
  if (strings && def->dtype != DType::kString) return find(op, domain, opset, device, DType::kString);
  return def;
}

bool KernelRegistry::has_op(const std::string& op, const std::string& domain, int opset, Device device) const {
  for (const auto& d : defs_)
    if (d.op == op && d.domain == domain && d.device == device && opset >= d.since_version &&
        opset <= d.end_version)
      return true;
  return false;
}

const KernelRegistry& default_cpu_registry() {
  static const KernelRegistry* reg = [] {
    auto* r = new KernelRegistry();
    const Status s = register_cpu_kernels(*r);
    if (!s.ok()) {
      std::cerr << "streamline: internal error registering CPU kernels: " << s.to_string() << std::endl;
      std::abort();
    }
    return r;
  }();
  return *reg;
}

DType selector_dtype(const std::vector<DType>& input_dtypes, int index) {
  if (index >= 0 && static_cast<size_t>(index) < input_dtypes.size() &&
      input_dtypes[static_cast<size_t>(index)] != DType::kUndefined)
    return input_dtypes[static_cast<size_t>(index)];
  for (DType t : input_dtypes)
    if (t != DType::kUndefined) return t;
  return DType::kUndefined;
}

}  // namespace streamline::ops
