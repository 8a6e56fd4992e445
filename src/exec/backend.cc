#include "exec/backend.h"

#include "exec/cpu_executor.h"
#include "exec/eager_executor.h"

namespace streamline::exec {

Status BackendRegistry::add(std::unique_ptr<Backend> backend) {
  if (!backend) return invalid_argument("no backend given");
  std::lock_guard<std::mutex> lock(mu_);
  const std::string name = backend->name();
  for (const auto& b : backends_)
    if (b->name() == name) return invalid_argument("a backend named '" + name + "' is registered already");
  backends_.push_back(std::move(backend));
  return ok_status();
}

Result<Backend*> BackendRegistry::find(ops::Device device) const {
  if (auto b = find(std::string(ops::device_name(device))); b.ok()) return b;
  if (device == ops::Device::kCuda)
    return unsupported("this build has no CUDA backend (configure with the CUDA toolkit and cuDNN, SL_CUDA=ON)");
  return unsupported(std::string("no backend for ") + ops::device_name(device));
}

Result<Backend*> BackendRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string known;
  for (const auto& b : backends_) {
    if (b->name() == name) return b.get();
    known += (known.empty() ? "" : ", ") + b->name();
  }
  return not_found("no backend named '" + name + "' (registered: " + (known.empty() ? "none" : known) + ")");
}

std::vector<std::string> BackendRegistry::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& b : backends_) out.push_back(b->name());
  return out;
}

Status ImportedDeviceMemory::read(size_t offset, void* dst, size_t n) const {
  SL_RETURN_IF_ERROR(check_range(offset, n));
  return copy_to_host(offset, dst, n);
}

Status ImportedDeviceMemory::write(size_t offset, const void* src, size_t n) {
  SL_RETURN_IF_ERROR(check_range(offset, n));
  return copy_from_host(offset, src, n);
}

Status ImportedDeviceMemory::check_range(size_t offset, size_t n) const {
  if (offset > bytes_ || n > bytes_ - offset)
    return invalid_argument("shared device memory: offset " + std::to_string(offset) + " + " + std::to_string(n) +
                            " bytes is past the region's " + std::to_string(bytes_));
  return ok_status();
}

Result<std::unique_ptr<ImportedDeviceMemory>> Backend::import_ipc_memory(const std::string&, int, size_t) const {
  return unsupported(std::string("the ") + ops::device_name(device()) +
                     " backend has no device memory to share by IPC handle");
}

bool BackendRegistry::has(ops::Device device) const {
  return find(device).ok();
}

namespace {

// CPU models keep their weights in their kernels: the per-model state only makes contexts.
class CpuWeights final : public DeviceWeights {
 public:
  Result<std::unique_ptr<ExecutionContext>> make_context(const ContextOptions& options) override {
    return std::unique_ptr<ExecutionContext>(new CpuExecutionContext(options));
  }
  size_t bytes() const override { return 0; }
};

class CpuBackend final : public Backend {
 public:
  ops::Device device() const override { return ops::Device::kCpu; }
  Result<const ops::KernelRegistry*> kernels() const override { return &ops::default_cpu_registry(); }
  int device_count() const override { return 1; }
  std::string summary() const override { return "CPU"; }
  Result<std::shared_ptr<DeviceWeights>> attach_model() const override {
    return std::shared_ptr<DeviceWeights>(std::make_shared<CpuWeights>());
  }
};

// Eager contexts keep nothing per model either.
class EagerWeights final : public DeviceWeights {
 public:
  Result<std::unique_ptr<ExecutionContext>> make_context(const ContextOptions&) override {
    return std::unique_ptr<ExecutionContext>(new EagerExecutionContext());
  }
  size_t bytes() const override { return 0; }
};

class EagerBackend final : public Backend {
 public:
  ops::Device device() const override { return ops::Device::kCpu; }
  std::string name() const override { return "eager"; }
  Result<const ops::KernelRegistry*> kernels() const override { return &ops::default_cpu_registry(); }
  int device_count() const override { return 1; }
  std::string summary() const override { return "eager (CPU, node by node)"; }
  Result<std::shared_ptr<DeviceWeights>> attach_model() const override {
    return std::shared_ptr<DeviceWeights>(std::make_shared<EagerWeights>());
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

std::unique_ptr<Backend> make_eager_backend() {
  return std::make_unique<EagerBackend>();
}

}  // namespace streamline::exec
