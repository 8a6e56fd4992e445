#pragma once
// Shared plumbing for the oneDNN-backed CPU kernels (conv, matmul, pool): the process-wide engine,
// one stream per thread, error conversion, fused activations as post-ops, and a cache of primitives
// per OpenMP thread count.
//
//   SL_ASSIGN_OR_RETURN(Activation act, parse_activation(node));
//   dnnl::post_ops po;
//   append_activation(po, act);
//   ...
//   ensure_omp_threads(ctx.num_threads);
//   SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p, state.cache.get(ctx.num_threads, [&] { return build(...); }));
//   SL_RETURN_IF_ERROR(execute(*p, args));
//
// Why a cache per thread count: oneDNN fixes a primitive's work split and scratchpad size from
// omp_get_max_threads() when the primitive is created, and runs it with that many threads whatever
// the caller wants later. A kernel's reshape does not know how many threads its runs will get, so
// the primitive for a count is built on the first run with that count and reused afterwards.
//
// Thread-safety: cpu_engine() is process-wide and immutable; thread_stream() is per thread;
// PrimitiveCache::get may be called concurrently.

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/ir.h"

namespace streamline::ops::cpu {

// The CPU engine every oneDNN kernel uses (created on first use).
const dnnl::engine& cpu_engine();
// A stream on cpu_engine() owned by the calling thread.
dnnl::stream& thread_stream();

// Internal error naming `what` and oneDNN's message.
Status dnnl_error_status(const dnnl::error& e, const std::string& what);

// Sets the calling thread's OpenMP thread count when it differs (oneDNN sizes parallel regions
// from it at run time).
void ensure_omp_threads(int n);
// omp_get_max_threads() of the calling thread.
int current_omp_threads();

// Sets the calling thread's OpenMP thread count for the guard's lifetime (primitive creation).
class OmpThreadsGuard {
 public:
  explicit OmpThreadsGuard(int n);
  ~OmpThreadsGuard();
  OmpThreadsGuard(const OmpThreadsGuard&) = delete;
  OmpThreadsGuard& operator=(const OmpThreadsGuard&) = delete;

 private:
  int saved_;
};

// A fused activation: streamline's `activation` / `activation_params` attributes.
enum class ActKind { kNone, kRelu, kLeakyRelu, kClip, kSigmoid, kHardSigmoid, kTanh };
struct Activation {
  ActKind kind = ActKind::kNone;
  float alpha = 0.f;  // LeakyRelu alpha, Clip min, HardSigmoid alpha
  float beta = 0.f;   // Clip max, HardSigmoid beta
};
// Reads `activation` and `activation_params`; InvalidArgument for an unknown name or bad params.
Result<Activation> parse_activation(const graph::Node& node);
// Appends the post-op(s) computing `act` (none for kNone).
void append_activation(dnnl::post_ops& po, const Activation& act);

// Dense row-major descriptor of `dims`.
dnnl::memory::desc plain_md(const dnnl::memory::dims& dims);
// Dense descriptor whose physical dimension order is `order` (outermost first), e.g. {0,2,3,1}
// for NHWC storage of logical NCHW dims.
dnnl::memory::desc permuted_md(const dnnl::memory::dims& dims, const std::vector<int>& order);
// Logical dims of a Shape.
dnnl::memory::dims to_dims(const Shape& s);

// Where a primitive's weights come from at run time.
enum class WeightsSource {
  kNone,          // the primitive has no weights
  kInput,         // the weights input as given (already in the primitive's layout)
  kKernelPacked,  // the copy the kernel prepacked at create
  kBuiltPacked,   // BuiltPrimitive::packed_weights
  kWorkspace,     // reordered from the input into the workspace on every run (non-constant weights)
};

// One primitive ready to run, with what it needs beside its inputs.
struct BuiltPrimitive {
  WeightsSource weights_source = WeightsSource::kNone;
  dnnl::primitive prim;
  // Layout prim expects for weights (zero desc for primitives without weights).
  dnnl::memory::desc weights_md;
  // Constant weights reordered for prim, when neither the input nor the kernel's prepacked copy fits.
  std::shared_ptr<AlignedBuffer> packed_weights;
  // For non-constant weights not already in weights_md: reorders the input into the workspace.
  std::optional<dnnl::reorder> weights_reorder;
  // For a convolution whose input channels are scaled per run (FusedConv's x_scale): reorders
  // the plain weights into weights_md, each input channel times its scale (run-time scales).
  std::optional<dnnl::reorder> scaled_weights_reorder;
  // Scratchpad bytes taken from the front of the workspace (0 when oneDNN owns its scratchpad).
  size_t scratchpad_bytes = 0;
  bool user_scratchpad = true;
};

// Primitives for one shape, one per OpenMP thread count, built on first use. Lives in a kernel's
// per-shape state (which the plan shares between concurrent runs).
class PrimitiveCache {
 public:
  // The primitive for `num_threads`, from `build()` (returning Result<std::unique_ptr<BuiltPrimitive>>)
  // on the first request for that count. Lock-free once built for counts below kSlots.
  template <typename Build>
  Result<const BuiltPrimitive*> get(int num_threads, Build&& build) const {
    if (num_threads < 1) num_threads = 1;
    if (num_threads < kSlots) {
      const BuiltPrimitive* p = slots_[static_cast<size_t>(num_threads)].load(std::memory_order_acquire);
      if (p) return p;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owned_.find(num_threads);
    if (it != owned_.end()) return it->second.get();
    SL_ASSIGN_OR_RETURN(std::unique_ptr<BuiltPrimitive> built, build());
    const BuiltPrimitive* p = built.get();
    owned_.emplace(num_threads, std::move(built));
    if (num_threads < kSlots) slots_[static_cast<size_t>(num_threads)].store(p, std::memory_order_release);
    return p;
  }

 private:
  static constexpr int kSlots = 65;
  mutable std::array<std::atomic<const BuiltPrimitive*>, kSlots> slots_{};
  mutable std::mutex mu_;
  mutable std::unordered_map<int, std::unique_ptr<BuiltPrimitive>> owned_;
};

// Creates a primitive from `make_pd(attr)` with user scratchpad when it fits `scratch_budget`
// bytes, else with oneDNN's own scratchpad. `make_pd` may throw dnnl::error.
template <typename MakePd>
Result<std::unique_ptr<BuiltPrimitive>> build_primitive(int num_threads, size_t scratch_budget,
                                                        const dnnl::primitive_attr& base_attr, MakePd&& make_pd,
                                                        const std::string& what) {
  OmpThreadsGuard guard(num_threads);
  try {
    auto built = std::make_unique<BuiltPrimitive>();
    dnnl::primitive_attr attr = base_attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto pd = make_pd(attr);
    if (pd.scratchpad_desc().get_size() > scratch_budget) {
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::library);
      pd = make_pd(attr);
      built->user_scratchpad = false;
    } else {
      built->scratchpad_bytes = pd.scratchpad_desc().get_size();
    }
    built->weights_md = pd.weights_desc();
    built->prim = dnnl::primitive(pd);
    return built;
  } catch (const dnnl::error& e) {
    return dnnl_error_status(e, what);
  }
}

// Constant weights a kernel reordered at create, and their layout.
struct PackedWeights {
  std::shared_ptr<AlignedBuffer> buf;  // null when nothing was prepacked
  dnnl::memory::desc md;
};

// Decides where p's weights come from at run time: the input as given (already in p's layout),
// the kernel's prepacked copy, a copy reordered now from `packed` or `plain` (constant weights),
// or a reorder into the workspace on every run (non-constant weights).
Status resolve_weights(BuiltPrimitive& p, int num_threads, const dnnl::memory::desc& user_md, bool constant,
                       const PackedWeights& packed, const void* plain, const std::string& who);

// The weights pointer for one run of p. For WeightsSource::kWorkspace, reorders `input` into
// `ws` (ws_bytes long) first.
Result<const void*> run_weights(const BuiltPrimitive& p, const dnnl::memory::desc& user_md, const void* input,
                                const PackedWeights& packed, void* ws, size_t ws_bytes, const std::string& who);

// Reorders `src` (described by src_md) into `dst` (dst_md) on the calling thread's stream.
Status reorder_into(const dnnl::memory::desc& src_md, const void* src, const dnnl::memory::desc& dst_md, void* dst);
// Owned, aligned copy of `src` reordered into dst_md.
Result<std::shared_ptr<AlignedBuffer>> reorder_to_buffer(const dnnl::memory::desc& src_md, const void* src,
                                                         const dnnl::memory::desc& dst_md);

// Wraps a host pointer as oneDNN memory (oneDNN never writes through inputs; the cast is safe).
inline dnnl::memory wrap(const dnnl::memory::desc& md, const void* p) {
  return dnnl::memory(md, cpu_engine(), const_cast<void*>(p));
}

// Executes `p` with `args` (DNNL_ARG_SCRATCHPAD added from `workspace` when user-managed).
Status execute(const BuiltPrimitive& p, std::unordered_map<int, dnnl::memory>& args, void* workspace);

}  // namespace streamline::ops::cpu
