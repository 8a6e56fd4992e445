#include "runtime/device.h"

#include <cstdlib>

#include "core/logging.h"

namespace streamline::runtime {

std::string DeviceSpec::to_string() const {
  if (kind == ops::Device::kCpu) return backend;
  return all_gpus ? "cuda" : "cuda:" + std::to_string(ordinal);
}

Result<DeviceSpec> parse_device(const std::string& text) {
  DeviceSpec d;
  if (text.empty() || text == "cpu") return d;
  if (text == "eager") {
    d.backend = "eager";
    return d;
  }
  d.backend = "cuda";
  if (text == "cuda" || text == "gpu") {
    d.kind = ops::Device::kCuda;
    d.all_gpus = true;
    return d;
  }
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    const std::string n = text.substr(5);
    char* end = nullptr;
    const long v = std::strtol(n.c_str(), &end, 10);
    if (end && *end == '\0' && v >= 0 && v < 1024) {
      d.kind = ops::Device::kCuda;
      d.ordinal = static_cast<int>(v);
      return d;
    }
  }
  return invalid_argument("unknown device '" + text + "' (expected cpu, eager, cuda or cuda:N)");
}

Result<ops::Precision> parse_precision(const std::string& text) {
  if (text.empty() || text == "fp32") return ops::Precision::kFp32;
  if (text == "tf32") return ops::Precision::kTf32;
  if (text == "fp16") return ops::Precision::kFp16;
  return invalid_argument("unknown precision '" + text + "' (expected fp32, tf32 or fp16)");
}

namespace {

exec::BackendRegistry& registry() {
  static exec::BackendRegistry* const r = new exec::BackendRegistry();
  return *r;
}

}  // namespace

Status init_backends() {
  // A function-local static: registered exactly once even when threads race to start.
  static const Status status = [] {
    Status s = exec::register_builtin_backends(registry());
    // Only a duplicate name fails, which the built-in list cannot have: a broken build.
    if (!s.ok()) SL_LOG(kError) << "registering the built-in backends: " << s.to_string();
    return s;
  }();
  return status;
}

const exec::BackendRegistry& backends() {
  init_backends().ignore();  // a no-op after start-up; a failure was logged and is returned there
  return registry();
}

Result<exec::Backend*> backend_for(ops::Device device) {
  return backends().find(device);
}

Result<exec::Backend*> backend_for(const DeviceSpec& device) {
  // The device's own backend keeps find(Device)'s message for a build without CUDA.
  if (device.backend == ops::device_name(device.kind)) return backend_for(device.kind);
  return backends().find(device.backend);
}

bool cuda_built() {
  return backends().has(ops::Device::kCuda);
}

int cuda_device_count() {
  auto b = backend_for(ops::Device::kCuda);
  return b.ok() ? (*b)->device_count() : 0;
}

std::string accelerator_summary() {
  auto b = backend_for(ops::Device::kCuda);
  return b.ok() ? (*b)->summary() : "CUDA: no";
}

}  // namespace streamline::runtime
