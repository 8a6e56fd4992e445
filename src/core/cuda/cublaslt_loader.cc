// cuBLASLt loaded when first called, not when the program starts.
//
// libcublasLt is over 500 MB; linked normally, every start of every binary (each `streamline`
// command, each conformance case) pays for relocating it, about 1.5 s of page faults on a loaded
// machine, whether or not a GPU is used. So nothing links it: this file defines the cuBLASLt
// functions streamline calls, with the header's own prototypes, and each forwards to the real one,
// found with dlopen/dlsym on its first call. Without the library a call returns
// CUBLAS_STATUS_NOT_INITIALIZED (an Unavailable Status) and cublaslt_load_error() says why.
// Other libraries that need cuBLASLt (cuDNN's engines) load the real one themselves: the
// executable does not export these definitions.

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "core/cuda/cuda_status.h"

namespace streamline::cuda {
namespace {

struct Library {
  void* handle = nullptr;
  std::string error;
};

const Library& library() {
  static const Library lib = [] {
    Library l;
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so"}) {
      l.handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (l.handle != nullptr) return l;
    }
    const char* e = ::dlerror();
    l.error = std::string("cannot load libcublasLt.so.13: ") + (e ? e : "not found");
    return l;
  }();
  return lib;
}

template <typename F>
F symbol(const char* name) {
  void* h = library().handle;
  return h != nullptr ? reinterpret_cast<F>(::dlsym(h, name)) : nullptr;
}

}  // namespace

std::string cublaslt_load_error() {
  return library().error;
}

}  // namespace streamline::cuda

// Each wrapper resolves its function once (thread-safe static) and forwards the arguments.
#define SL_LT_FORWARD(name, ...)                                                   \
  static const auto fn = ::streamline::cuda::symbol<decltype(&::name)>(#name);     \
  if (fn == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;                         \
  return fn(__VA_ARGS__)

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* light_handle) {
  SL_LT_FORWARD(cublasLtCreate, light_handle);
}

const char* CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status) {
  static const auto fn = ::streamline::cuda::symbol<decltype(&::cublasLtGetStatusName)>("cublasLtGetStatusName");
  return fn != nullptr ? fn(status) : nullptr;
}

const char* CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status) {
  static const auto fn = ::streamline::cuda::symbol<decltype(&::cublasLtGetStatusString)>("cublasLtGetStatusString");
  return fn != nullptr ? fn(status) : nullptr;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t light_handle, cublasLtMatmulDesc_t compute_desc,
                                           const void* alpha, const void* a, cublasLtMatrixLayout_t a_desc,
                                           const void* b, cublasLtMatrixLayout_t b_desc, const void* beta,
                                           const void* c, cublasLtMatrixLayout_t c_desc, void* d,
                                           cublasLtMatrixLayout_t d_desc, const cublasLtMatmulAlgo_t* algo,
                                           void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  SL_LT_FORWARD(cublasLtMatmul, light_handle, compute_desc, alpha, a, a_desc, b, b_desc, beta, c, c_desc, d, d_desc,
                algo, workspace, workspace_bytes, stream);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t light_handle,
                                                           cublasLtMatmulDesc_t operation_desc,
                                                           cublasLtMatrixLayout_t a_desc,
                                                           cublasLtMatrixLayout_t b_desc,
                                                           cublasLtMatrixLayout_t c_desc,
                                                           cublasLtMatrixLayout_t d_desc,
                                                           cublasLtMatmulPreference_t preference,
                                                           int requested_algo_count,
                                                           cublasLtMatmulHeuristicResult_t heuristic_results[],
                                                           int* return_algo_count) {
  SL_LT_FORWARD(cublasLtMatmulAlgoGetHeuristic, light_handle, operation_desc, a_desc, b_desc, c_desc, d_desc,
                preference, requested_algo_count, heuristic_results, return_algo_count);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmul_desc,
                                                     cublasComputeType_t compute_type, cudaDataType_t scale_type) {
  SL_LT_FORWARD(cublasLtMatmulDescCreate, matmul_desc, compute_type, scale_type);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmul_desc) {
  SL_LT_FORWARD(cublasLtMatmulDescDestroy, matmul_desc);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmul_desc,
                                                           cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                           size_t size_in_bytes) {
  SL_LT_FORWARD(cublasLtMatmulDescSetAttribute, matmul_desc, attr, buf, size_in_bytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  SL_LT_FORWARD(cublasLtMatmulPreferenceCreate, pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  SL_LT_FORWARD(cublasLtMatmulPreferenceDestroy, pref);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                 cublasLtMatmulPreferenceAttributes_t attr,
                                                                 const void* buf, size_t size_in_bytes) {
  SL_LT_FORWARD(cublasLtMatmulPreferenceSetAttribute, pref, attr, buf, size_in_bytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* mat_layout, cudaDataType type,
                                                       uint64_t rows, uint64_t cols, int64_t ld) {
  SL_LT_FORWARD(cublasLtMatrixLayoutCreate, mat_layout, type, rows, cols, ld);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t mat_layout) {
  SL_LT_FORWARD(cublasLtMatrixLayoutDestroy, mat_layout);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t mat_layout,
                                                             cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                             size_t size_in_bytes) {
  SL_LT_FORWARD(cublasLtMatrixLayoutSetAttribute, mat_layout, attr, buf, size_in_bytes);
}

}  // extern "C"
