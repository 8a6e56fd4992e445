// CUDA runtime error codes to Status; see cuda_status.h. (cuDNN and cuBLAS: library_status.cc.)

#include "core/cuda/cuda_status.h"

#include <string>

namespace streamline::cuda {

Status detail::make_status(StatusCode code, std::string_view call, const char* file, int line, std::string_view context,
                           std::string_view name, std::string_view text) {
  std::string m;
  m.reserve(call.size() + context.size() + name.size() + text.size() + 64);
  m.append(call).append(" failed at ").append(short_source_path(file)).append(":").append(std::to_string(line));
  if (!context.empty()) m.append(" [").append(context).append("]");
  m.append(": ").append(name);
  if (!text.empty() && text != name) m.append(": ").append(text);
  return Status(code, std::move(m));
}

namespace {

StatusCode code_of(cudaError_t e) {
  switch (e) {
    case cudaErrorMemoryAllocation:
      return StatusCode::kResourceExhausted;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return StatusCode::kUnavailable;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
      return StatusCode::kInvalidArgument;
    case cudaErrorNotSupported:
    case cudaErrorNoKernelImageForDevice:
      return StatusCode::kUnsupported;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

std::string_view short_source_path(const char* file) {
  if (file == nullptr) return "?";
  std::string_view f(file);
  const size_t pos = f.rfind("/src/");
  return pos == std::string_view::npos ? f : f.substr(pos + 1);
}

Status cuda_status(cudaError_t err, std::string_view call, const char* file, int line, std::string_view context) {
  if (err == cudaSuccess) return ok_status();
  const char* name = cudaGetErrorName(err);
  const char* text = cudaGetErrorString(err);
  return detail::make_status(code_of(err), call, file, line, context, name ? name : "cudaError", text ? text : "");
}

}  // namespace streamline::cuda
