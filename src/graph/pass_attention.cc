// ONNX Attention (opset 23 on) into streamline.Attention where the two overlap, so the head-split
// and head-merge Transposes an exporter writes around a 4-D Attention become the fused op's
// permutations instead of copies:
//
//   Attention(Transpose(Q0, pq), Transpose(K0, pk), Transpose(V0, pv), [mask]) -> Transpose(., po)
//     => streamline.Attention(Q0, K0, V0, [mask]) with q_perm pq, k_perm pk then the last two dims
//        swapped (the fused op's k is [.., D, Sk]), v_perm pv, out_perm po, scale (the
//        attribute, or 1/sqrt(D) when D is known), is_causal, softcap.
//
// Each Transpose is optional. The overlap: 4-D float32 Q, K, V; no past_key/past_value, no
// nonpad_kv_seqlen, no window attributes; only output Y read; as many kv heads as query heads, or
// one (which the fused op broadcasts), provably from the declared dims; a mask (bool or float32)
// whose last dim is provably the key count, since ONNX pads a shorter mask with -inf where the
// fused op would broadcast it. Anything else keeps its ONNX Attention kernel, which runs on the
// same engine.

#include <cmath>

#include "graph/pass_util.h"
#include "graph/passes.h"

namespace streamline::graph {
namespace {

using detail::ProtectedValues;
using detail::sole_consumer;

// Dim `i` of `v` when its dims are declared with rank `rank`; nullptr otherwise.
const Dim* dim_of(const Graph& g, ValueId v, size_t i, size_t rank) {
  const auto& dims = g.value(v).dims;
  if (!dims || dims->size() != rank) return nullptr;
  return &(*dims)[i];
}

// Both present and provably equal (detail::same_dim).
bool same_dim(const Dim* a, const Dim* b) {
  return a && b && detail::same_dim(*a, *b);
}

bool is_one(const Dim* d) {
  return d && d->fixed() && d->value == 1;
}

bool present(const Node& n, size_t i) {
  return i < n.inputs.size() && n.inputs[i] != kNoValue;
}

// The explicit rank-4 permutation of a Transpose node, or nullopt.
std::optional<std::vector<int64_t>> perm4(const Node& t) {
  if (t.inputs.size() != 1 || t.outputs.size() != 1 || t.outputs[0] == kNoValue || !t.has_attr("perm"))
    return std::nullopt;
  std::vector<int64_t> perm = t.attr_ints("perm");
  if (perm.size() != 4) return std::nullopt;
  std::vector<bool> seen(4, false);
  for (int64_t x : perm) {
    if (x < 0 || x >= 4 || seen[static_cast<size_t>(x)]) return std::nullopt;
    seen[static_cast<size_t>(x)] = true;
  }
  return perm;
}

// A Transpose with an explicit rank-4 permutation producing `v` that only `reader` reads: its
// input and perm; nullopt otherwise.
std::optional<std::pair<ValueId, std::vector<int64_t>>> absorbable_transpose(const Graph& g,
                                                                             const ProtectedValues& prot, ValueId v,
                                                                             NodeId reader) {
  const NodeId p = g.value(v).producer;
  if (p == kNoNode || !detail::is_onnx_op(g.node(p), "Transpose") || sole_consumer(g, prot, v) != reader)
    return std::nullopt;
  auto perm = perm4(g.node(p));
  if (!perm) return std::nullopt;
  return std::make_pair(g.node(p).inputs[0], std::move(*perm));
}

// Whether `n` is an ONNX Attention the fused op computes exactly (see the file comment).
bool overlaps(const Graph& g, const ProtectedValues& prot, const Node& n) {
  if (!detail::is_onnx_op(n, "Attention") || n.opset < 23 || n.inputs.size() < 3) return false;
  for (size_t i = 4; i < n.inputs.size(); ++i)
    if (present(n, i)) return false;
  if (n.outputs.empty() || n.outputs[0] == kNoValue) return false;
  for (size_t i = 1; i < n.outputs.size(); ++i) {
    const ValueId o = n.outputs[i];
    if (o != kNoValue && (!g.value(o).consumers.empty() || prot.contains(o))) return false;
  }
  if (n.opset >= 25 && (n.attr_int("left_window_size", -1) >= 0 || n.attr_int("right_window_size", -1) >= 0))
    return false;
  const ValueId q = n.inputs[0], k = n.inputs[1], v = n.inputs[2];
  for (ValueId x : {q, k, v})
    if (x == kNoValue || g.value(x).dtype != DType::kFloat32 || !dim_of(g, x, 0, 4)) return false;
  const Dim* hq = dim_of(g, q, 1, 4);
  const Dim* hk = dim_of(g, k, 1, 4);
  if (!same_dim(hq, hk) && !is_one(hk)) return false;
  if (!n.has_attr("scale") && !dim_of(g, q, 3, 4)->fixed()) return false;
  if (present(n, 3)) {
    const ValueId m = n.inputs[3];
    const auto& md = g.value(m).dims;
    const DType mt = g.value(m).dtype;
    if ((mt != DType::kBool && mt != DType::kFloat32) || !md || md->empty() || md->size() > 4) return false;
    if (!same_dim(&md->back(), dim_of(g, k, 2, 4))) return false;
  }
  return true;
}

}  // namespace

int fuse_onnx_attention(Graph& g) {
  auto order = detail::live_order(g);
  if (!order) return 0;
  const ProtectedValues prot(g);
  int count = 0;
  for (NodeId id : *order) {
    if (g.node(id).dead || !overlaps(g, prot, g.node(id))) continue;
    Node& n = g.node(id);
    const float scale = n.has_attr("scale")
                            ? n.attr_float("scale", 1.f)
                            : 1.f / std::sqrt(static_cast<float>((*g.value(n.inputs[0]).dims)[3].value));
    const bool causal = n.attr_int("is_causal", 0) != 0;
    const float softcap = n.attr_float("softcap", 0.f);
    std::vector<ValueId> inputs = {n.inputs[0], n.inputs[1], n.inputs[2]};
    if (present(n, 3)) inputs.push_back(n.inputs[3]);
    std::vector<int64_t> perms[3] = {{}, {0, 1, 3, 2}, {}};
    for (size_t i = 0; i < 3; ++i) {
      const auto t = absorbable_transpose(g, prot, inputs[i], id);
      if (!t) continue;
      g.node(g.value(inputs[i]).producer).dead = true;
      inputs[i] = t->first;
      perms[i] = i == 1 ? std::vector<int64_t>{t->second[0], t->second[1], t->second[3], t->second[2]} : t->second;
    }
    ValueId y = n.outputs[0];
    std::vector<int64_t> out_perm;
    if (const auto t = sole_consumer(g, prot, y); t != kNoNode && detail::is_onnx_op(g.node(t), "Transpose")) {
      if (auto p = perm4(g.node(t))) {
        out_perm = std::move(*p);
        y = g.node(t).outputs[0];
        g.node(t).dead = true;
      }
    }
    n.op_type = "Attention";
    n.domain = kStreamlineDomain;
    n.opset = 1;
    n.attrs.clear();
    n.inputs = std::move(inputs);
    n.outputs = {y};
    Attribute f;
    f.kind = Attribute::Kind::kFloat;
    f.f = scale;
    n.attrs["scale"] = f;
    if (causal) n.attrs["is_causal"] = detail::int_attr(1);
    if (softcap > 0.f) {
      f.f = softcap;
      n.attrs["softcap"] = f;
    }
    const char* names[3] = {"q_perm", "k_perm", "v_perm"};
    for (size_t i = 0; i < 3; ++i)
      if (!perms[i].empty()) n.attrs[names[i]] = detail::ints_attr(perms[i]);
    if (!out_perm.empty()) n.attrs["out_perm"] = detail::ints_attr(out_perm);
    g.rebuild_edges();
    ++count;
  }
  return count;
}

}  // namespace streamline::graph
