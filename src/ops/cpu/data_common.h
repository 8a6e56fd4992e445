#pragma once
// Shared pieces of the CPU data-movement kernels (shape ops, Concat, Transpose, Slice, Gather, Pad,
// Resize ...): a kernel base that names its node in errors, readers for shape-like constant inputs,
// and CopyPlan, the strided byte mover most of them reduce to.
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

#include "ops/registry.h"

namespace streamline::ops::cpu {

// Largest rank the data kernels handle (inline index arrays in run(), which never allocates).
inline constexpr int kMaxDataRank = 16;
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

// The integer values of a shape-like input (int32/int64, any rank). Unsupported naming `what` when the
// value is not known as a constant at reshape; InvalidArgument for a non-integer dtype.
Result<std::vector<int64_t>> constant_ints(const TensorInfo& info, std::string_view what, const std::string& desc);
// The numeric values of a constant input as doubles (any numeric dtype).
Result<std::vector<double>> constant_doubles(const TensorInfo& info, std::string_view what, const std::string& desc);
// All elements of an integer tensor as int64.
std::vector<int64_t> tensor_ints(const Tensor& t);

// Maps axis in [-rank, rank) to [0, rank); false when out of range.
bool normalize_axis(int64_t axis, int64_t rank, int64_t* out);

// The eight signed and unsigned integer types (not bool).
bool is_integer_dtype(DType t);

// Stores `v` converted to dtype `t` at `dst` (dtype_size(t) bytes). Integers saturate; bool is v != 0.
void store_scalar(DType t, double v, void* dst);
// Reads element i of a numeric buffer of dtype `t` as int64 (floats truncate toward zero).
int64_t load_int(DType t, const void* base, int64_t i);

// InvalidArgument/Unsupported for dtypes the byte movers cannot handle (strings, undefined).
Status check_movable(DType t, const std::string& desc);

// memcpy that splits large copies across OpenMP threads. No-op when dst == src.
void copy_bytes(void* dst, const void* src, size_t bytes, int threads);
// Repeats the `esz`-byte pattern `value` over `count` elements at dst.
void fill_pattern(void* dst, const void* value, size_t esz, int64_t count);

// A dense copy from a strided source: dst[i0,...,ik] = src[offset + sum(i_j * strides[j])] over the
// output `dims`. Dims are coalesced and size-1 dims dropped when the plan is made.
struct CopyPlan {
  size_t esz = 0;
  int rank = 0;
  int64_t dims[kMaxDataRank] = {};
  int64_t strides[kMaxDataRank] = {};  // source strides in elements, may be 0 or negative
  int64_t offset = 0;                  // source element offset of the first output element
  int64_t numel = 0;
};
CopyPlan make_copy_plan(size_t esz, std::span<const int64_t> dims, std::span<const int64_t> strides, int64_t offset);
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
