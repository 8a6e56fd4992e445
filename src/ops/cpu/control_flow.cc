// Control flow: If (opset 7+), Loop (7+), Scan (8, and 9+), SequenceMap (17+). Each runs its
// subgraphs (then/else branches, the loop, scan or map body) with the eager interpreter
// (ops/eager.h); bodies read values of the enclosing scope by name. Their output shapes are known
// only by running them, so graphs with these ops always run eagerly.
//
//   If(cond)                          -> the outputs of then_branch or else_branch (any kind)
//   Loop(M?, cond?, v...)             -> final v... (tensors, sequences, optionals), scan outputs
//                                        stacked along a new axis 0
//   Scan-8(sequence_lens?, s..., x...) with a batch axis 0; Scan-9+(s..., x...) with per-input axes
//   SequenceMap(seq, more...)         -> sequences: the body run on element i of every sequence
//                                        input (tensor inputs whole)

#include <algorithm>
#include <climits>
#include <cstring>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/eager.h"

namespace streamline::ops::cpu {
namespace {

// The subgraph attribute `name` of the node, as a runner whose ops are all supported.
Result<std::unique_ptr<SubgraphRunner>> body_of(const KernelCreateArgs& a, const char* name) {
  auto it = a.node.attrs.find(name);
  if (it == a.node.attrs.end() || it->second.kind != graph::Attribute::Kind::kGraph || !it->second.g)
    return invalid_argument(a.node.describe() + ": missing graph attribute '" + name + "'");
  auto runner = std::make_unique<SubgraphRunner>(it->second.g, a.options);
  SL_RETURN_IF_ERROR(runner->check_supported().with_context(a.node.describe()));
  return runner;
}

// True when a one-element tensor is non-zero.
Result<bool> truth(const Tensor& t, const std::string& what) {
  if (!t.defined() || t.numel() != 1) return invalid_argument(what + " must have exactly one element");
  return load_f(t.dtype(), t.raw(), 0) != 0.0;
}

// Element counts before `axis`, along it, and bytes after it.
struct AxisSplit {
  int64_t outer = 1, len = 1;
  size_t inner_bytes = 0;
};

AxisSplit split_at(const Tensor& t, size_t axis) {
  AxisSplit s;
  const Shape& sh = t.shape();
  int64_t inner = 1;
  for (size_t d = 0; d < sh.rank(); ++d) {
    if (d < axis) s.outer *= sh[d];
    if (d > axis) inner *= sh[d];
  }
  s.len = sh[axis];
  s.inner_bytes = static_cast<size_t>(inner) * dtype_size(t.dtype());
  return s;
}

// t[..., index, ...] along `axis` (the axis dropped).
Tensor slice_axis(const Tensor& t, size_t axis, int64_t index) {
  const AxisSplit s = split_at(t, axis);
  Shape shape;
  for (size_t d = 0; d < t.shape().rank(); ++d)
    if (d != axis) shape.push_back(t.shape()[d]);
  Tensor y = Tensor::empty(t.dtype(), shape);
  const auto* src = static_cast<const uint8_t*>(t.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(dst + static_cast<size_t>(o) * s.inner_bytes,
                src + static_cast<size_t>(o * s.len + index) * s.inner_bytes, s.inner_bytes);
  return y;
}

// Stacks equal-shaped parts along a new axis `axis` (in [0, rank]); `reverse` stacks them last-first.
Result<Tensor> stack_axis(const std::vector<Tensor>& parts, size_t axis, bool reverse, const std::string& what) {
  if (parts.empty()) return internal_error("stacking no parts");
  const Tensor& first = parts[0];
  for (const Tensor& p : parts)
    if (p.dtype() != first.dtype() || p.shape() != first.shape())
      return invalid_argument(what + " changes from " + first.describe() + " to " + p.describe() + " between iterations");
  if (axis > first.shape().rank()) return invalid_argument(what + ": axis out of range");
  Shape shape;
  for (size_t d = 0; d < first.shape().rank(); ++d) {
    if (d == axis) shape.push_back(static_cast<int64_t>(parts.size()));
    shape.push_back(first.shape()[d]);
  }
  if (axis == first.shape().rank()) shape.push_back(static_cast<int64_t>(parts.size()));
  Tensor y = Tensor::empty(first.dtype(), shape);
  const AxisSplit s = split_at(y, axis);
  auto* dst = static_cast<uint8_t*>(y.raw());
  const int64_t n = static_cast<int64_t>(parts.size());
  for (int64_t k = 0; k < n; ++k) {
    const auto* src = static_cast<const uint8_t*>(parts[static_cast<size_t>(reverse ? n - 1 - k : k)].raw());
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(dst + static_cast<size_t>(o * n + k) * s.inner_bytes, src + static_cast<size_t>(o) * s.inner_bytes,
                  s.inner_bytes);
  }
  return y;
}

// A scan output of zero iterations: [0] followed by the body output's declared dims (when known).
Tensor empty_scan_output(const graph::Graph& body, graph::ValueId out) {
  const graph::Value& v = body.value(out);
  Shape shape{0};
  if (v.dims)
    for (const graph::Dim& d : *v.dims) shape.push_back(d.fixed() ? d.value : 0);
  return Tensor::empty(v.dtype == DType::kUndefined ? DType::kFloat32 : v.dtype, shape);
}

class IfKernel final : public ValueKernel {
 public:
  using ValueKernel::ValueKernel;

  Status init(const KernelCreateArgs& a) {
    SL_ASSIGN_OR_RETURN(then_, body_of(a, "then_branch"));
    SL_ASSIGN_OR_RETURN(else_, body_of(a, "else_branch"));
    outputs_ = a.node.outputs.size();
    for (const SubgraphRunner* b : {then_.get(), else_.get()})
      if (b->graph().outputs().size() != outputs_)
        return invalid_argument(desc_ + ": a branch has " + std::to_string(b->graph().outputs().size()) +
                                " outputs, the node " + std::to_string(outputs_));
    return ok_status();
  }

  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions& scope) const override {
    if (in.empty()) return invalid_argument(desc_ + ": missing input 'cond'");
    SL_ASSIGN_OR_RETURN(bool cond, truth(in[0].tensor(), desc_ + ": cond"));
    auto outs = (cond ? then_ : else_)->run({}, scope);
    if (!outs.ok()) return outs.status().with_context(desc_ + (cond ? " then_branch" : " else_branch"));
    return outs;
  }

 private:
  std::unique_ptr<SubgraphRunner> then_, else_;
  size_t outputs_ = 0;
};

class LoopKernel final : public ValueKernel {
 public:
  using ValueKernel::ValueKernel;

  Status init(const KernelCreateArgs& a) {
    SL_ASSIGN_OR_RETURN(body_, body_of(a, "body"));
    const graph::Graph& b = body_->graph();
    if (a.node.inputs.size() < 2) return invalid_argument(desc_ + ": needs inputs M and cond (either may be empty)");
    carried_ = a.node.inputs.size() - 2;
    if (b.inputs().size() != carried_ + 2)
      return invalid_argument(desc_ + ": the body takes " + std::to_string(b.inputs().size()) + " inputs, expected " +
                              std::to_string(carried_ + 2) + " (iteration number, condition, loop-carried values)");
    if (b.outputs().size() < carried_ + 1)
      return invalid_argument(desc_ + ": the body gives " + std::to_string(b.outputs().size()) + " outputs, expected " +
                              "at least " + std::to_string(carried_ + 1));
    scans_ = b.outputs().size() - 1 - carried_;
    if (a.node.outputs.size() > carried_ + scans_)
      return invalid_argument(desc_ + " has more outputs than its body gives");
    return ok_status();
  }

  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions& scope) const override {
    int64_t trips = INT64_MAX;
    if (in[0].defined()) {
      if (!in[0].is_tensor() || in[0].tensor().numel() != 1)
        return invalid_argument(desc_ + ": M must be a tensor of exactly one element");
      trips = element_as_int64(in[0].tensor(), 0);
    }
    bool cond = true;
    if (in[1].defined()) {
      SL_ASSIGN_OR_RETURN(cond, truth(in[1].tensor(), desc_ + ": cond"));
    }
    std::vector<AnyValue> carried(in.begin() + 2, in.end());
    for (size_t i = 0; i < carried.size(); ++i)
      if (!carried[i].defined()) return invalid_argument(desc_ + ": loop-carried input " + std::to_string(i) + " is empty");
    std::vector<std::vector<Tensor>> scanned(scans_);
    for (int64_t it = 0; it < trips && cond; ++it) {
      std::vector<AnyValue> body_in;
      body_in.emplace_back(Tensor::scalar<int64_t>(it));
      body_in.emplace_back(Tensor::scalar<bool>(cond));
      body_in.insert(body_in.end(), carried.begin(), carried.end());
      auto outs = body_->run(body_in, scope);
      if (!outs.ok()) return outs.status().with_context(desc_ + " iteration " + std::to_string(it));
      SL_ASSIGN_OR_RETURN(cond, truth((*outs)[0].tensor(), desc_ + ": the body's condition output"));
      for (size_t i = 0; i < carried_; ++i) carried[i] = std::move((*outs)[1 + i]);
      for (size_t k = 0; k < scans_; ++k) {
        AnyValue& out = (*outs)[1 + carried_ + k];
        if (!out.is_tensor())
          return invalid_argument(desc_ + ": scan output " + std::to_string(k) + " of the body is a " +
                                  value_type_name(out.kind(), out.elem_dtype()) + "; scan outputs are tensors");
        scanned[k].push_back(out.tensor());
      }
    }
    std::vector<AnyValue> result = std::move(carried);
    for (size_t k = 0; k < scans_; ++k) {
      if (scanned[k].empty()) {
        result.push_back(empty_scan_output(body_->graph(), body_->graph().outputs()[1 + carried_ + k]));
        continue;
      }
      SL_ASSIGN_OR_RETURN(Tensor t, stack_axis(scanned[k], 0, false, desc_ + " scan output " + std::to_string(k)));
      result.push_back(std::move(t));
    }
    return result;
  }

 private:
  std::unique_ptr<SubgraphRunner> body_;
  size_t carried_ = 0, scans_ = 0;
};

class ScanKernel final : public ValueKernel {
 public:
  using ValueKernel::ValueKernel;

  Status init(const KernelCreateArgs& a) {
    SL_ASSIGN_OR_RETURN(body_, body_of(a, "body"));
    batched_ = a.node.opset < 9;
    const int64_t m = a.node.attr_int("num_scan_inputs", -1);
    const size_t given = a.node.inputs.size() - (batched_ ? 1 : 0);
    if (a.node.inputs.size() < (batched_ ? 1u : 0u) || m < 1 || static_cast<size_t>(m) > given)
      return invalid_argument(desc_ + ": num_scan_inputs must be in [1, " + std::to_string(given) + "]");
    scan_inputs_ = static_cast<size_t>(m);
    states_ = given - scan_inputs_;
    const graph::Graph& b = body_->graph();
    if (b.inputs().size() != states_ + scan_inputs_)
      return invalid_argument(desc_ + ": the body takes " + std::to_string(b.inputs().size()) + " inputs, expected " +
                              std::to_string(states_ + scan_inputs_));
    if (b.outputs().size() < states_)
      return invalid_argument(desc_ + ": the body gives fewer outputs than there are states");
    scan_outputs_ = b.outputs().size() - states_;
    if (a.node.outputs.size() > states_ + scan_outputs_)
      return invalid_argument(desc_ + " has more outputs than its body gives");
    in_dirs_ = a.node.attr_ints(batched_ ? "directions" : "scan_input_directions");
    in_axes_ = a.node.attr_ints("scan_input_axes");
    out_dirs_ = a.node.attr_ints("scan_output_directions");
    out_axes_ = a.node.attr_ints("scan_output_axes");
    for (auto* v : {&in_dirs_, &in_axes_})
      if (!v->empty() && v->size() != scan_inputs_)
        return invalid_argument(desc_ + ": scan input attributes need one entry per scan input");
    for (auto* v : {&out_dirs_, &out_axes_})
      if (!v->empty() && v->size() != scan_outputs_)
        return invalid_argument(desc_ + ": scan output attributes need one entry per scan output");
    return ok_status();
  }

  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> values, const EagerOptions& scope) const override {
    std::vector<Tensor> in;
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].defined() && !values[i].is_tensor())
        return invalid_argument(desc_ + ": input " + std::to_string(i) + " is a " +
                                value_type_name(values[i].kind(), values[i].elem_dtype()) + "; Scan takes tensors");
      in.push_back(values[i].tensor());
    }
    SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, scan_all(in, scope));
    return std::vector<AnyValue>(std::make_move_iterator(outs.begin()), std::make_move_iterator(outs.end()));
  }

 private:
  Result<std::vector<Tensor>> scan_all(const std::vector<Tensor>& in, const EagerOptions& scope) const {
    const size_t first = batched_ ? 1 : 0;
    std::vector<Tensor> states(in.begin() + static_cast<std::ptrdiff_t>(first),
                               in.begin() + static_cast<std::ptrdiff_t>(first + states_));
    std::vector<Tensor> xs(in.begin() + static_cast<std::ptrdiff_t>(first + states_), in.end());
    for (const Tensor& t : states)
      if (!t.defined()) return invalid_argument(desc_ + ": a state input is empty");
    for (const Tensor& t : xs)
      if (!t.defined()) return invalid_argument(desc_ + ": a scan input is empty");
    if (!batched_) return scan(states, xs, scope);
    // Scan-8: axis 0 of every input is the batch; each batch entry is one scan over axis 1 (axis 0
    // once the batch is sliced off).
    std::vector<Tensor> all = states;
    all.insert(all.end(), xs.begin(), xs.end());
    int64_t batch = -1;
    for (const Tensor& t : all) {
      if (t.shape().rank() < 1) return invalid_argument(desc_ + ": inputs need a batch axis");
      if (batch >= 0 && t.shape()[0] != batch) return invalid_argument(desc_ + ": inputs disagree on the batch size");
      batch = t.shape()[0];
    }
    for (const Tensor& x : xs)
      if (x.shape().rank() < 2) return invalid_argument(desc_ + ": scan inputs need batch and sequence axes");
    if (in[0].defined())
      for (int64_t b = 0; b < in[0].numel(); ++b)
        if (element_as_int64(in[0], b) != xs[0].shape()[1])
          return unsupported(desc_ + ": sequence_lens shorter than the sequence axis are not supported");
    std::vector<std::vector<Tensor>> per_output(states_ + scan_outputs_);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Tensor> sb, xb;
      for (const Tensor& s : states) sb.push_back(slice_axis(s, 0, b));
      for (const Tensor& x : xs) xb.push_back(slice_axis(x, 0, b));
      SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, scan(sb, xb, scope));
      for (size_t i = 0; i < outs.size(); ++i) per_output[i].push_back(std::move(outs[i]));
    }
    std::vector<Tensor> result;
    for (size_t i = 0; i < per_output.size(); ++i) {
      SL_ASSIGN_OR_RETURN(Tensor t, stack_axis(per_output[i], 0, false, desc_ + " output " + std::to_string(i)));
      result.push_back(std::move(t));
    }
    return result;
  }

  // One scan (Scan-9 semantics): states through the body over the scan axis of each input.
  Result<std::vector<Tensor>> scan(std::vector<Tensor> states, const std::vector<Tensor>& xs,
                                   const EagerOptions& scope) const {
    int64_t steps = -1;
    std::vector<size_t> axes(xs.size());
    for (size_t j = 0; j < xs.size(); ++j) {
      const int64_t rank = static_cast<int64_t>(xs[j].shape().rank());
      int64_t axis = (in_axes_.empty() || batched_) ? 0 : in_axes_[j];
      if (!normalize_axis(axis, rank, &axis)) return invalid_argument(desc_ + ": scan input axis out of range");
      axes[j] = static_cast<size_t>(axis);
      const int64_t len = xs[j].shape()[axes[j]];
      if (steps >= 0 && len != steps) return invalid_argument(desc_ + ": scan inputs disagree on the sequence length");
      steps = len;
    }
    std::vector<std::vector<Tensor>> scanned(scan_outputs_);
    for (int64_t t = 0; t < steps; ++t) {
      std::vector<Tensor> body_in = states;
      for (size_t j = 0; j < xs.size(); ++j) {
        const bool reverse = !in_dirs_.empty() && in_dirs_[j] != 0;
        body_in.push_back(slice_axis(xs[j], axes[j], reverse ? steps - 1 - t : t));
      }
      const std::vector<AnyValue> body_values(body_in.begin(), body_in.end());
      auto outs = body_->run(body_values, scope);
      if (!outs.ok()) return outs.status().with_context(desc_ + " step " + std::to_string(t));
      for (size_t i = 0; i < outs->size(); ++i)
        if (!(*outs)[i].is_tensor())
          return invalid_argument(desc_ + ": body output " + std::to_string(i) + " is a " +
                                  value_type_name((*outs)[i].kind(), (*outs)[i].elem_dtype()) + "; Scan gives tensors");
      for (size_t i = 0; i < states_; ++i) states[i] = (*outs)[i].tensor();
      for (size_t k = 0; k < scan_outputs_; ++k) scanned[k].push_back((*outs)[states_ + k].tensor());
    }
    std::vector<Tensor> result = std::move(states);
    for (size_t k = 0; k < scan_outputs_; ++k) {
      if (scanned[k].empty()) {
        result.push_back(empty_scan_output(body_->graph(), body_->graph().outputs()[states_ + k]));
        continue;
      }
      const int64_t rank = static_cast<int64_t>(scanned[k][0].shape().rank()) + 1;
      int64_t axis = (out_axes_.empty() || batched_) ? 0 : out_axes_[k];
      if (!normalize_axis(axis, rank, &axis)) return invalid_argument(desc_ + ": scan output axis out of range");
      const bool reverse = !out_dirs_.empty() && out_dirs_[k] != 0;
      SL_ASSIGN_OR_RETURN(Tensor y, stack_axis(scanned[k], static_cast<size_t>(axis), reverse,
                                               desc_ + " scan output " + std::to_string(k)));
      result.push_back(std::move(y));
    }
    return result;
  }

  std::unique_ptr<SubgraphRunner> body_;
  bool batched_ = false;
  size_t states_ = 0, scan_inputs_ = 0, scan_outputs_ = 0;
  std::vector<int64_t> in_dirs_, in_axes_, out_dirs_, out_axes_;
};

// SequenceMap-17: output j is the sequence of the body's output j over the elements of the first
// input; further inputs that are sequences (of the same length) give their element i, tensors are
// passed whole.
class SequenceMapKernel final : public ValueKernel {
 public:
  using ValueKernel::ValueKernel;

  Status init(const KernelCreateArgs& a) {
    SL_ASSIGN_OR_RETURN(body_, body_of(a, "body"));
    const graph::Graph& b = body_->graph();
    if (a.node.inputs.empty()) return invalid_argument(desc_ + ": needs an input sequence");
    if (b.inputs().size() != a.node.inputs.size())
      return invalid_argument(desc_ + ": the body takes " + std::to_string(b.inputs().size()) +
                              " inputs, the node has " + std::to_string(a.node.inputs.size()));
    if (b.outputs().size() < a.node.outputs.size())
      return invalid_argument(desc_ + " has more outputs than its body gives");
    for (graph::ValueId v : b.outputs()) out_dtypes_.push_back(b.value(v).dtype);
    return ok_status();
  }

  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions& scope) const override {
    if (!in[0].is_sequence()) return invalid_argument(desc_ + ": input 0 must be a sequence, got " + in[0].describe());
    const size_t n = in[0].items().size();
    for (size_t j = 1; j < in.size(); ++j) {
      if (!in[j].defined() || (!in[j].is_sequence() && !in[j].is_tensor()))
        return invalid_argument(desc_ + ": input " + std::to_string(j) + " must be a tensor or a sequence, got " +
                                in[j].describe());
      if (in[j].is_sequence() && in[j].items().size() != n)
        return invalid_argument(desc_ + ": input " + std::to_string(j) + " has " +
                                std::to_string(in[j].items().size()) + " elements, the first sequence " +
                                std::to_string(n));
    }
    std::vector<std::vector<Tensor>> outs(out_dtypes_.size());
    std::vector<DType> dtypes = out_dtypes_;
    for (size_t i = 0; i < n; ++i) {
      std::vector<AnyValue> body_in;
      for (const AnyValue& v : in) body_in.emplace_back(v.is_sequence() ? v.items()[i] : v.tensor());
      auto res = body_->run(body_in, scope);
      if (!res.ok()) return res.status().with_context(desc_ + " element " + std::to_string(i));
      for (size_t k = 0; k < outs.size(); ++k) {
        const AnyValue& r = (*res)[k];
        if (!r.is_tensor())
          return invalid_argument(desc_ + ": body output " + std::to_string(k) + " is a " +
                                  value_type_name(r.kind(), r.elem_dtype()) + "; the body must give tensors");
        dtypes[k] = r.tensor().dtype();
        outs[k].push_back(r.tensor());
      }
    }
    std::vector<AnyValue> result;
    for (size_t k = 0; k < outs.size(); ++k) result.push_back(AnyValue::sequence(std::move(outs[k]), dtypes[k]));
    return result;
  }

 private:
  std::unique_ptr<SubgraphRunner> body_;
  std::vector<DType> out_dtypes_;  // the body's declared output types, for empty input sequences
};

template <typename K>
KernelFactory scoped_factory() {
  return [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<K>(a.node);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace

Status register_control_flow(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "If", 7, DType::kUndefined, scoped_factory<IfKernel>()));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Loop", 7, DType::kUndefined, scoped_factory<LoopKernel>()));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Scan", 8, DType::kUndefined, scoped_factory<ScanKernel>(), "", 8));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Scan", 9, DType::kUndefined, scoped_factory<ScanKernel>()));
  // Loop (picked by its first present input, a loop-carried value when M and cond are omitted) and
  // SequenceMap move values without reading their elements, so they take string tensors too.
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Loop", 7, DType::kString, scoped_factory<LoopKernel>()));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "SequenceMap", 17, DType::kUndefined, scoped_factory<SequenceMapKernel>()));
  return add_typed_def(reg, "SequenceMap", 17, DType::kString, scoped_factory<SequenceMapKernel>());
}

}  // namespace streamline::ops::cpu
