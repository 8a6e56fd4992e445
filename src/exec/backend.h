#pragma once
// Backends: where plans run. Each device kind (CPU, CUDA) is one Backend that says which kernels
// its plans use and makes its ExecutionContexts; the layers above pick one by device and never
// name a device's types or test which backends the build has.
//
//   exec::BackendRegistry registry;
//   SL_RETURN_IF_ERROR(exec::register_builtin_backends(registry));     // once, at start-up
//   SL_ASSIGN_OR_RETURN(exec::Backend * b, registry.find(ops::Device::kCuda));  // Unsupported without it
//   SL_ASSIGN_OR_RETURN(const ops::KernelRegistry* kernels, b->kernels());     // to load the model with
//   SL_ASSIGN_OR_RETURN(std::shared_ptr<exec::DeviceWeights> w, b->attach_model());  // once per model
//   exec::ContextOptions co;  co.device = 1;
//   SL_ASSIGN_OR_RETURN(std::unique_ptr<exec::ExecutionContext> ctx, w->make_context(co));
//
// The runtime registers the built-in backends once, at start-up (runtime::init_backends). A backend
// whose device is missing (a CUDA build on a machine without a GPU) is still registered: making a
// context then fails with Unavailable naming the reason, and device_count() is 0.
// Thread-safety: Backend, DeviceWeights and a registry after registration are thread-safe.

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/execution_context.h"
#include "ops/registry.h"

namespace streamline::exec {

// One model's state on a backend: for CUDA its weights on each GPU, uploaded on first use and
// shared by every context there. Made once per model (Backend::attach_model), outlives its contexts'
// runs of that model's plans.
class DeviceWeights {
 public:
  virtual ~DeviceWeights() = default;
  // A new context for this model's plans (options.device picks the GPU). Thread-safe.
  [[nodiscard]] virtual Result<std::unique_ptr<ExecutionContext>> make_context(const ContextOptions& options) = 0;
  // Device bytes held for weights over all devices (0 on the CPU: weights stay in the kernels).
  virtual size_t bytes() const = 0;
};

// Device memory another process exported and this one mapped (for CUDA a cudaIpcMemHandle_t
// opened with cudaIpcOpenMemHandle), copied to and from host memory. Unmapped when destroyed.
// Made by Backend::import_ipc_memory. Thread-safe: copies are synchronous.
class ImportedDeviceMemory {
 public:
  virtual ~ImportedDeviceMemory() = default;
  // InvalidArgument (naming the range) when [offset, offset + n) is not inside the region.
  [[nodiscard]] Status read(size_t offset, void* dst, size_t n) const;
  [[nodiscard]] Status write(size_t offset, const void* src, size_t n);
  size_t size() const { return bytes_; }
  int device() const { return device_; }

 protected:
  ImportedDeviceMemory(int device, size_t bytes) : device_(device), bytes_(bytes) {}
  // The copies, called with a range already checked.
  [[nodiscard]] virtual Status copy_to_host(size_t offset, void* dst, size_t n) const = 0;
  [[nodiscard]] virtual Status copy_from_host(size_t offset, const void* src, size_t n) = 0;

 private:
  [[nodiscard]] Status check_range(size_t offset, size_t n) const;
  int device_;
  size_t bytes_;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual ops::Device device() const = 0;
  // The name the registry knows it by, unique there: the device's name ("cpu", "cuda") for the
  // backend that serves the device, another for one that runs plans differently ("eager").
  virtual std::string name() const { return ops::device_name(device()); }
  // The kernels plans for this device are made from (CUDA: its kernels and the CPU ones, for
  // what folds on the host).
  [[nodiscard]] virtual Result<const ops::KernelRegistry*> kernels() const = 0;
  // Usable devices now: 1 for the CPU; for CUDA the visible GPUs, 0 without any.
  virtual int device_count() const = 0;
  // One line for `streamline --version`: "CPU", or "CUDA: yes (runtime 13.0, ...)".
  virtual std::string summary() const = 0;
  // State for one model on this backend; made when the model loads.
  [[nodiscard]] virtual Result<std::shared_ptr<DeviceWeights>> attach_model() const = 0;
  // Maps `bytes` bytes of device memory another process shares by the handle `raw_handle` (CUDA:
  // the 64 bytes of a cudaIpcMemHandle_t) on device `device`. InvalidArgument for a malformed
  // handle or device; Unavailable when the device cannot open it; Unsupported on a backend
  // without device memory to share (the CPU one, which keeps this default).
  [[nodiscard]] virtual Result<std::unique_ptr<ImportedDeviceMemory>> import_ipc_memory(const std::string& raw_handle,
                                                                                        int device, size_t bytes) const;
};

class BackendRegistry {
 public:
  // InvalidArgument when a backend of the same name is registered already.
  [[nodiscard]] Status add(std::unique_ptr<Backend> backend);
  // The backend that serves `device` (the one named after it); Unsupported naming the device when
  // there is none (a build without CUDA).
  [[nodiscard]] Result<Backend*> find(ops::Device device) const;
  // The backend called `name`; NotFound listing the registered names for any other.
  [[nodiscard]] Result<Backend*> find(const std::string& name) const;
  bool has(ops::Device device) const;
  // The registered backends' names, in the order they were added.
  std::vector<std::string> names() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Backend>> backends_;
};

// The CPU backend: CPU stream contexts that also run eager plans (exec/cpu_executor.h).
std::unique_ptr<Backend> make_cpu_backend();
// The eager backend ("eager", on the CPU): contexts that run only eager plans, node by node
// (exec/eager_executor.h). The CPU backend's contexts run those too; this one is for callers that
// want the eager executor alone.
std::unique_ptr<Backend> make_eager_backend();

// Registers the backends this build has, in this order: cpu, eager, and cuda when the CUDA
// backend is compiled in. Defined once per build: exec/builtin_backends.cc without CUDA,
// exec/cuda/builtin_backends.cc with it (cmake/cuda.cmake picks the file). The runtime calls it
// once, at start-up (runtime::init_backends).
[[nodiscard]] Status register_builtin_backends(BackendRegistry& registry);

}  // namespace streamline::exec
