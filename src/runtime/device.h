#pragma once
// Devices as the runtime sees them: the device a model is loaded for ("cpu", "cuda", "cuda:N"),
// and the backend that runs it (exec/backend.h), registered once for the process at start-up.
//
//   SL_RETURN_IF_ERROR(init_backends());                               // at start-up; once
//   SL_ASSIGN_OR_RETURN(DeviceSpec d, parse_device("cuda:1"));        // kind kCuda, ordinal 1
//   SL_ASSIGN_OR_RETURN(exec::Backend * b, backend_for(d));            // Unsupported without CUDA
//   SL_ASSIGN_OR_RETURN(auto weights, b->attach_model());              // once per model
//   SL_ASSIGN_OR_RETURN(auto ctx, weights->make_context(co));          // per session or instance
//
// Without the CUDA backend, or without a usable GPU, the calls for a CUDA device return
// Unsupported / Unavailable naming the reason; nothing aborts. All functions are thread-safe.

#include <string>

#include "core/status.h"
#include "exec/backend.h"
#include "ops/kernel.h"

namespace streamline::runtime {

// "cpu", "cuda" (every visible GPU; sessions use GPU 0, serving instances spread over all),
// "cuda:N" (GPU N) or "eager" (the CPU, every shape set run node by node by the eager backend,
// with no plan: for checking a plan's results or isolating a kernel).
struct DeviceSpec {
  ops::Device kind = ops::Device::kCpu;
  int ordinal = 0;
  bool all_gpus = false;        // "cuda" without an ordinal
  std::string backend = "cpu";  // the registered backend's name (exec::BackendRegistry::find)
  bool eager() const { return backend == "eager"; }
  std::string to_string() const;
};
[[nodiscard]] Result<DeviceSpec> parse_device(const std::string& text);
// "fp32", "tf32", "fp16".
[[nodiscard]] Result<ops::Precision> parse_precision(const std::string& text);

// Registers the process's backends, the built-in ones (exec::register_builtin_backends: cpu,
// eager, and cuda in CUDA builds), once; later calls return the first call's status. Called at
// start-up: by the CLI's main and by every model's creation (Model::from_graph, which loading
// goes through), before anything looks a backend up.
[[nodiscard]] Status init_backends();
// The process's backends. Registered by init_backends; a caller that asks before any model was
// made (for the devices this process can use) runs it first, so the set never looks empty.
const exec::BackendRegistry& backends();
// The backend for `device`; Unsupported when the build has none.
[[nodiscard]] Result<exec::Backend*> backend_for(ops::Device device);
// The backend `device` names (its `backend`); Unsupported for CUDA in a build without it.
[[nodiscard]] Result<exec::Backend*> backend_for(const DeviceSpec& device);

// Whether the CUDA backend is compiled in, and the number of usable GPUs (0 without any).
bool cuda_built();
int cuda_device_count();
// The accelerator part of `streamline --version`: "CUDA: no", or the CUDA backend's summary.
std::string accelerator_summary();

}  // namespace streamline::runtime
