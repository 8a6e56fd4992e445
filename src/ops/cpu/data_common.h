#pragma once
// Shared pieces of the CPU data-movement kernels (shape ops, Concat, Transpose, Slice, Gather, Pad,
// Resize ...): a kernel base that names its node in errors, readers for constant inputs, and the
// runner of CopyPlan (ops/copy_plan.h), the strided byte mover most of them reduce to. Their shape
// rules, which the CUDA kernels share, are in ops/data_shapes.h and ops/op_params.h.
//
//   // reshape(): describe the copy once per input shape
//   auto plan = std::make_shared<CopyPlan>(make_copy_plan(esz, out_dims, src_strides, src_offset));
//   // run(): execute it, no allocation
//   run_copy_plan(*plan, in.raw(), out.raw(), ctx.num_threads);
//
// Everything here is dtype-generic: elements are moved as opaque bytes of dtype_size(dtype).

#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/copy_plan.h"
#include "ops/data_shapes.h"
#include "ops/op_params.h"
#include "ops/registry.h"

namespace streamline::ops::cpu {

// Tensors of at least this many bytes are moved with OpenMP threads.
inline constexpr int64_t kParallelBytes = int64_t{1} << 16;

// A thread count safe for an OpenMP num_threads clause.
inline int omp_threads(int n) {
  return n > 1 ? n : 1;
}

// Base of the data kernels: keeps "Op 'name'" and the node's opset for messages and parsing.
class DataKernel : public Kernel {
 public:
  explicit DataKernel(const graph::Node& node) : desc_(node.describe()), opset_(node.opset) {}

 protected:
  Status invalid(std::string_view msg) const { return invalid_argument(desc_ + ": " + std::string(msg)); }
  Status unsupported_error(std::string_view msg) const { return unsupported(desc_ + ": " + std::string(msg)); }
  // InvalidArgument unless the rank fits kMaxDataRank.
  Status check_rank(size_t rank) const;

  std::string desc_;
  int opset_ = 0;
};

// The numeric values of a constant input as doubles (any numeric dtype).
Result<std::vector<double>> constant_doubles(const TensorInfo& info, std::string_view what, const std::string& desc);
// All elements of an integer tensor as int64.
std::vector<int64_t> tensor_ints(const Tensor& t);

// The eight signed and unsigned integer types (not bool).
bool is_integer_dtype(DType t);

// Stores `v` converted to dtype `t` at `dst` (dtype_size(t) bytes). Integers saturate; bool is v != 0.
void store_scalar(DType t, double v, void* dst);
// Reads element i of a numeric buffer of dtype `t` as int64 (floats truncate toward zero).
int64_t load_int(DType t, const void* base, int64_t i);

// memcpy that splits large copies across OpenMP threads. No-op when dst == src.
void copy_bytes(void* dst, const void* src, size_t bytes, int threads);
// Repeats the `esz`-byte pattern `value` over `count` elements at dst.
void fill_pattern(void* dst, const void* value, size_t esz, int64_t count);

// Runs a CopyPlan (ops/copy_plan.h) on the CPU, splitting large copies across OpenMP threads.
void run_copy_plan(const CopyPlan& plan, const void* src, void* dst, int threads);

// Plan for out = transpose(in, perm) on a dense input of `in_dims`.
CopyPlan make_transpose_plan(size_t esz, std::span<const int64_t> in_dims, std::span<const int64_t> perm);

// Dense row-major strides (in elements) of `dims`.
std::vector<int64_t> dense_strides(std::span<const int64_t> dims);

// Registers a dtype-generic CPU def for `op` whose factory is K::create.
template <typename K>
Status add_data_kernel(KernelRegistry& reg, const char* op, int since, int end = INT_MAX) {
  KernelDef def;
  def.op = op;
  def.since_version = since;
  def.end_version = end;
  def.dtype = DType::kUndefined;
  def.provider = "cpu";
  def.create = [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> { return K::create(a); };
  return reg.add(std::move(def));
}

// The factory result type every data kernel's create() returns.
using KernelPtr = Result<std::unique_ptr<Kernel>>;

// Input i's dtype at create time (kUndefined when absent).
inline DType input_dtype(const KernelCreateArgs& a, size_t i) {
  return i < a.input_dtypes.size() ? a.input_dtypes[i] : DType::kUndefined;
}

}  // namespace streamline::ops::cpu
