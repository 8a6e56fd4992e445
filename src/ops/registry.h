#pragma once
// The kernel registry: KernelDefs keyed by (op, domain, opset range, device, dtype).
//
//   KernelRegistry reg;
//   SL_RETURN_IF_ERROR(register_cpu_kernels(reg));   // every CPU family, once
//   SL_ASSIGN_OR_RETURN(const KernelDef* def, reg.find("Conv", "", 13, Device::kCpu, DType::kFloat32));
//
// A duplicate key (same op, domain, device, dtype with overlapping opset ranges) is an error from
// add(). Lookup prefers an exact dtype over a dtype-generic (kUndefined) def.
// Thread-safety: build once, then read concurrently.

#include <climits>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/kernel.h"

namespace streamline::ops {

using KernelFactory = std::function<Result<std::unique_ptr<Kernel>>(const KernelCreateArgs&)>;

struct KernelDef {
  std::string op;
  std::string domain;                 // "" = ai.onnx, "streamline" for fused ops
  int since_version = 1;              // first opset this def serves
  int end_version = INT_MAX;          // last opset this def serves
  Device device = Device::kCpu;
  DType dtype = DType::kUndefined;    // type the def is for; kUndefined = any type
  int dtype_input = 0;                // which input's dtype selects the def
  std::string provider = "cpu";       // "onednn", "cpu", "reference": shown in dumps
  KernelFactory create;
};

class KernelRegistry {
 public:
  Status add(KernelDef def);
  // The def for this key, or NotFound/Unsupported with a message naming what is missing.
  Result<const KernelDef*> find(const std::string& op, const std::string& domain, int opset, Device device,
                                DType dtype) const;
  // Whether any def serves (op, domain, opset, device) regardless of dtype.
  bool has_op(const std::string& op, const std::string& domain, int opset, Device device) const;
  const std::vector<KernelDef>& defs() const { return defs_; }

 private:
  std::vector<KernelDef> defs_;
};

// Every optimised CPU kernel family (defined in ops/cpu/families.cc).
Status register_cpu_kernels(KernelRegistry& reg);
// Plain reference kernels for the optimised ops, used by tests (ops/reference/).
Status register_reference_kernels(KernelRegistry& reg);

// The process-wide registry with all CPU kernels, built on first use. Aborts only if our own
// registration is inconsistent (a duplicate key), which is a bug, not user input.
const KernelRegistry& default_cpu_registry();
// Channels per block of the blocked layout the CPU kernels run fastest on: 16 (nChw16c) when
// oneDNN runs AVX-512 code on this CPU, else 8 (nChw8c).
int native_block();

// Selects the dtype that keys a node's kernel: the dtype of input `def.dtype_input`, or of the
// first present input. Helper for the planner and tests.
DType selector_dtype(const std::vector<DType>& input_dtypes, int index);

}  // namespace streamline::ops
