#pragma once
// CUDA devices: what is there, and whether the backend can run at all.
//
//   SL_ASSIGN_OR_RETURN(std::vector<exec::cuda::DeviceInfo> devs, exec::cuda::query_devices());
//   std::cout << devs[0].describe();      // "0: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
//
//   if (Status s = exec::cuda::require_device(); !s.ok()) { /* run on CPU, or skip the test */ }
//   std::cout << exec::cuda::backend_summary();  // "CUDA: yes (runtime 13.0, driver 13.0, ...)"
//
// Without a GPU or without a driver every query returns a clean Unavailable Status naming the
// CUDA call and its error; nothing aborts. All functions are thread-safe. The first call
// initialises the CUDA runtime (tens to hundreds of milliseconds on a GPU machine).

#include <cstddef>
#include <string>
#include <vector>

#include "core/status.h"

namespace streamline::exec::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;                // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;  // compute capability, 9.0 for Hopper
  size_t total_memory = 0;         // bytes of device memory
  int multiprocessors = 0;
  std::string describe() const;  // "0: NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
};

// CUDA versions as major*1000 + minor*10 (13000 is 13.0); driver is 0 when no driver is installed.
struct CudaVersions {
  int runtime = 0;
  int driver = 0;
  int cudnn = 0;  // cudnnGetVersion(): major*10000 + minor*100 + patch (91900 is 9.19.0)
};
CudaVersions cuda_versions();
// "13.0" from 13000.
std::string cuda_version_string(int version);

// Number of devices; Unavailable (with the CUDA error) when there is no device or no driver.
Result<int> device_count();
// One device's properties; InvalidArgument for an ordinal out of range.
Result<DeviceInfo> query_device(int ordinal);
// Every device; Unavailable when there is none.
Result<std::vector<DeviceInfo>> query_devices();
// OK when at least one device can run our kernels; otherwise the reason (for skips and fallbacks).
Status require_device();

// The backend line of `streamline --version`: "CUDA: yes (runtime 13.0, driver 13.0, cuDNN 9.19.0,
// 1 device: NVIDIA H200 sm_90)" or "CUDA: yes (runtime 13.0, cuDNN 9.19.0, no device: ...)".
std::string backend_summary();

}  // namespace streamline::exec::cuda
