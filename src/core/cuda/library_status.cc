// cuDNN and cuBLAS(Lt) error codes to Status; see cuda_status.h. Kept apart from the CUDA runtime
// part so that code needing only the runtime (the device layer) does not link these libraries.

#include "core/cuda/cuda_status.h"

namespace streamline::cuda {

Status cudnn_status(cudnnStatus_t err, std::string_view call, const char* file, int line, std::string_view context) {
  if (err == CUDNN_STATUS_SUCCESS) return ok_status();
  StatusCode code = StatusCode::kInternal;
  // cuDNN 9 groups codes by thousands: 1xxx uncategorised, 2xxx bad parameter, 3xxx not
  // supported, 4xxx internal, 5xxx execution failed.
  switch (err) {
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
      code = StatusCode::kResourceExhausted;
      break;
    case CUDNN_STATUS_NOT_INITIALIZED:
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
      code = StatusCode::kUnavailable;
      break;
    default:
      if (err / 1000 == 2) code = StatusCode::kInvalidArgument;
      if (err / 1000 == 3) code = StatusCode::kUnsupported;
      break;
  }
  const char* text = cudnnGetErrorString(err);
  return detail::make_status(code, call, file, line, context, text ? text : "CUDNN_STATUS_UNKNOWN", "");
}

Status cublas_status(cublasStatus_t err, std::string_view call, const char* file, int line, std::string_view context) {
  if (err == CUBLAS_STATUS_SUCCESS) return ok_status();
  StatusCode code = StatusCode::kInternal;
  switch (err) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      code = StatusCode::kResourceExhausted;
      break;
    case CUBLAS_STATUS_INVALID_VALUE:
      code = StatusCode::kInvalidArgument;
      break;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      code = StatusCode::kUnsupported;
      break;
    case CUBLAS_STATUS_NOT_INITIALIZED:
      code = StatusCode::kUnavailable;
      break;
    default:
      break;
  }
  const char* name = cublasLtGetStatusName(err);
  const char* text = cublasLtGetStatusString(err);
  return detail::make_status(code, call, file, line, context, name ? name : "CUBLAS_STATUS_UNKNOWN", text ? text : "");
}

}  // namespace streamline::cuda
