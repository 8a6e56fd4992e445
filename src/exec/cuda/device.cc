// Device queries and the backend summary; see device.h.

#include "exec/cuda/device.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdio>

#include "core/cuda/cuda_status.h"

namespace streamline::exec::cuda {

std::string DeviceInfo::describe() const {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(total_memory) / (1024.0 * 1024.0 * 1024.0));
  return std::to_string(ordinal) + ": " + name + " (sm_" + std::to_string(cc_major) + std::to_string(cc_minor) + ", " +
         std::to_string(multiprocessors) + " SMs, " + buf + ")";
}

CudaVersions cuda_versions() {
  CudaVersions v;
  if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) v.runtime = 0;
  if (cudaDriverGetVersion(&v.driver) != cudaSuccess) v.driver = 0;
  v.cudnn = static_cast<int>(cudnnGetVersion());
  return v;
}

std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

Result<int> device_count() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  // Clear the runtime's last error so that a failed probe does not leak into later calls.
  (void)cudaGetLastError();
  if (err != cudaSuccess) {
    Status s = streamline::cuda::cuda_status(err, "cudaGetDeviceCount(&n)", __FILE__, __LINE__, "device query");
    return Status(StatusCode::kUnavailable, s.message());
  }
  if (n <= 0) return unavailable("no CUDA device found (cudaGetDeviceCount returned 0)");
  return n;
}

Result<DeviceInfo> query_device(int ordinal) {
  SL_ASSIGN_OR_RETURN(int n, device_count());
  if (ordinal < 0 || ordinal >= n)
    return invalid_argument("CUDA device " + std::to_string(ordinal) + " out of range (" + std::to_string(n) +
                            " devices)");
  cudaDeviceProp p{};
  SL_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&p, ordinal), "device " + std::to_string(ordinal));
  DeviceInfo d;
  d.ordinal = ordinal;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.total_memory = p.totalGlobalMem;
  d.multiprocessors = p.multiProcessorCount;
  return d;
}

Result<std::vector<DeviceInfo>> query_devices() {
  SL_ASSIGN_OR_RETURN(int n, device_count());
  std::vector<DeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    SL_ASSIGN_OR_RETURN(DeviceInfo d, query_device(i));
    out.push_back(std::move(d));
  }
  return out;
}

Status require_device() {
  SL_ASSIGN_OR_RETURN(DeviceInfo d, query_device(0));
  // Our kernels are compiled for sm_75 and newer (CUDA 13 dropped older architectures).
  if (d.cc_major < 7 || (d.cc_major == 7 && d.cc_minor < 5))
    return unsupported("CUDA device " + d.describe() + " is older than sm_75");
  return ok_status();
}

std::string backend_summary() {
  const CudaVersions v = cuda_versions();
  std::string s = "CUDA: yes (runtime " + cuda_version_string(v.runtime);
  if (v.driver > 0) s += ", driver " + cuda_version_string(v.driver);
  s += ", cuDNN " + std::to_string(v.cudnn / 10000) + "." + std::to_string((v.cudnn / 100) % 100) + "." +
       std::to_string(v.cudnn % 100);
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  if (err != cudaSuccess) return s + ", no device: " + cudaGetErrorString(err) + ")";
  auto devs = query_devices();
  if (!devs.ok()) return s + ", no device: " + devs.status().message() + ")";
  s += ", " + std::to_string(devs->size()) + (devs->size() == 1 ? " device:" : " devices:");
  for (const DeviceInfo& d : *devs)
    s += " " + d.name + " sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor);
  return s + ")";
}

}  // namespace streamline::exec::cuda
