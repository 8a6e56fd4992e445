// Kinds and element types of values from operator type rules; see value_types.h.

#include "graph/value_types.h"

#include <string>

namespace streamline::graph {
namespace {

// The graphs enclosing a subgraph, innermost first, for values a body captures by name.
struct Enclosing {
  const Graph* graph = nullptr;
  const Enclosing* parent = nullptr;

  const Value* find(const std::string& name) const {
    for (const Enclosing* e = this; e; e = e->parent) {
      const ValueId v = e->graph->find_value(name);
      if (v != kNoValue) return &e->graph->value(v);
    }
    return nullptr;
  }
};

class TypeRules {
 public:
  TypeRules(Graph& g, const Enclosing* outer) : g_(g), outer_(outer) {}

  int run() {
    capture_outer();
    auto order = g_.topological_order();
    if (!order.ok()) return changed_;
    for (NodeId n : *order) apply(g_.node(n));
    return changed_;
  }

 private:
  // Sets a value's kind and element type. An op's own rule (`fixed`) is what the specification
  // says and wins over a guess made elsewhere (a generic "first input's type" fallback); a
  // pass-through rule (Identity, If, Loop) only fills a kind still kTensor and an unknown type.
  void set(ValueId v, ValueKind kind, DType dtype, bool fixed = true) {
    if (v == kNoValue) return;
    Value& val = g_.value(v);
    if (val.constant) return;
    bool changed = false;
    if (val.kind != kind && (fixed || val.kind == ValueKind::kTensor)) {
      val.kind = kind;
      if (kind != ValueKind::kTensor) val.dims.reset();
      changed = true;
    }
    if (dtype != DType::kUndefined && val.dtype != dtype && (fixed || val.dtype == DType::kUndefined)) {
      val.dtype = dtype;
      changed = true;
    }
    if (changed) ++changed_;
  }

  ValueKind kind_of(ValueId v) const { return v == kNoValue ? ValueKind::kTensor : g_.value(v).kind; }
  DType dtype_of(ValueId v) const { return v == kNoValue ? DType::kUndefined : g_.value(v).dtype; }
  ValueId input(const Node& n, size_t i) const { return i < n.inputs.size() ? n.inputs[i] : kNoValue; }
  ValueId output(const Node& n, size_t i) const { return i < n.outputs.size() ? n.outputs[i] : kNoValue; }

  // Values the graph reads from enclosing graphs take their kinds and types from there.
  void capture_outer() {
    if (!outer_) return;
    for (size_t i = 0; i < g_.num_values(); ++i) {
      const auto v = static_cast<ValueId>(i);
      const Value& val = g_.value(v);
      if (val.producer != kNoNode || val.constant || g_.is_graph_input(v)) continue;
      if (const Value* o = outer_->find(val.name)) set(v, o->kind, o->dtype);
    }
  }

  Graph* body(Node& n, const char* name) {
    auto it = n.attrs.find(name);
    return it != n.attrs.end() && it->second.kind == Attribute::Kind::kGraph ? it->second.g.get() : nullptr;
  }

  // Runs the rules inside a subgraph of this graph.
  void descend(Graph& sub) {
    const Enclosing here{&g_, outer_};
    changed_ += TypeRules(sub, &here).run();
  }

  // Sets input i of `sub` (when it exists) to a kind and type (`fixed` as for set()).
  void set_body_input(Graph& sub, size_t i, ValueKind kind, DType dtype, bool fixed) {
    if (i >= sub.inputs().size()) return;
    Value& v = sub.value(sub.inputs()[i]);
    if (v.kind != kind && (fixed || v.kind == ValueKind::kTensor)) {
      v.kind = kind;
      ++changed_;
    }
    if (v.dtype == DType::kUndefined && dtype != DType::kUndefined) {
      v.dtype = dtype;
      ++changed_;
    }
  }

  void apply(Node& n) {
    const std::string& op = n.op_type;
    if (n.domain == "ai.onnx.ml") {
      if (op == "LabelEncoder") set(output(n, 0), ValueKind::kTensor, label_encoder_dtype(n));
      return;
    }
    if (!n.domain.empty()) return;
    const ValueId in0 = input(n, 0);
    if (op == "SequenceEmpty") {
      set(output(n, 0), ValueKind::kSequence, static_cast<DType>(n.attr_int("dtype", 1)));
    } else if (op == "SequenceConstruct" || op == "SequenceInsert" || op == "SequenceErase" ||
               op == "SplitToSequence") {
      set(output(n, 0), ValueKind::kSequence, dtype_of(in0));
    } else if (op == "SequenceAt" || op == "ConcatFromSequence") {
      set(output(n, 0), ValueKind::kTensor, dtype_of(in0));
    } else if (op == "SequenceLength") {
      set(output(n, 0), ValueKind::kTensor, DType::kInt64);
    } else if (op == "SequenceMap") {
      sequence_map(n);
    } else if (op == "Optional") {
      if (in0 != kNoValue) {
        set(output(n, 0), optional_of(kind_of(in0)), dtype_of(in0));
      } else if (auto it = n.attrs.find("type"); it != n.attrs.end() && it->second.kind == Attribute::Kind::kType) {
        set(output(n, 0), optional_of(it->second.type_kind), it->second.type_dtype);
      }
    } else if (op == "OptionalHasElement") {
      set(output(n, 0), ValueKind::kTensor, DType::kBool);
    } else if (op == "OptionalGetElement") {
      const ValueKind k = kind_of(in0);
      set(output(n, 0), is_optional_kind(k) ? element_kind(k) : k, dtype_of(in0));
    } else if (op == "Identity") {
      if (kind_of(in0) != ValueKind::kTensor) set(output(n, 0), kind_of(in0), dtype_of(in0), false);
    } else if (op == "If") {
      if_node(n);
    } else if (op == "Loop") {
      loop(n);
    } else if (op == "StringNormalizer" || op == "StringConcat") {
      set(output(n, 0), ValueKind::kTensor, DType::kString);
    } else if (op == "StringSplit") {
      set(output(n, 0), ValueKind::kTensor, DType::kString);
      set(output(n, 1), ValueKind::kTensor, DType::kInt64);
    } else if (op == "RegexFullMatch") {
      set(output(n, 0), ValueKind::kTensor, DType::kBool);
    }
  }

  static DType label_encoder_dtype(const Node& n) {
    if (n.has_attr("values_strings")) return DType::kString;
    if (n.has_attr("values_int64s")) return DType::kInt64;
    if (n.has_attr("values_floats")) return DType::kFloat32;
    auto it = n.attrs.find("values_tensor");
    return it != n.attrs.end() && it->second.t.defined() ? it->second.t.dtype() : DType::kUndefined;
  }

  // SequenceMap: the body sees one element of each sequence input (and tensor inputs whole); each
  // output is a sequence of the body's output.
  void sequence_map(Node& n) {
    Graph* b = body(n, "body");
    if (!b) return;
    for (size_t i = 0; i < n.inputs.size(); ++i) set_body_input(*b, i, ValueKind::kTensor, dtype_of(n.inputs[i]), true);
    descend(*b);
    for (size_t i = 0; i < n.outputs.size() && i < b->outputs().size(); ++i)
      set(n.outputs[i], ValueKind::kSequence, b->value(b->outputs()[i]).dtype);
  }

  void if_node(Node& n) {
    Graph* branches[] = {body(n, "then_branch"), body(n, "else_branch")};
    for (Graph* b : branches)
      if (b) descend(*b);
    for (size_t i = 0; i < n.outputs.size(); ++i)
      for (Graph* b : branches) {
        if (!b || i >= b->outputs().size()) continue;
        const Value& out = b->value(b->outputs()[i]);
        if (out.kind == ValueKind::kTensor && out.dtype == DType::kUndefined) continue;
        if (out.kind != ValueKind::kTensor) set(n.outputs[i], out.kind, out.dtype, false);
        break;
      }
  }

  // Loop(M, cond, v...): the body takes (iteration, condition, v...) and gives (condition, v...,
  // scan outputs...); the node gives the final v... (kinds as the inputs) and stacked scan outputs.
  void loop(Node& n) {
    Graph* b = body(n, "body");
    if (!b) return;
    for (size_t i = 2; i < n.inputs.size(); ++i)
      set_body_input(*b, i, kind_of(n.inputs[i]), dtype_of(n.inputs[i]), false);
    descend(*b);
    const size_t carried = n.inputs.size() >= 2 ? n.inputs.size() - 2 : 0;
    for (size_t i = 0; i < carried && i < n.outputs.size(); ++i) {
      // What the body gives back is what the node gives (a loop that runs no iteration returns the
      // initial value, which ONNX requires to be of the same type).
      ValueKind k = 1 + i < b->outputs().size() ? b->value(b->outputs()[1 + i]).kind : ValueKind::kTensor;
      if (k == ValueKind::kTensor) k = kind_of(n.inputs[2 + i]);
      if (k != ValueKind::kTensor) set(n.outputs[i], k, dtype_of(n.inputs[2 + i]), false);
    }
  }

  Graph& g_;
  const Enclosing* outer_;
  int changed_ = 0;
};

}  // namespace

int infer_value_types(Graph& g) {
  return TypeRules(g, nullptr).run();
}

}  // namespace streamline::graph
