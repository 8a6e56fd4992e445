// CUDA, cuDNN and cuBLAS error codes as Status: codes, call text, source location and context.
// Runs without a GPU (the conversions only read the libraries' static tables).

#include "core/cuda/cuda_status.h"

#include <gtest/gtest.h>

namespace streamline::cuda {
namespace {

TEST(CudaStatus, RuntimeErrorsNameTheCallPlaceAndContext) {
  const Status s = cuda_status(cudaErrorMemoryAllocation, "cudaMalloc(&p, bytes)", "/any/where/src/exec/cuda/memory.cc",
                               42, "arena of 1024 bytes");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("cudaMalloc(&p, bytes) failed at src/exec/cuda/memory.cc:42"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("[arena of 1024 bytes]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cudaErrorMemoryAllocation"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("/any/where"), std::string::npos) << s.message();
}

TEST(CudaStatus, RuntimeErrorCodes) {
  EXPECT_TRUE(cuda_status(cudaSuccess, "f()", __FILE__, __LINE__).ok());
  EXPECT_EQ(cuda_status(cudaErrorNoDevice, "f()", __FILE__, 1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(cuda_status(cudaErrorInsufficientDriver, "f()", __FILE__, 1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(cuda_status(cudaErrorInvalidValue, "f()", __FILE__, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_status(cudaErrorNoKernelImageForDevice, "f()", __FILE__, 1).code(), StatusCode::kUnsupported);
  EXPECT_EQ(cuda_status(cudaErrorLaunchFailure, "f()", __FILE__, 1).code(), StatusCode::kInternal);
  // No context: no brackets.
  EXPECT_EQ(cuda_status(cudaErrorLaunchFailure, "f()", "x.cc", 7).message().find('['), std::string::npos);
}

TEST(CudaStatus, CudnnErrorCodes) {
  EXPECT_TRUE(cudnn_status(CUDNN_STATUS_SUCCESS, "g()", __FILE__, 1).ok());
  const Status s = cudnn_status(CUDNN_STATUS_NOT_SUPPORTED, "cudnnConvolutionForward(...)", __FILE__, 9, "Conv 'c1'");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("CUDNN_STATUS_NOT_SUPPORTED"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[Conv 'c1']"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("tests/cuda/cuda_status_test.cc:9"), std::string::npos) << s.message();
  EXPECT_EQ(cudnn_status(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, "g()", __FILE__, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cudnn_status(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, "g()", __FILE__, 1).code(), StatusCode::kUnsupported);
  EXPECT_EQ(cudnn_status(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, "g()", __FILE__, 1).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(cudnn_status(CUDNN_STATUS_NOT_INITIALIZED, "g()", __FILE__, 1).code(), StatusCode::kUnavailable);
  EXPECT_EQ(cudnn_status(CUDNN_STATUS_EXECUTION_FAILED, "g()", __FILE__, 1).code(), StatusCode::kInternal);
}

TEST(CudaStatus, CublasErrorCodes) {
  EXPECT_TRUE(cublas_status(CUBLAS_STATUS_SUCCESS, "h()", __FILE__, 1).ok());
  const Status s = cublas_status(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul(...)", __FILE__, 3);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << s.message();
  EXPECT_EQ(cublas_status(CUBLAS_STATUS_INVALID_VALUE, "h()", __FILE__, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cublas_status(CUBLAS_STATUS_ALLOC_FAILED, "h()", __FILE__, 1).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cublas_status(CUBLAS_STATUS_EXECUTION_FAILED, "h()", __FILE__, 1).code(), StatusCode::kInternal);
}

Status failing_call(int* evaluated) {
  SL_CUDA_RETURN_IF_ERROR(cudaErrorInvalidValue, "node " + std::to_string(++*evaluated));
  return ok_status();
}

Status passing_call(int* evaluated) {
  SL_CUDNN_RETURN_IF_ERROR(CUDNN_STATUS_SUCCESS, "node " + std::to_string(++*evaluated));
  SL_CUBLAS_RETURN_IF_ERROR(CUBLAS_STATUS_SUCCESS);
  return ok_status();
}

TEST(CudaStatus, MacrosReturnEarlyAndBuildContextOnlyOnFailure) {
  int evaluated = 0;
  const Status s = failing_call(&evaluated);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("cudaErrorInvalidValue failed at ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("cuda_status_test.cc:"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[node 1]"), std::string::npos) << s.message();
  EXPECT_EQ(evaluated, 1);
  EXPECT_TRUE(passing_call(&evaluated).ok());
  EXPECT_EQ(evaluated, 1);
}

TEST(CudaStatus, ShortSourcePath) {
  EXPECT_EQ(short_source_path("/a/b/src/ops/cuda/conv.cc"), "src/ops/cuda/conv.cc");
  EXPECT_EQ(short_source_path("conv.cc"), "conv.cc");
  EXPECT_EQ(short_source_path(nullptr), "?");
}

}  // namespace
}  // namespace streamline::cuda
