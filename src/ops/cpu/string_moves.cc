// The ops that only move elements (Reshape, Transpose, Gather, Concat, Slice, Where, Pad, ...) on
// string tensors.
//
// Their CPU kernels are dtype-generic byte movers, which cannot copy std::string objects. Rather
// than a second copy of every one of them, each gets a string def that runs the same kernel on
// element indices: every string input is replaced by an int64 tensor of the same shape holding the
// positions of its elements (1, 2, ... counted over all string inputs of the node, so Concat's and
// Where's inputs stay apart), the int64 kernel moves those, and each output index is replaced by the
// string it points to. Index 0 stands for "" (ONNX's default string), so the zeros a kernel fills in
// (Pad without a constant_value) come out as empty strings.
//
//   Gather(data = ["a", "b", "c"], indices = [2, 0])
//     -> int64 Gather([1, 2, 3], [2, 0]) = [3, 1] -> ["c", "a"]
//
// The scratch of the int64 kernel and the index tensors come from the workspace; run() allocates
// nothing. Shape and Size read shapes only, so their int64 outputs pass through unchanged. Ops whose
// result depends on the string values (Unique, TopK, scatter reductions) are not among these.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

constexpr size_t kAlign = 64;

size_t aligned(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

// The ops moved by index. `outputs_strings`: whether the outputs hold the data's elements (false
// for Shape and Size, whose outputs are int64 whatever the input).
struct MovedOp {
  const char* op;
  bool outputs_strings;
};

constexpr MovedOp kMovedOps[] = {
    {"Reshape", true},      {"Flatten", true},        {"Squeeze", true},  {"Unsqueeze", true},
    {"Transpose", true},    {"Concat", true},         {"Split", true},    {"Slice", true},
    {"Gather", true},       {"GatherElements", true}, {"GatherND", true}, {"ScatterElements", true},
    {"Scatter", true},      {"ScatterND", true},      {"Expand", true},   {"Tile", true},
    {"Where", true},        {"Compress", true},       {"Pad", true},      {"ReverseSequence", true},
    {"DepthToSpace", true}, {"SpaceToDepth", true},   {"Shape", false},   {"Size", false},
};

// What reshape hands to run: the int64 kernel's state and the workspace split.
struct MoveState {
  std::shared_ptr<const void> inner_state;
  size_t inner_workspace = 0;  // bytes, aligned
};

class StringMoveKernel final : public Kernel {
 public:
  StringMoveKernel(const graph::Node& node, std::unique_ptr<Kernel> inner, std::vector<bool> string_inputs,
                   bool outputs_strings)
      : desc_(node.describe()),
        inner_(std::move(inner)),
        string_inputs_(std::move(string_inputs)),
        outputs_strings_(outputs_strings) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    std::vector<TensorInfo> as_index(inputs.begin(), inputs.end());
    for (size_t i = 0; i < as_index.size(); ++i) {
      if (as_index[i].dtype != DType::kString) continue;
      if (i >= string_inputs_.size() || !string_inputs_[i])
        return invalid_argument(desc_ + ": input " + std::to_string(i) + " is a string tensor where the kernel " +
                                "was made for another type");
      as_index[i].dtype = DType::kInt64;
      as_index[i].value = nullptr;  // the indices are made in run()
      as_index[i].layout = Layout::kPlain;
    }
    SL_ASSIGN_OR_RETURN(ReshapeResult inner, inner_->reshape(as_index));
    ReshapeResult r;
    auto state = std::make_shared<MoveState>();
    state->inner_state = inner.state;
    state->inner_workspace = aligned(inner.workspace_bytes);
    size_t ws = state->inner_workspace;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].dtype == DType::kString) ws += aligned(static_cast<size_t>(inputs[i].shape.numel()) * 8);
    for (OutputInfo o : inner.outputs) {
      if (outputs_strings_) {
        if (o.dtype != DType::kInt64)
          return internal_error(desc_ + ": the index kernel gave a " + dtype_name(o.dtype) + " output");
        ws += aligned(static_cast<size_t>(o.shape.numel()) * 8);
        o.dtype = DType::kString;
      }
      o.layout = Layout::kPlain;
      r.outputs.push_back(o);
    }
    // Shape and Size know their outputs from shapes alone; moved strings are always computed.
    if (!outputs_strings_) r.known_values = std::move(inner.known_values);
    r.workspace_bytes = ws;
    r.state = std::move(state);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* state = static_cast<const MoveState*>(ctx.state);
    if (!state) return internal_error(desc_ + ": run without reshape state");
    auto* ws = static_cast<char*>(ctx.workspace);
    char* next = ws + state->inner_workspace;
    // Pass 1: each string input becomes the indices of its elements, counted from 1 over all of them.
    std::vector<Tensor> ins(ctx.inputs.begin(), ctx.inputs.end());
    std::vector<const Tensor*> sources;  // the string inputs, in order
    std::vector<int64_t> first;          // global index of each one's element 0
    int64_t count = 1;
    for (Tensor& t : ins) {
      if (t.dtype() != DType::kString) continue;
      Tensor idx = Tensor::view(DType::kInt64, t.shape(), next);
      for (int64_t j = 0; j < t.numel(); ++j) idx.data<int64_t>()[j] = count + j;
      sources.push_back(&ctx.inputs[static_cast<size_t>(&t - ins.data())]);
      first.push_back(count);
      count += t.numel();
      next += aligned(static_cast<size_t>(t.numel()) * 8);
      t = idx;
    }
    // Pass 2: the int64 kernel moves the indices.
    std::vector<Tensor> outs;
    for (Tensor& o : ctx.outputs) {
      if (!outputs_strings_) {
        outs.push_back(o);
        continue;
      }
      outs.push_back(Tensor::view(DType::kInt64, o.shape(), next));
      next += aligned(static_cast<size_t>(o.numel()) * 8);
    }
    RunContext inner = ctx;
    inner.inputs = ins;
    inner.outputs = outs;
    inner.workspace = state->inner_workspace ? ws : nullptr;
    inner.state = state->inner_state.get();
    SL_RETURN_IF_ERROR(inner_->run(inner));
    if (!outputs_strings_) return ok_status();
    // Pass 3: each output index becomes the string it points to (0: "").
    for (size_t o = 0; o < outs.size(); ++o) {
      const int64_t* idx = outs[o].data<int64_t>();
      std::string* dst = ctx.outputs[o].strings();
      for (int64_t j = 0; j < outs[o].numel(); ++j) {
        const int64_t g = idx[j];
        if (g == 0) {
          dst[j].clear();
          continue;
        }
        if (g < 0 || g >= count)
          return internal_error(desc_ + ": element index " + std::to_string(g) + " out of range");
        const size_t k = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), g) - first.begin()) - 1;
        dst[j] = sources[k]->strings()[g - first[k]];
      }
    }
    return ok_status();
  }

 private:
  std::string desc_;
  std::unique_ptr<Kernel> inner_;
  std::vector<bool> string_inputs_;  // per input: a string tensor at create (its kind is fixed)
  bool outputs_strings_;
};

// A string def over `inner`'s opsets whose kernel wraps what `inner` makes for int64 inputs.
KernelDef string_def_over(const KernelDef& inner, bool outputs_strings) {
  KernelDef def;
  def.op = inner.op;
  def.domain = inner.domain;
  def.since_version = inner.since_version;
  def.end_version = inner.end_version;
  def.dtype = DType::kString;
  def.dtype_input = inner.dtype_input;
  def.provider = inner.provider;
  def.create = [make = inner.create, outputs_strings](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    const std::string reduction = a.node.attr_string("reduction", "none");
    if (reduction != "none")
      return unsupported(a.node.describe() + ": reduction '" + reduction + "' on string tensors");
    std::vector<DType> dtypes = a.input_dtypes;
    std::vector<const Tensor*> constants = a.constants;
    std::vector<bool> strings(dtypes.size(), false);
    for (size_t i = 0; i < dtypes.size(); ++i) {
      if (dtypes[i] != DType::kString) continue;
      strings[i] = true;
      dtypes[i] = DType::kInt64;
      if (i < constants.size()) constants[i] = nullptr;
    }
    KernelCreateArgs args{a.graph, a.node, constants, dtypes, a.options};
    SL_ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, make(args));
    return std::unique_ptr<Kernel>(
        std::make_unique<StringMoveKernel>(a.node, std::move(k), std::move(strings), outputs_strings));
  };
  return def;
}

bool overlaps(const KernelDef& a, const KernelDef& b) {
  return a.since_version <= b.end_version && b.since_version <= a.end_version;
}

}  // namespace

Status register_string_moves(KernelRegistry& reg) {
  for (const MovedOp& m : kMovedOps) {
    // The CPU defs that move int64 elements: an int64 one where it exists, else the generic one.
    std::vector<KernelDef> made;
    for (DType want : {DType::kInt64, DType::kUndefined}) {
      for (const KernelDef& d : reg.defs()) {
        if (d.op != m.op || !d.domain.empty() || d.device != Device::kCpu || d.dtype != want) continue;
        if (std::any_of(made.begin(), made.end(), [&](const KernelDef& x) { return overlaps(x, d); })) continue;
        made.push_back(string_def_over(d, m.outputs_strings));
      }
    }
    if (made.empty()) return internal_error(std::string("no CPU kernel for ") + m.op + " to move strings with");
    for (KernelDef& d : made) SL_RETURN_IF_ERROR(reg.add(std::move(d)));
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu
