#include "graph/onnx_infer.h"

#include <onnx/defs/shape_inference.h>
#include <onnx/shape_inference/implementation.h>

#include <climits>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/logging.h"

namespace streamline::graph {
namespace {

using onnx::InferenceContext;

// Domain given to nodes that fail their schema's checks; no schema has it, so inference skips them.
constexpr const char* kUnverifiedDomain = "streamline.unverified";
// Attribute values beyond this are treated as corrupt by the guards (no real model needs them).
constexpr int64_t kMaxAttr = int64_t{1} << 31;
// Longest shape tensor whose length ONNX may turn into an output rank.
constexpr int64_t kMaxRank = 64;
// Largest input dim for SAME auto-padding (inference loops once per stride step of the input).
constexpr int64_t kMaxSamePadDim = int64_t{1} << 22;

std::string normalize_domain(const std::string& d) {
  return d == "ai.onnx" ? std::string() : d;
}

// The shape of input `i`, when it is a tensor whose shape is known.
const onnx::TensorShapeProto* input_shape(InferenceContext& ctx, size_t i) {
  if (i >= ctx.getNumInputs()) return nullptr;
  const onnx::TypeProto* t = ctx.getInputType(i);
  if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) return nullptr;
  return &t->tensor_type().shape();
}

// True when attribute `name` is absent or each integer in it lies in [lo, hi].
bool ints_within(InferenceContext& ctx, const char* name, int64_t lo, int64_t hi) {
  const onnx::AttributeProto* a = ctx.getAttribute(name);
  if (!a) return true;
  if (a->has_i() && (a->i() < lo || a->i() > hi)) return false;
  for (int64_t v : a->ints())
    if (v < lo || v > hi) return false;
  return true;
}

// Window attributes of convolutions and pools: strides divide, and with SAME padding the pad is
// found by subtracting the stride from the input size one step at a time.
bool window_attrs_ok(InferenceContext& ctx) {
  if (!ints_within(ctx, "strides", 1, kMaxAttr) || !ints_within(ctx, "dilations", 1, kMaxAttr) ||
      !ints_within(ctx, "kernel_shape", 1, kMaxAttr) || !ints_within(ctx, "pads", 0, kMaxAttr) ||
      !ints_within(ctx, "group", 1, kMaxAttr))
    return false;
  const onnx::AttributeProto* pad = ctx.getAttribute("auto_pad");
  const onnx::TensorShapeProto* x = input_shape(ctx, 0);
  if (!pad || pad->s() == "NOTSET" || pad->s() == "VALID" || !x) return true;
  for (const auto& d : x->dim())
    if (d.has_dim_value() && d.dim_value() > kMaxSamePadDim) return false;
  return true;
}

// Conv-style ops with weight input `w`: without kernel_shape the kernel is read from the weight's
// dims and indexed by the input's spatial rank; with it, the weight's shape is read unchecked.
bool conv_ok(InferenceContext& ctx, size_t w) {
  if (!window_attrs_ok(ctx)) return false;
  const onnx::TensorShapeProto* ws = input_shape(ctx, w);
  const onnx::TensorShapeProto* x = input_shape(ctx, 0);
  if (!ws) return false;
  return ctx.getAttribute("kernel_shape") || !x || ws->dim_size() == x->dim_size();
}

bool conv_weight1_ok(InferenceContext& ctx) {
  return conv_ok(ctx, 1);
}
bool conv_weight3_ok(InferenceContext& ctx) {
  return conv_ok(ctx, 3);
}
bool pool_ok(InferenceContext& ctx) {
  return window_attrs_ok(ctx);
}

bool conv_transpose_ok(InferenceContext& ctx) {
  if (!window_attrs_ok(ctx)) return false;
  const onnx::TensorShapeProto* x = input_shape(ctx, 0);
  const onnx::TensorShapeProto* ws = input_shape(ctx, 1);
  if (!x || !ws) return true;  // inference needs both shapes and stops without them
  if (ws->dim_size() < 2) return false;
  return ctx.getAttribute("kernel_shape") || ws->dim_size() == x->dim_size();
}

// DepthToSpace/SpaceToDepth divide by blocksize * blocksize, which overflows to 0 for huge sizes.
bool blocksize_ok(InferenceContext& ctx) {
  return ints_within(ctx, "blocksize", 1, 1 << 15);
}

// LayerNormalization writes dims [axis, rank) of its statistics outputs without a range check.
bool layer_norm_ok(InferenceContext& ctx) {
  const onnx::TensorShapeProto* x = input_shape(ctx, 0);
  if (!x) return true;
  const onnx::AttributeProto* axis = ctx.getAttribute("axis");
  const int64_t a = axis ? axis->i() : -1;
  return a >= -x->dim_size() && a < x->dim_size();
}

// ConstantOfShape and Expand turn the declared length of their shape input into an output rank.
bool shape_input_ok(InferenceContext& ctx, size_t i) {
  const onnx::TensorShapeProto* s = input_shape(ctx, i);
  if (!s || s->dim_size() != 1 || !s->dim(0).has_dim_value()) return true;
  return s->dim(0).dim_value() <= kMaxRank;
}
bool constant_of_shape_ok(InferenceContext& ctx) {
  return shape_input_ok(ctx, 0);
}
bool expand_ok(InferenceContext& ctx) {
  return shape_input_ok(ctx, 1);
}

// Gemm before opset 7 reads two dims of A and of B whatever their rank.
bool gemm_legacy_ok(InferenceContext& ctx) {
  for (size_t i = 0; i < 2; ++i) {
    const onnx::TensorShapeProto* s = input_shape(ctx, i);
    if (!s || s->dim_size() != 2) return false;
  }
  return true;
}

using Guard = bool (*)(InferenceContext&);
struct OpGuard {
  const char* op;
  Guard guard;          // nullptr: the op's inference is never run
  int below = INT_MAX;  // the guard covers the op's schema versions below this one
};

// Default-domain operators whose ONNX 1.12 inference needs a check first, or cannot be trusted at
// all (found by fuzz/infer_stress.cc; Loop and Scan bodies are left alone as well). The last
// entries cover only the versions of opsets 1..6.
constexpr OpGuard kGuards[] = {
    {"Conv", conv_weight1_ok},
    {"ConvInteger", conv_weight1_ok},
    {"QLinearConv", conv_weight3_ok},
    {"MaxPool", pool_ok},
    {"AveragePool", pool_ok},
    {"LpPool", pool_ok},
    {"ConvTranspose", conv_transpose_ok},
    {"DepthToSpace", blocksize_ok},
    {"SpaceToDepth", blocksize_ok},
    {"LayerNormalization", layer_norm_ok},
    {"ConstantOfShape", constant_of_shape_ok},
    {"Expand", expand_ok},
    {"GatherND", nullptr},
    {"MaxUnpool", nullptr},
    {"STFT", nullptr},
    {"SplitToSequence", nullptr},
    {"SequenceMap", nullptr},
    {"Loop", nullptr},
    {"Scan", nullptr},
    {"Gemm", gemm_legacy_ok, 7},
    {"RNN", nullptr, 7},
    {"GRU", nullptr, 7},
    {"LSTM", nullptr, 7},
};

// Operators whose ONNX 1.12 schema (the newest it knows, from opset 17 or before) infers shapes
// that a later version of the same signature changed, from that later opset on. Inference is not
// run for them at or above it. Later versions that add inputs or attributes need no entry: a node
// using them fails the old schema's check and is hidden (hide_unverified_nodes).
struct NewerSemantics {
  const char* op;
  int opset;
};
constexpr NewerSemantics kNewerSemantics[] = {
    {"DFT", 20},         // axis moves from an attribute (default 1) to an input (default -2)
    {"GridSample", 20},  // N-d inputs and renamed modes
};

bool newer_semantics(const std::string& op, int opset) {
  for (const NewerSemantics& n : kNewerSemantics)
    if (op == n.op && opset >= n.opset) return true;
  return false;
}

const OpGuard* find_guard(const std::string& op, int version) {
  for (const OpGuard& g : kGuards)
    if (op == g.op && version < g.below) return &g;
  return nullptr;
}

// ONNX's registry seen through the guards: schemas of the default domain with their inference
// functions wrapped, nothing for other domains. Wrapped copies are made on first use and kept.
class GuardedRegistry final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, const int max_version,
                                  const std::string& domain) const override {
    if (!normalize_domain(domain).empty() || newer_semantics(key, max_version)) return nullptr;
    const onnx::OpSchema* s = onnx::OpSchemaRegistry::Schema(key, max_version, "");
    if (!s) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(s);
    if (it == cache_.end()) it = cache_.emplace(s, wrap(*s)).first;
    return it->second.get();
  }

 private:
  static std::unique_ptr<onnx::OpSchema> wrap(const onnx::OpSchema& s) {
    const OpGuard* g = find_guard(s.Name(), s.since_version());
    if (g && !g->guard) return nullptr;
    auto copy = std::make_unique<onnx::OpSchema>(s);
    if (!s.has_type_and_shape_inference_function()) return copy;  // function body: its nodes are guarded
    const Guard guard = g ? g->guard : nullptr;
    const auto required = static_cast<size_t>(s.min_input());
    copy->TypeAndShapeInferenceFunction(
        [inner = s.GetTypeAndShapeInferenceFunction(), guard, required](InferenceContext& ctx) {
          // Inference functions read required inputs' types without checking they are known.
          for (size_t i = 0; i < required && i < ctx.getNumInputs(); ++i)
            if (!ctx.getInputType(i)) return;
          if (guard && !guard(ctx)) return;
          inner(ctx);
        });
    return copy;
  }

  mutable std::mutex mu_;
  mutable std::unordered_map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> cache_;
};

}  // namespace

const onnx::ISchemaRegistry& guarded_schema_registry() {
  static const GuardedRegistry registry;
  return registry;
}

int hide_unverified_nodes(onnx::GraphProto* graph, const std::map<std::string, int>& opsets) {
  int hidden = 0;
  for (onnx::NodeProto& n : *graph->mutable_node()) {
    const std::string domain = normalize_domain(n.domain());
    auto it = opsets.find(domain);
    const onnx::OpSchema* schema =
        it == opsets.end() ? nullptr : onnx::OpSchemaRegistry::Schema(n.op_type(), it->second, domain);
    if (schema) {
      try {
        schema->Verify(n);
      } catch (...) {
        n.set_domain(kUnverifiedDomain);
        ++hidden;
        continue;
      }
    }
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_g()) hidden += hide_unverified_nodes(a.mutable_g(), opsets);
      for (onnx::GraphProto& sub : *a.mutable_graphs()) hidden += hide_unverified_nodes(&sub, opsets);
    }
  }
  return hidden;
}

bool infer_onnx_shapes(onnx::ModelProto& model, const std::map<std::string, int>& opsets, std::string* error) {
  try {
    model.clear_functions();
    const int hidden = hide_unverified_nodes(model.mutable_graph(), opsets);
    if (hidden > 0) {
      SL_LOG(kDebug) << hidden << " node(s) fail their ONNX schema; no shape inference for them";
    }
    const onnx::ShapeInferenceOptions options(/*check_type_val=*/false, /*strict_mode_val=*/0,
                                              /*data_prop_val=*/false);
    onnx::shape_inference::InferShapes(model, &guarded_schema_registry(), options);
    return true;
  } catch (const std::exception& e) {
    if (error) *error = e.what();
  } catch (...) {
    if (error) *error = "unknown exception";
  }
  return false;
}

}  // namespace streamline::graph
