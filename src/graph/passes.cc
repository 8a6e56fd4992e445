// The pass driver, Identity/Dropout elimination and dead-code elimination. Folding lives in
// pass_fold.cc, fusion in pass_fuse.cc.

#include "graph/passes.h"

#include "graph/pass_util.h"

namespace streamline::graph {
namespace {

using detail::ProtectedValues;

// Dropout passes its input through at inference unless its training_mode input (opset 12+) is
// true or unknown, or its mask output is read. The is_test attribute of old opsets is ignored:
// this is an inference runtime.
bool is_inference_dropout(const Graph& g, const ProtectedValues& prot, const Node& n) {
  if (n.outputs.size() > 1) {
    const ValueId mask = n.outputs[1];
    if (mask != kNoValue && (!g.value(mask).consumers.empty() || prot.contains(mask))) return false;
  }
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Tensor* training = detail::constant_of(g, n.inputs[2]);
    if (!training || training->numel() != 1 || element_as_double(*training, 0) != 0.0) return false;
  }
  return true;
}

// Keeps the output name of a pass-through node whose output must survive (a graph output) by
// making the producer of its input write that output directly. False when that is not safe.
bool retarget_producer(Graph& g, const ProtectedValues& prot, ValueId x, ValueId y) {
  const Value& xv = g.value(x);
  if (prot.contains(x) || g.is_graph_input(x) || xv.constant || xv.producer == kNoNode) return false;
  if (xv.consumers.size() != 1) return false;
  Node& p = g.node(xv.producer);
  for (ValueId& o : p.outputs)
    if (o == x) o = y;
  Value& yv = g.value(y);
  const Value& xs = g.value(x);
  if (yv.dtype == DType::kUndefined) yv.dtype = xs.dtype;
  if (!yv.dims) yv.dims = xs.dims;
  return true;
}

}  // namespace

std::string PassReport::to_string() const {
  return "folded=" + std::to_string(folded) + " eliminated=" + std::to_string(eliminated) +
         " batchnorm_folded=" + std::to_string(batchnorm_folded) + " conv_fused=" + std::to_string(conv_fused) +
         " gemm_fused=" + std::to_string(gemm_fused) + " dead_removed=" + std::to_string(dead_removed) +
         (layer_norm_fused ? " layer_norm_fused=" + std::to_string(layer_norm_fused) : "") +
         (gelu_fused ? " gelu_fused=" + std::to_string(gelu_fused) : "") +
         (attention_fused ? " attention_fused=" + std::to_string(attention_fused) : "") +
         (elementwise_fused ? " elementwise_fused=" + std::to_string(elementwise_fused) : "") +
         (reductions_pooled ? " reductions_pooled=" + std::to_string(reductions_pooled) : "") +
         (scales_into_conv ? " scales_into_conv=" + std::to_string(scales_into_conv) : "") +
         (pads_fused ? " pads_fused=" + std::to_string(pads_fused) : "") +
         (convs_split ? " convs_split=" + std::to_string(convs_split) : "") +
         (groups_widened ? " groups_widened=" + std::to_string(groups_widened) : "") +
         (quant_fused ? " quant_fused=" + std::to_string(quant_fused) : "");
}

// Removes Identity and inference-mode Dropout by sending their consumers to the input. When the
// output is protected (a graph output), the input's producer is retargeted instead; when neither
// is possible (the input is a graph input, a constant, or read elsewhere) the node stays.
int eliminate_identity(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  // Protection depends on graph outputs and subgraph names, which this pass never changes.
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    Node& n = g.node(id);
    if (n.dead || !n.domain.empty() || detail::has_subgraph(n)) continue;
    if (n.inputs.empty() || n.outputs.empty() || n.inputs[0] == kNoValue || n.outputs[0] == kNoValue) continue;
    const bool pass_through = n.op_type == "Identity" || (n.op_type == "Dropout" && is_inference_dropout(g, prot, n));
    if (!pass_through) continue;
    const ValueId x = n.inputs[0];
    const ValueId y = n.outputs[0];
    if (!prot.contains(y)) {
      g.replace_uses(y, x);
    } else if (!retarget_producer(g, prot, x, y)) {
      continue;
    }
    n.dead = true;
    ++count;
    g.rebuild_edges();
  }
  return count;
}

// Marks dead every node none of whose outputs reaches a graph output or a value a subgraph reads.
// Constants left without readers disappear at the next Graph::compact().
int eliminate_dead_code(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  std::vector<char> needed(g.num_values(), 0);
  for (size_t v = 0; v < g.num_values(); ++v)
    if (prot.contains(static_cast<ValueId>(v))) needed[v] = 1;
  int count = 0;
  for (auto it = order->rbegin(); it != order->rend(); ++it) {
    Node& n = g.node(*it);
    bool live = false;
    for (ValueId o : n.outputs) live = live || (o != kNoValue && needed[static_cast<size_t>(o)]);
    if (!live) {
      n.dead = true;
      ++count;
      continue;
    }
    for (ValueId i : n.inputs)
      if (i != kNoValue) needed[static_cast<size_t>(i)] = 1;
  }
  if (count) g.rebuild_edges();
  return count;
}

// Order: (1) Identity/Dropout elimination and constant folding, repeated until neither changes
// anything, since each can expose work for the other (DequantizeLinear left alone), then the
// int8 rewrites (pass_quant.cc) and (1) again with DequantizeLinear folded too; (2)
// BatchNormalization folded into Conv weights, which needs the weights already constant; (3) zero
// Pads into the Conv/AveragePool after them, then Conv fusion after the BN fold so the Relu
// behind a BN reaches the Conv; (4) transformer fusions (LayerNorm, GELU, attention), before (5)
// Gemm/MatMul fusion so that the attention MatMuls are still plain and a MatMul's bias Add is not
// taken for part of a pattern; (6) a GELU into the product before it; (7) the remaining
// elementwise groups into their producers' epilogues or Elementwise nodes, after every fusion
// that names particular patterns, then per-channel scales into the convolutions that read them
// (after the epilogues, whose operands come after the scale); (8) narrow convolution groups
// widened (on the fused nodes, so after fusion); (9) dead-code elimination; then compact.
Status run_passes(Graph& g, const PassOptions& options, ConstantEvaluator* evaluator, PassReport* report) {
  PassReport local;
  PassReport& r = report ? *report : local;
  r = PassReport{};
  if (!options.enabled) return ok_status();
  g.rebuild_edges();
  {
    auto order = g.topological_order();
    if (!order.ok()) return order.status().with_context("graph passes");
  }
  // Rounds of Identity elimination and folding, each able to expose work for the other.
  auto simplify = [&](FoldScope scope) {
    constexpr int kMaxRounds = 16;  // each productive round removes nodes, so this is a safety net
    for (int round = 0; round < kMaxRounds; ++round) {
      int changed = 0;
      if (options.eliminate_identity) {
        const int n = eliminate_identity(g);
        r.eliminated += n;
        changed += n;
      }
      if (options.constant_folding && evaluator) {
        const int n = fold_constants(g, *evaluator, options.max_folded_bytes, scope);
        r.folded += n;
        changed += n;
      }
      if (changed == 0) break;
    }
  };
  simplify(options.fuse_quant ? FoldScope::kKeepDequantize : FoldScope::kAll);
  if (options.fuse_quant) {
    r.quant_fused += fuse_quantized(g, options.constant_folding ? evaluator : nullptr);
    // The weights' DequantizeLinear nodes the int8 ops took over are dead now; drop them before
    // folding would dequantize them. Those still read (by float ops) fold as before.
    if (r.quant_fused && options.dead_code) r.dead_removed += eliminate_dead_code(g);
    simplify(FoldScope::kAll);
  }
  if (options.fold_batchnorm) r.batchnorm_folded += fold_batchnorm_into_conv(g);
  if (options.fuse_pad) r.pads_fused += fuse_pad_into_consumer(g);
  if (options.fuse_conv) r.conv_fused += fuse_conv_activation(g);
  if (options.fuse_layer_norm) r.layer_norm_fused += fuse_layer_norm(g);
  if (options.fuse_gelu) r.gelu_fused += fuse_gelu(g);
  if (options.fuse_attention) r.attention_fused += fuse_attention(g) + fuse_onnx_attention(g);
  if (options.fuse_gemm) r.gemm_fused += fuse_gemm_activation(g);
  if (options.fuse_gelu) r.gemm_fused += fuse_matmul_gelu(g);
  // After the fusions that read ReduceMean patterns (LayerNorm), before the elementwise groups.
  if (options.global_pool) r.reductions_pooled += reduce_to_global_pool(g);
  if (options.fuse_elementwise && options.fold_batchnorm) decompose_batchnorm(g);
  if (options.fuse_elementwise) r.elementwise_fused += fuse_elementwise(g);
  // After the epilogues are placed: the scale goes before a convolution's epilogue operands.
  if (options.scale_into_conv) r.scales_into_conv += fold_channel_scale_into_conv(g);
  if (options.split_conv_parts >= 2)
    r.convs_split += split_heavy_convolutions(g, options.split_conv_parts, options.split_conv_min_share);
  if (options.widen_groups_to > 1) r.groups_widened += widen_narrow_groups(g, options.widen_groups_to);
  if (options.dead_code) r.dead_removed += eliminate_dead_code(g);
  if (r.conv_fused + r.gemm_fused + r.layer_norm_fused + r.gelu_fused + r.attention_fused + r.elementwise_fused +
          r.quant_fused + r.scales_into_conv >
      0)
    g.opsets[kStreamlineDomain] = 1;
  g.compact();
  return ok_status();
}

}  // namespace streamline::graph
