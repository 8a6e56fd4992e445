#pragma once
// Runs plans on a model's device: the CPU executor, or the CUDA executor when the backend is built
// in. Sessions and serving instances hold one DeviceRunner each (one execution context).
//
//   SL_ASSIGN_OR_RETURN(DeviceSpec d, parse_device("cuda:1"));          // kind kCuda, ordinal 1
//   SL_ASSIGN_OR_RETURN(auto runner, make_device_runner(*model, /*ordinal=*/1, {}));
//   SL_RETURN_IF_ERROR(runner->run(*plan, inputs, &outputs, run_options));
//
// Without the CUDA backend, or without a usable GPU, make_device_runner for a CUDA model returns
// Unsupported / Unavailable naming the reason; nothing aborts. Thread-safety: a runner is used by
// one thread at a time; DeviceWeights is thread-safe.

#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "ops/registry.h"
#include "plan/execution_plan.h"

namespace streamline {
class Model;
}

namespace streamline::runtime {

// "cpu", "cuda" (every visible GPU; sessions use GPU 0, serving instances spread over all) or
// "cuda:N" (GPU N).
struct DeviceSpec {
  ops::Device kind = ops::Device::kCpu;
  int ordinal = 0;
  bool all_gpus = false;  // "cuda" without an ordinal
  std::string to_string() const;
};
Result<DeviceSpec> parse_device(const std::string& text);
// "fp32", "tf32", "fp16".
Result<ops::Precision> parse_precision(const std::string& text);

// Whether the CUDA backend is compiled in, and the number of usable GPUs (0 without any).
bool cuda_built();
int cuda_device_count();

// CPU kernels plus, with the backend, CUDA kernels: the registry CUDA models load with.
Result<const ops::KernelRegistry*> cuda_kernel_registry();

// One model's weights on each GPU, uploaded on first use and shared by all its contexts there.
class DeviceWeights {
 public:
  DeviceWeights() = default;
  // The backend's constant store for `ordinal` (type-erased: the CUDA types stay out of this header).
  std::shared_ptr<void> on(int ordinal);
  // Device bytes held over all GPUs.
  size_t bytes() const;

 private:
  mutable std::mutex mu_;
  std::map<int, std::shared_ptr<void>> stores_;
};

struct RunnerOptions {
  exec::ContextOptions cpu;  // CPU contexts: stream pinning
  bool cuda_graphs = true;   // CUDA contexts: capture plans into CUDA graphs after warm-up
};

class DeviceRunner {
 public:
  virtual ~DeviceRunner() = default;
  // Runs `plan` with host inputs; host outputs (views valid until the next run when
  // options.copy_outputs is false).
  virtual Status run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                     const exec::RunOptions& options) = 0;
  // Memory the context holds for activations (host arena or device block).
  virtual size_t arena_bytes() const = 0;
  // "cpu" or "cuda:N".
  virtual std::string device() const = 0;
};

// A runner for `model` on its device; `ordinal` picks the GPU for CUDA models.
Result<std::unique_ptr<DeviceRunner>> make_device_runner(const Model& model, int ordinal, const RunnerOptions& options);

}  // namespace streamline::runtime
