// The CUDA backend (exec/backend.h): CUDA kernels plus the CPU ones, one DeviceConstants per model
// and GPU, CudaExecutionContexts, and CUDA IPC memory for shared device memory.

#include "exec/cuda/backend.h"

#include <map>
#include <mutex>

#include "exec/cuda/device.h"
#include "exec/cuda/executor.h"
#include "exec/cuda/ipc_memory.h"
#include "ops/cuda/cuda_kernels.h"

namespace streamline::exec::cuda {
namespace {

// One model's weights on each GPU, uploaded on first use and shared by all its contexts there.
class CudaWeights final : public DeviceWeights {
 public:
  Result<std::unique_ptr<ExecutionContext>> make_context(const ContextOptions& options) override {
    if (Status s = require_device(); !s.ok())
      return s.with_context("running on cuda:" + std::to_string(options.device));
    CudaContextOptions co;
    co.context = options;
    SL_ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutionContext> ctx,
                        CudaExecutionContext::create(on(options.device), co));
    return std::unique_ptr<ExecutionContext>(std::move(ctx));
  }
  size_t bytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [_, s] : stores_) n += s->bytes();
    return n;
  }

 private:
  std::shared_ptr<DeviceConstants> on(int ordinal) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& s = stores_[ordinal];
    if (!s) s = std::make_shared<DeviceConstants>(ordinal);
    return s;
  }
  mutable std::mutex mu_;
  std::map<int, std::shared_ptr<DeviceConstants>> stores_;
};

class CudaBackend final : public Backend {
 public:
  ops::Device device() const override { return ops::Device::kCuda; }
  Result<const ops::KernelRegistry*> kernels() const override {
    static const Result<const ops::KernelRegistry*> reg = []() -> Result<const ops::KernelRegistry*> {
      auto* r = new ops::KernelRegistry();
      SL_RETURN_IF_ERROR(ops::register_cpu_kernels(*r));
      SL_RETURN_IF_ERROR(ops::cuda::register_cuda_kernels(*r));
      return r;
    }();
    return reg;
  }
  int device_count() const override {
    auto n = cuda::device_count();
    return n.ok() ? *n : 0;
  }
  std::string summary() const override { return backend_summary(); }
  Result<std::shared_ptr<DeviceWeights>> attach_model() const override {
    return std::shared_ptr<DeviceWeights>(std::make_shared<CudaWeights>());
  }
  Result<std::unique_ptr<ImportedDeviceMemory>> import_ipc_memory(const std::string& raw_handle, int device,
                                                                  size_t bytes) const override {
    return cuda::import_ipc_memory(raw_handle, device, bytes);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend() {
  return std::make_unique<CudaBackend>();
}

}  // namespace streamline::exec::cuda
