#pragma once
// The kernel interface. A kernel is made once per node when a model loads and then shared by every
// plan and every concurrent run of that model; it goes through three phases:
//
//   create   (factory in KernelDef)  reads attributes and constant inputs; prepacks weights.
//   reshape  (once per input shapes) computes output dtypes/shapes/layouts, the scratch size, and
//            optional per-shape state (a oneDNN primitive, say) that the plan keeps.
//   run      (every inference)       reads inputs and writes into the outputs it is given. It never
//            allocates outputs; scratch comes from `workspace`.
//
//   auto k = def->create(args);                       // Result<std::unique_ptr<Kernel>>
//   auto r = (*k)->reshape(infos);                    // Result<ReshapeResult>
//   RunContext rc{inputs, outputs, workspace, r->state.get(), 2};
//   SL_RETURN_IF_ERROR((*k)->run(rc));
//
// Thread-safety: a Kernel is immutable after create; reshape and run are const and may be called
// concurrently from several threads (each run with its own outputs and workspace).

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/plan_choices.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/ir.h"

namespace streamline::ops {

enum class Device { kCpu = 0, kCuda = 1 };
const char* device_name(Device d);

// Arithmetic of device kernels (core/dtype.h, public because ModelOptions carries it).
using Precision = ::streamline::Precision;
const char* precision_name(Precision p);  // "fp32", "tf32", "fp16"

// What reshape knows about one input. `value` is non-null when the input is a constant (an
// initializer or a folded value), so shape-like inputs (Reshape's shape, Slice's starts) can be read.
struct TensorInfo {
  DType dtype = DType::kUndefined;  // kUndefined marks an omitted optional input
  Shape shape;
  Layout layout = Layout::kPlain;
  const Tensor* value = nullptr;
  bool present() const { return dtype != DType::kUndefined; }
};

struct OutputInfo {
  DType dtype = DType::kFloat32;
  Shape shape;
  Layout layout = Layout::kPlain;
};

struct ReshapeResult {
  std::vector<OutputInfo> outputs;
  // Output values already known from shapes alone (Shape, Size); the planner folds them.
  // Empty, or one entry per output.
  std::vector<std::optional<Tensor>> known_values;
  // Scratch bytes `run` needs (64-byte aligned by the planner).
  size_t workspace_bytes = 0;
  // Per-shape state handed back to run(); owned by the plan, shared by concurrent runs.
  std::shared_ptr<const void> state;
  // inplace[i] = j: output i may share input j's buffer when input j dies at this node. The kernel
  // must then be correct with out.raw() == in.raw(). Empty or one entry per output (-1 = no).
  std::vector<int> inplace;
};

struct RunContext {
  std::span<const Tensor> inputs;  // an omitted optional input is an undefined Tensor
  std::span<Tensor> outputs;       // preallocated with the shapes/layouts reshape returned
  void* workspace = nullptr;
  const void* state = nullptr;  // ReshapeResult::state
  int num_threads = 1;          // intra-op threads this run may use
  // Device::kCuda kernels only: the cudaStream_t to enqueue on (nullptr = the legacy default
  // stream). Their inputs, outputs and workspace are device pointers; run() returns once the work
  // is enqueued, not when it finished. CPU kernels ignore it.
  void* device_stream = nullptr;
};

// How a kernel wants its rank-4 activation inputs laid out; the planner inserts layout changes.
enum class LayoutSupport {
  kPlainOnly,           // every input plain
  kAny,                 // any layout, provided accepts() says yes for the layouts it is given
  kPreferChannelsLast,  // rank-4 non-constant inputs converted to preferred_layout()
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const = 0;
  virtual Status run(const RunContext& ctx) const = 0;
  virtual LayoutSupport layout_support() const { return LayoutSupport::kPlainOnly; }
  // For kAny: true when these inputs (shapes and layouts) can be handled without conversion.
  virtual bool accepts(std::span<const TensorInfo> inputs) const { return true; }
  // For kPreferChannelsLast: the layout its rank-4 activation inputs should have, given their
  // shapes and current layouts. `block` is the channels per block of the blocked layout it may
  // choose (8: kBlocked8, 16: kBlocked16), 0 when blocked layouts are off.
  virtual Layout preferred_layout(std::span<const TensorInfo> inputs, int block) const { return Layout::kChannelsLast; }
};

// How convolutions pick their algorithm per shape (see ops/cpu/conv.cc).
enum class ConvAlgorithm {
  kMeasure,   // time the candidates (direct, along the long axis, Winograd) once per shape, keep the fastest
  kDirect,    // oneDNN's direct convolution as the shape is, or Winograd where its heuristic says so
  kLongAxis,  // a Kx1 convolution over a width-1 tensor always runs as 1xK over a height-1 one
};

// The model's KernelChoices (core/plan_choices.h: channels_last, blocked_layout, blocked_channels,
// winograd, precision), assigned whole, plus what only kernels are told. For kernels,
// blocked_channels is the channels per block they may choose (8: nChw8c, 16: nChw16c); the model
// resolves 0 from the CPU (ops::native_block()) and the planner's PlannerOptions::blocked_channels
// agrees; block() reads 0 as 8 for callers that build options by hand.
struct KernelOptions : KernelChoices {
  // How convolutions choose between their algorithms where there is a choice. With kMeasure two
  // processes may pick differently (Winograd or direct), and their results then differ in float
  // rounding (up to about 1e-5 of the scale); winograd = false leaves no such choice.
  ConvAlgorithm conv_algorithm = ConvAlgorithm::kMeasure;

  // The blocked layout's channels per block: blocked_channels, or 8 where it is unresolved.
  int block() const { return blocked_channels > 0 ? blocked_channels : 8; }
  // Whether conv-like kernels may keep activations in the blocked layout.
  bool blocked() const { return channels_last && blocked_layout; }
};

struct KernelCreateArgs {
  const graph::Graph& graph;
  const graph::Node& node;
  // Per input: the constant value when the input is an initializer/folded constant, else nullptr.
  std::vector<const Tensor*> constants;
  // Per input: the dtype when known (kUndefined for an omitted optional input).
  std::vector<DType> input_dtypes;
  KernelOptions options;
};

}  // namespace streamline::ops
