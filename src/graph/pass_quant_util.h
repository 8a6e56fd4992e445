#pragma once
// Helpers shared by the int8 rewrites (graph/pass_quant*.cc). Internal to the graph layer.
//
//   auto x = quant::dq_of(g, conv.inputs[0]);           // DQ(x) with per-tensor constants?
//   quant::OutputEnd e = quant::output_end(g, prot, y);  // [activation] [Q] after a product
//   quant::finish_output(g, fused, e, 6);                // y_scale, y_zp at inputs 6 and 7
//
// "DQ" is DequantizeLinear, "Q" QuantizeLinear; "per-tensor" means one scale and one zero point,
// both constants.

#include <optional>
#include <string>
#include <vector>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph::quant {

// A per-tensor quantisation (scale and zero point values, and their constants in the graph).
struct QParam {
  ValueId scale = kNoValue, zp = kNoValue;
  float s = 0.f;
  int32_t z = 0;
  DType t = DType::kUInt8;
  bool same(const QParam& o) const { return s == o.s && z == o.z && t == o.t; }
};

inline bool is_8bit(DType t) {
  return t == DType::kUInt8 || t == DType::kInt8;
}

// The per-tensor parameters held by values `scale` and `zp` (zp may be kNoValue: uint8, 0).
std::optional<QParam> params_of(const Graph& g, ValueId scale, ValueId zp);
// The per-tensor parameters of a Q or DQ node (its inputs 1 and 2).
std::optional<QParam> node_params(const Graph& g, const Node& n);

// The DQ node producing `v` with per-tensor parameters and a non-constant 8-bit input.
struct DqInput {
  NodeId node = kNoNode;
  ValueId q = kNoValue;  // its quantised input
  QParam p;
};
std::optional<DqInput> dq_of(const Graph& g, ValueId v);

// The Q node reading `v` as its sole consumer, with per-tensor parameters.
struct QOutput {
  NodeId node = kNoNode;
  ValueId out = kNoValue;
  QParam p;
};
std::optional<QOutput> q_after(const Graph& g, const detail::ProtectedValues& prot, ValueId v);

// A constant quantised weight behind a DQ: the tensor, its scale (one or per `axis`) and zero point.
struct QWeight {
  ValueId q = kNoValue, scale = kNoValue, zp = kNoValue;
  const Tensor* qt = nullptr;  // valid until the next add_constant
  const Tensor* st = nullptr;
  int64_t axis = 1;
};
std::optional<QWeight> weight_of(const Graph& g, ValueId v);

// n real values behind `v`: a float constant, or a DQ of an integer constant.
std::optional<std::vector<double>> bias_values(const Graph& g, ValueId v, int64_t n);
// The int32 bias in accumulator units (x_scale * w_scale[m]) for real bias `b`.
Tensor int32_bias(const std::vector<double>& b, float x_scale, const Tensor& w_scale);
// The QLookup table of DQ(from) then Q(to), in the kernels' float arithmetic.
Tensor requant_table(const QParam& from, const QParam& to);

void to_streamline(Node& n, const char* op);

// The output end of a fused op: [activation] [Q]. `out` is the value the fused node writes and
// `q` is set when it is quantised.
struct OutputEnd {
  std::optional<detail::Activation> act;
  NodeId act_node = kNoNode;
  std::optional<QOutput> q;
  ValueId out = kNoValue;
};
OutputEnd output_end(const Graph& g, const detail::ProtectedValues& prot, ValueId y);
// Gives `fused` the end's y_scale / y_zp at inputs ys_slot and ys_slot + 1, its output and
// activation, and marks the absorbed nodes dead.
void finish_output(Graph& g, Node& fused, const OutputEnd& e, size_t ys_slot);
// The zero point value of a DQ input (a new uint8 0 constant when the DQ had none).
ValueId zp_value(Graph& g, const DqInput& d, const std::string& base);

// One pattern: tries to rewrite node `id`; true when it did.
using Rewrite = bool (*)(Graph& g, const detail::ProtectedValues& prot, NodeId id);
// Runs `rewrite` on every live node `select` accepts, in topological order; the number rewritten.
int sweep(Graph& g, bool (*select)(const Node&), Rewrite rewrite);

// The patterns of pass_quant_layers.cc (see pass_quant.cc for the list).
bool fuse_global_pool(Graph& g, const detail::ProtectedValues& prot, NodeId id);
bool fuse_batchnorm(Graph& g, const detail::ProtectedValues& prot, NodeId id);
bool fuse_moving_op(Graph& g, const detail::ProtectedValues& prot, NodeId id);
bool moves_values(const Node& n);
// The Q op (QConv, QMatMul, QAdd) writing `q` for `reader` alone whose activation can take over
// another output range as a Clip; kNoNode otherwise.
NodeId retargetable_writer(const Graph& g, const detail::ProtectedValues& prot, ValueId q, NodeId reader);
// Makes Q op `p` quantise to `to` instead of `from`, keeping the saturation of `from` as a Clip.
void retarget(Graph& g, NodeId p, const QParam& from, const QParam& to);

}  // namespace streamline::graph::quant
