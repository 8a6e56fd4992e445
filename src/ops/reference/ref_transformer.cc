// Reference streamline.LayerNormalization, streamline.Gelu and streamline.Attention (the ops'
// definitions, see src/graph/pass_transformer.cc), RotaryEmbedding and RMSNormalization (opset
// 23), written as plain loops in double precision, with every transpose and broadcast done by
// unravelling indices.

#include "ops/reference/ref_transformer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/reference/ref_nn_util.h"

namespace streamline::ops::reference {
namespace {

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = dims[d] == 0 ? 0 : i % dims[d];
    i = dims[d] == 0 ? 0 : i / dims[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  int64_t o = 0;
  for (size_t d = 0; d < dims.size(); ++d) o = o * dims[d] + idx[d];
  return o;
}

// A dense double copy of transpose(t, perm) (identity when perm is empty) and its dims.
struct Dense {
  std::vector<int64_t> dims;
  std::vector<double> v;
  double at(const std::vector<int64_t>& idx) const { return v[static_cast<size_t>(ravel(idx, dims))]; }
};

// Element i of a float32 tensor, or of a bool mask as an additive bias (false: -inf).
double element(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::kBool) return t.data<uint8_t>()[i] ? 0.0 : -std::numeric_limits<double>::infinity();
  return t.data<float>()[i];
}

Dense transposed(const Tensor& t, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> src = t.shape().to_vector();
  Dense d;
  for (size_t i = 0; i < src.size(); ++i) d.dims.push_back(src[perm.empty() ? i : static_cast<size_t>(perm[i])]);
  d.v.resize(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const std::vector<int64_t> li = unravel(i, d.dims);
    std::vector<int64_t> si(src.size(), 0);
    for (size_t k = 0; k < src.size(); ++k) si[perm.empty() ? k : static_cast<size_t>(perm[k])] = li[k];
    d.v[static_cast<size_t>(i)] = element(t, ravel(si, src));
  }
  return d;
}

// Index into `dims` (right-aligned against `full`, size-1 dims broadcast) of the full index.
std::vector<int64_t> broadcast_index(const std::vector<int64_t>& full_idx, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size(), 0);
  const size_t off = full_idx.size() - dims.size();
  for (size_t i = 0; i < dims.size(); ++i) idx[i] = dims[i] == 1 ? 0 : full_idx[off + i];
  return idx;
}

bool is_permutation(std::vector<int64_t> p, size_t rank) {
  if (p.empty()) return true;
  if (p.size() != rank) return false;
  std::sort(p.begin(), p.end());
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

class RefAttention final : public RefKernel {
 public:
  explicit RefAttention(const graph::Node& node) : RefKernel(node) {}
  Status init() { return ok_status(); }

  // A bool mask is allowed; the rest is float32 as for every reference kernel.
  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    std::vector<TensorInfo> in(inputs.begin(), inputs.end());
    if (in.size() > 3 && in[3].dtype == DType::kBool) in[3].dtype = DType::kFloat32;
    return RefKernel::reshape(in);
  }

 protected:
  Result<std::vector<Shape>> shapes(const std::vector<Shape>& in, const std::vector<bool>& present) const override {
    if (in.size() < 3 || !present[0] || !present[1] || !present[2])
      return invalid_argument(node_.describe() + ": needs Q, K and V");
    std::vector<int64_t> qd, kd, vd;
    SL_RETURN_IF_ERROR(logical_dims(in[0], "q_perm", &qd));
    SL_RETURN_IF_ERROR(logical_dims(in[1], "k_perm", &kd));
    SL_RETURN_IF_ERROR(logical_dims(in[2], "v_perm", &vd));
    if (kd[kd.size() - 2] != qd.back() || vd[vd.size() - 2] != kd.back())
      return invalid_argument(node_.describe() + ": inner dimensions differ");
    std::vector<std::vector<int64_t>> ops = {qd, kd, vd};
    if (in.size() > 3 && present[3]) {
      // The mask joins the batch broadcast with a [Sq, Sk] matrix part that must not grow.
      std::vector<int64_t> m = in[3].to_vector();
      while (m.size() < 2) m.insert(m.begin(), 1);
      const int64_t mq = m[m.size() - 2], mk = m.back();
      if ((mq != 1 && mq != qd[qd.size() - 2]) || (mk != 1 && mk != kd.back()))
        return invalid_argument(node_.describe() + ": the mask does not broadcast to the scores");
      ops.push_back(m);
    }
    std::vector<int64_t> batch;
    SL_RETURN_IF_ERROR(batch_dims(ops, &batch));
    std::vector<int64_t> od = batch;
    od.insert(od.end(), {qd[qd.size() - 2], vd.back()});
    const std::vector<int64_t> perm = node_.attr_ints("out_perm");
    if (!is_permutation(perm, od.size())) return invalid_argument(node_.describe() + ": bad out_perm");
    Shape y;
    for (size_t i = 0; i < od.size(); ++i) y.push_back(od[perm.empty() ? i : static_cast<size_t>(perm[i])]);
    return std::vector<Shape>{y};
  }

  Status compute(std::span<const Tensor> in, std::span<Tensor> out) const override {
    const Dense q = transposed(in[0], node_.attr_ints("q_perm"));
    const Dense k = transposed(in[1], node_.attr_ints("k_perm"));
    const Dense v = transposed(in[2], node_.attr_ints("v_perm"));
    const bool has_mask = in.size() > 3 && in[3].defined();
    const Dense mask = has_mask ? transposed(in[3], {}) : Dense{};
    const double scale = node_.attr_float("scale", 1.f);
    const double softcap = node_.attr_float("softcap", 0.f);
    const bool causal = node_.attr_int("is_causal", 0) != 0;
    std::vector<std::vector<int64_t>> ops = {q.dims, k.dims, v.dims};
    if (has_mask) ops.push_back(mask.dims.size() >= 2 ? mask.dims : std::vector<int64_t>{1, 1});
    std::vector<int64_t> batch;
    SL_RETURN_IF_ERROR(batch_dims(ops, &batch));
    const int64_t sq = q.dims[q.dims.size() - 2], d = q.dims.back(), sk = k.dims.back(), dv = v.dims.back();
    std::vector<int64_t> od = batch;
    od.insert(od.end(), {sq, dv});
    std::vector<double> o(static_cast<size_t>(Shape(od).numel()), 0.0);
    std::vector<double> p(static_cast<size_t>(sk));
    const int64_t nb = Shape(batch).numel();
    for (int64_t b = 0; b < nb; ++b) {
      std::vector<int64_t> bi = unravel(b, batch);
      auto full = [&](int64_t r, int64_t c) {
        std::vector<int64_t> f = bi;
        f.insert(f.end(), {r, c});
        return f;
      };
      for (int64_t i = 0; i < sq; ++i) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < sk; ++j) {
          double s = 0.0;
          for (int64_t t = 0; t < d; ++t)
            s += q.at(broadcast_index(full(i, t), q.dims)) * k.at(broadcast_index(full(t, j), k.dims));
          s *= scale;
          if (softcap > 0.0) s = softcap * std::tanh(s / softcap);
          if (has_mask) s += mask.at(broadcast_index(full(i, j), mask.dims));
          if (causal && j > i) s = -INFINITY;
          p[static_cast<size_t>(j)] = s;
          mx = std::max(mx, s);
        }
        // A row that sees no key gets zero weights.
        double sum = 0.0;
        for (int64_t j = 0; j < sk; ++j)
          sum += p[static_cast<size_t>(j)] = mx == -INFINITY ? 0.0 : std::exp(p[static_cast<size_t>(j)] - mx);
        if (sum == 0.0) sum = 1.0;
        for (int64_t c = 0; c < dv; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j < sk; ++j)
            acc += p[static_cast<size_t>(j)] / sum * v.at(broadcast_index(full(j, c), v.dims));
          o[static_cast<size_t>(ravel(full(i, c), od))] = acc;
        }
      }
    }
    // Y = transpose(O, out_perm).
    const std::vector<int64_t> perm = node_.attr_ints("out_perm");
    const std::vector<int64_t> yd = out[0].shape().to_vector();
    for (int64_t i = 0; i < out[0].numel(); ++i) {
      const std::vector<int64_t> yi = unravel(i, yd);
      std::vector<int64_t> oi(od.size(), 0);
      for (size_t t = 0; t < od.size(); ++t) oi[perm.empty() ? t : static_cast<size_t>(perm[t])] = yi[t];
      out[0].data<float>()[i] = static_cast<float>(o[static_cast<size_t>(ravel(oi, od))]);
    }
    return ok_status();
  }

 private:
  Status logical_dims(const Shape& s, const char* perm_attr, std::vector<int64_t>* dims) const {
    const std::vector<int64_t> perm = node_.attr_ints(perm_attr);
    if (!is_permutation(perm, s.rank())) return invalid_argument(node_.describe() + ": bad " + perm_attr);
    if (s.rank() < 2) return unsupported(node_.describe() + ": operands must have rank >= 2");
    dims->clear();
    for (size_t i = 0; i < s.rank(); ++i) dims->push_back(s[perm.empty() ? i : static_cast<size_t>(perm[i])]);
    return ok_status();
  }

  Status batch_dims(const std::vector<std::vector<int64_t>>& ops, std::vector<int64_t>* batch) const {
    Shape b;
    for (const auto& d : ops) {
      Shape next;
      if (!broadcast_shapes(b, Shape(std::vector<int64_t>(d.begin(), d.end() - 2)), &next))
        return invalid_argument(node_.describe() + ": batch dims do not broadcast");
      b = next;
    }
    *batch = b.to_vector();
    return ok_status();
  }
};

class RefGelu final : public RefKernel {
 public:
  explicit RefGelu(const graph::Node& node) : RefKernel(node) {}
  Status init() { return ok_status(); }

 protected:
  Result<std::vector<Shape>> shapes(const std::vector<Shape>& in, const std::vector<bool>& present) const override {
    if (in.size() != 1 || !present[0]) return invalid_argument(node_.describe() + ": expects one input");
    return std::vector<Shape>{in[0]};
  }
  Status compute(std::span<const Tensor> in, std::span<Tensor> out) const override {
    for (int64_t i = 0; i < in[0].numel(); ++i) {
      const double x = in[0].data<float>()[i];
      out[0].data<float>()[i] = static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
    }
    return ok_status();
  }
};

// LayerNormalization over the trailing dims from `axis`, Scale and B broadcast to them.
class RefLayerNorm final : public RefKernel {
 public:
  explicit RefLayerNorm(const graph::Node& node) : RefKernel(node) {}
  Status init() { return ok_status(); }

 protected:
  Result<std::vector<Shape>> shapes(const std::vector<Shape>& in, const std::vector<bool>& present) const override {
    if (in.size() < 2 || !present[0] || !present[1]) return invalid_argument(node_.describe() + ": needs X and Scale");
    const int64_t rank = static_cast<int64_t>(in[0].rank());
    int64_t axis = node_.attr_int("axis", -1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return invalid_argument(node_.describe() + ": axis out of range");
    return std::vector<Shape>{in[0]};
  }
  Status compute(std::span<const Tensor> in, std::span<Tensor> out) const override {
    const Tensor& x = in[0];
    const int64_t rank = static_cast<int64_t>(x.shape().rank());
    int64_t axis = node_.attr_int("axis", -1);
    if (axis < 0) axis += rank;
    const std::vector<int64_t> norm(x.shape().begin() + axis, x.shape().end());
    const int64_t len = Shape(norm).numel();
    const int64_t rows = len == 0 ? 0 : x.numel() / len;
    const double eps = node_.attr_float("epsilon", 1e-5f);
    const bool has_b = in.size() > 2 && in[2].defined();
    const Dense scale = transposed(in[1], {});
    const Dense bias = has_b ? transposed(in[2], {}) : Dense{};
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.data<float>() + r * len;
      double mean = 0.0, var = 0.0;
      for (int64_t i = 0; i < len; ++i) mean += xr[i];
      mean /= static_cast<double>(len);
      for (int64_t i = 0; i < len; ++i) var += (xr[i] - mean) * (xr[i] - mean);
      var /= static_cast<double>(len);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t i = 0; i < len; ++i) {
        const std::vector<int64_t> ni = unravel(i, norm);
        double y = (xr[i] - mean) * inv * scale.at(broadcast_tail(ni, scale.dims));
        if (has_b) y += bias.at(broadcast_tail(ni, bias.dims));
        out[0].data<float>()[r * len + i] = static_cast<float>(y);
      }
    }
    return ok_status();
  }

 private:
  // Index into `dims` (leading dims beyond the normalized ones must be 1) of a normalized index.
  static std::vector<int64_t> broadcast_tail(const std::vector<int64_t>& ni, const std::vector<int64_t>& dims) {
    std::vector<int64_t> idx(dims.size(), 0);
    for (size_t i = 0; i < dims.size(); ++i) {
      const int64_t k = static_cast<int64_t>(ni.size()) - static_cast<int64_t>(dims.size()) + static_cast<int64_t>(i);
      idx[i] = k < 0 || dims[i] == 1 ? 0 : ni[static_cast<size_t>(k)];
    }
    return idx;
  }
};

// RMSNormalization: y = x / sqrt(mean(x^2 over the dims from axis) + epsilon) * Scale.
class RefRmsNorm final : public RefKernel {
 public:
  explicit RefRmsNorm(const graph::Node& node) : RefKernel(node) {}
  Status init() { return ok_status(); }

 protected:
  Result<std::vector<Shape>> shapes(const std::vector<Shape>& in, const std::vector<bool>& present) const override {
    if (in.size() != 2 || !present[0] || !present[1]) return invalid_argument(node_.describe() + ": needs X and Scale");
    const int64_t rank = static_cast<int64_t>(in[0].rank());
    int64_t axis = node_.attr_int("axis", -1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return invalid_argument(node_.describe() + ": axis out of range");
    return std::vector<Shape>{in[0]};
  }
  Status compute(std::span<const Tensor> in, std::span<Tensor> out) const override {
    const Tensor& x = in[0];
    const int64_t rank = static_cast<int64_t>(x.shape().rank());
    int64_t axis = node_.attr_int("axis", -1);
    if (axis < 0) axis += rank;
    const std::vector<int64_t> norm(x.shape().begin() + axis, x.shape().end());
    const int64_t len = Shape(norm).numel();
    const int64_t rows = len == 0 ? 0 : x.numel() / len;
    const double eps = node_.attr_float("epsilon", 1e-5f);
    const Dense scale = transposed(in[1], {});
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.data<float>() + r * len;
      double ms = 0.0;
      for (int64_t i = 0; i < len; ++i) ms += double(xr[i]) * xr[i];
      const double inv = 1.0 / std::sqrt(ms / static_cast<double>(len) + eps);
      for (int64_t i = 0; i < len; ++i) {
        const std::vector<int64_t> ni = unravel(i, norm);
        std::vector<int64_t> si(scale.dims.size(), 0);
        for (size_t k = 0; k < si.size(); ++k) {
          const int64_t a = static_cast<int64_t>(ni.size()) - static_cast<int64_t>(si.size()) + static_cast<int64_t>(k);
          si[k] = a < 0 || scale.dims[k] == 1 ? 0 : ni[static_cast<size_t>(a)];
        }
        out[0].data<float>()[r * len + i] = static_cast<float>(xr[i] * inv * scale.at(si));
      }
    }
    return ok_status();
  }
};

// RotaryEmbedding, as ONNX's definition: the head vectors of [B, H, S, D] (or [B, S, H * D] with
// num_heads), their first R elements rotated by cos/sin rows (position_ids pick the row, else
// [B, S, R/2] caches), as halves or interleaved pairs.
class RefRotary final : public Kernel {
 public:
  explicit RefRotary(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3) return invalid_argument(node_.describe() + ": needs input, cos_cache, sin_cache");
    for (size_t i = 0; i < 3; ++i)
      if (in[i].dtype != DType::kFloat32) return unsupported(node_.describe() + ": reference takes float32");
    if (in.size() > 3 && in[3].present() && in[3].dtype != DType::kInt64)
      return invalid_argument(node_.describe() + ": position_ids must be int64");
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{DType::kFloat32, in[0].shape});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Shape& s = x.shape();
    const bool four = s.rank() == 4;
    const int64_t heads = four ? s[1] : node_.attr_int("num_heads", 0);
    if (heads <= 0) return invalid_argument(node_.describe() + ": num_heads needed for 3-D input");
    const int64_t b_n = s[0], seq = four ? s[2] : s[1], d = four ? s[3] : s[2] / heads;
    const int64_t rot = node_.attr_int("rotary_embedding_dim", 0) > 0 ? node_.attr_int("rotary_embedding_dim", 0) : d;
    const int64_t half = rot / 2;
    const bool inter = node_.attr_int("interleaved", 0) != 0;
    const bool has_pos = ctx.inputs.size() > 3 && ctx.inputs[3].defined();
    const float* cos = ctx.inputs[1].data<float>();
    const float* sin = ctx.inputs[2].data<float>();
    for (int64_t b = 0; b < b_n; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < seq; ++t) {
          const int64_t base = four ? ((b * heads + h) * seq + t) * d : (b * seq + t) * heads * d + h * d;
          const int64_t row = has_pos ? ctx.inputs[3].data<int64_t>()[b * seq + t] : b * seq + t;
          if (has_pos && (row < 0 || row >= ctx.inputs[1].shape()[0]))
            return invalid_argument(node_.describe() + ": position out of range");
          const float* xv = x.data<float>() + base;
          float* yv = ctx.outputs[0].data<float>() + base;
          for (int64_t i = rot; i < d; ++i) yv[i] = xv[i];
          for (int64_t i = 0; i < half; ++i) {
            const double c = cos[row * half + i], sn = sin[row * half + i];
            const int64_t i1 = inter ? 2 * i : i, i2 = inter ? 2 * i + 1 : i + half;
            const double x1 = xv[i1], x2 = xv[i2];
            yv[i1] = static_cast<float>(c * x1 - sn * x2);
            yv[i2] = static_cast<float>(sn * x1 + c * x2);
          }
        }
    return ok_status();
  }

 private:
  graph::Node node_;
};

}  // namespace

Status register_transformer(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefLayerNorm>("LayerNormalization", "streamline", 1)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefGelu>("Gelu", "streamline", 1)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefRmsNorm>("RMSNormalization", "", 23)));
  KernelDef rot;
  rot.op = "RotaryEmbedding";
  rot.since_version = 23;
  rot.dtype = DType::kFloat32;
  rot.provider = "reference";
  rot.create = [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new RefRotary(args.node));
  };
  SL_RETURN_IF_ERROR(reg.add(std::move(rot)));
  return reg.add(ref_def<RefAttention>("Attention", "streamline", 1));
}

}  // namespace streamline::ops::reference
