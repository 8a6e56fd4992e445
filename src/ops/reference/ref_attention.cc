// Reference ONNX Attention (opset 23 on): the operator's function body written as plain loops in
// double precision, float32 only. Q, K, V are read through their 3-D or 4-D index maps; the keys
// are past_key followed by K; the bias is the mask (bool false or a key beyond a short mask:
// -inf; float: its value) plus -inf where the causal frontier j <= i + past (nonpad_kv_seqlen[b] -
// Sq with nonpad_kv_seqlen), the key count or the windows hide the key; query head h reads kv head
// h / (Hq / Hkv). A row whose bias is -inf everywhere gets zero probabilities.

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/reference/ref_transformer.h"

namespace streamline::ops::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

bool present(std::span<const TensorInfo> in, size_t i) {
  return i < in.size() && in[i].present();
}

class RefOnnxAttention final : public Kernel {
 public:
  explicit RefOnnxAttention(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (!present(in, 0) || !present(in, 1) || !present(in, 2)) return invalid_argument(who() + ": needs Q, K, V");
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].present()) continue;
      const bool ok = in[i].dtype == DType::kFloat32 || (i == 3 && in[i].dtype == DType::kBool) ||
                      (i == 6 && in[i].dtype == DType::kInt64);
      if (!ok) return unsupported(who() + ": reference takes float32 (bool mask, int64 nonpad_kv_seqlen) only");
    }
    SL_ASSIGN_OR_RETURN(Dims d, dims(in[0].shape, in[1].shape, in[2].shape, present(in, 4) ? in[4].shape[2] : 0));
    ReshapeResult r;
    const Shape y = d.three_d ? Shape{d.b, d.sq, d.hq * d.dv} : Shape{d.b, d.hq, d.sq, d.dv};
    r.outputs.push_back(OutputInfo{DType::kFloat32, y});
    r.outputs.push_back(OutputInfo{DType::kFloat32, Shape{d.b, d.hkv, d.total, d.d}});
    r.outputs.push_back(OutputInfo{DType::kFloat32, Shape{d.b, d.hkv, d.total, d.dv}});
    r.outputs.push_back(OutputInfo{DType::kFloat32, Shape{d.b, d.hq, d.sq, d.total}});
    r.outputs.resize(std::max<size_t>(node_.outputs.size(), 1));
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto& in = ctx.inputs;
    auto has = [&](size_t i) { return i < in.size() && in[i].defined(); };
    const int64_t past = has(4) ? in[4].shape()[2] : 0;
    SL_ASSIGN_OR_RETURN(Dims d, dims(in[0].shape(), in[1].shape(), in[2].shape(), past));
    const int64_t g = d.hq / d.hkv;
    // Element (b, h, t, e) of the 4-D view of Q, K or V (3-D: [B, S, heads * size]).
    auto at = [&](const Tensor& t, int64_t heads, int64_t size, int64_t b, int64_t h, int64_t s, int64_t e) {
      const Shape& sh = t.shape();
      const int64_t i =
          d.three_d ? (b * sh[1] + s) * heads * size + h * size + e : ((b * heads + h) * sh[2] + s) * size + e;
      return static_cast<double>(t.data<float>()[i]);
    };
    auto key = [&](const Tensor* pastt, const Tensor& now, int64_t size, int64_t b, int64_t h, int64_t t, int64_t e) {
      if (t < past) return static_cast<double>(pastt->data<float>()[((b * d.hkv + h) * past + t) * size + e]);
      return at(now, d.hkv, size, b, h, t - past, e);
    };
    const Tensor* pk = has(4) ? &in[4] : nullptr;
    const Tensor* pv = has(5) ? &in[5] : nullptr;
    const double scale = node_.has_attr("scale") ? node_.attr_float("scale", 1.f) : 1.0 / std::sqrt(double(d.d));
    const double softcap = node_.attr_float("softcap", 0.f);
    const bool causal = node_.attr_int("is_causal", 0) != 0;
    const int64_t mode = node_.attr_int("qk_matmul_output_mode", 0);
    const int64_t left = node_.opset >= 25 ? node_.attr_int("left_window_size", -1) : -1;
    const int64_t right = node_.opset >= 25 ? node_.attr_int("right_window_size", -1) : -1;
    auto out = [&](size_t i) -> float* {
      return i < ctx.outputs.size() && ctx.outputs[i].defined() ? ctx.outputs[i].data<float>() : nullptr;
    };
    // present_key / present_value.
    for (int64_t b = 0; b < d.b; ++b)
      for (int64_t h = 0; h < d.hkv; ++h)
        for (int64_t t = 0; t < d.total; ++t) {
          for (int64_t e = 0; e < d.d; ++e)
            if (out(1)) out(1)[((b * d.hkv + h) * d.total + t) * d.d + e] = float(key(pk, in[1], d.d, b, h, t, e));
          for (int64_t e = 0; e < d.dv; ++e)
            if (out(2)) out(2)[((b * d.hkv + h) * d.total + t) * d.dv + e] = float(key(pv, in[2], d.dv, b, h, t, e));
        }
    std::vector<double> raw(static_cast<size_t>(d.total)), bias(raw.size()), p(raw.size());
    for (int64_t b = 0; b < d.b; ++b) {
      const int64_t limit = has(6) ? in[6].data<int64_t>()[b] : d.total;
      const int64_t offset = has(6) ? limit - d.sq : past;
      for (int64_t h = 0; h < d.hq; ++h) {
        const int64_t hk = h / g;
        for (int64_t i = 0; i < d.sq; ++i) {
          for (int64_t j = 0; j < d.total; ++j) {
            double s = 0.0;
            for (int64_t e = 0; e < d.d; ++e) s += at(in[0], d.hq, d.d, b, h, i, e) * key(pk, in[1], d.d, b, hk, j, e);
            raw[j] = s * scale;
            bias[j] = has(3) ? mask_value(in[3], b, h, i, j) : 0.0;
            if (causal && j > i + offset) bias[j] = kNegInf;
            if (j >= limit) bias[j] = kNegInf;
            if (left >= 0 && j < i + offset - left) bias[j] = kNegInf;
            if (right >= 0 && j > i + offset + right) bias[j] = kNegInf;
          }
          float* qk = out(3) ? out(3) + ((b * d.hq + h) * d.sq + i) * d.total : nullptr;
          if (qk && mode == 0)
            for (int64_t j = 0; j < d.total; ++j) qk[j] = float(raw[j]);
          if (softcap > 0.0)
            for (double& x : raw) x = softcap * std::tanh(x / softcap);
          if (qk && mode == 1)
            for (int64_t j = 0; j < d.total; ++j) qk[j] = float(raw[j]);
          double mx = kNegInf, bias_mx = kNegInf;
          for (int64_t j = 0; j < d.total; ++j) {
            raw[j] += bias[j];
            mx = std::max(mx, raw[j]);
            bias_mx = std::max(bias_mx, bias[j]);
          }
          if (qk && mode == 2)
            for (int64_t j = 0; j < d.total; ++j) qk[j] = float(raw[j]);
          double sum = 0.0;
          for (int64_t j = 0; j < d.total; ++j) sum += p[j] = mx == kNegInf ? 0.0 : std::exp(raw[j] - mx);
          for (int64_t j = 0; j < d.total; ++j) p[j] = bias_mx == kNegInf || sum == 0.0 ? 0.0 : p[j] / sum;
          if (qk && mode == 3)
            for (int64_t j = 0; j < d.total; ++j) qk[j] = float(p[j]);
          for (int64_t e = 0; e < d.dv; ++e) {
            double acc = 0.0;
            for (int64_t j = 0; j < d.total; ++j) acc += p[j] * key(pv, in[2], d.dv, b, hk, j, e);
            const int64_t yi =
                d.three_d ? (b * d.sq + i) * d.hq * d.dv + h * d.dv + e : ((b * d.hq + h) * d.sq + i) * d.dv + e;
            ctx.outputs[0].data<float>()[yi] = float(acc);
          }
        }
      }
    }
    return ok_status();
  }

 private:
  struct Dims {
    bool three_d = false;
    int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, total = 0, d = 0, dv = 0;
  };

  std::string who() const { return node_.describe(); }

  Result<Dims> dims(const Shape& q, const Shape& k, const Shape& v, int64_t past) const {
    Dims d;
    if (q.rank() != k.rank() || q.rank() != v.rank() || (q.rank() != 3 && q.rank() != 4))
      return invalid_argument(who() + ": Q, K, V must be all 3-D or all 4-D");
    d.three_d = q.rank() == 3;
    d.b = q[0];
    if (d.three_d) {
      d.hq = node_.attr_int("q_num_heads", 0);
      d.hkv = node_.attr_int("kv_num_heads", 0);
      if (d.hq <= 0 || d.hkv <= 0) return invalid_argument(who() + ": 3-D needs q_num_heads and kv_num_heads");
      d.sq = q[1], d.skv = k[1], d.d = q[2] / d.hq, d.dv = v[2] / d.hkv;
    } else {
      d.hq = q[1], d.hkv = k[1], d.sq = q[2], d.skv = k[2], d.d = q[3], d.dv = v[3];
    }
    if (d.hkv <= 0 || d.hq % d.hkv != 0) return invalid_argument(who() + ": q heads not a multiple of kv heads");
    d.total = past + d.skv;
    return d;
  }

  // The mask's bias for (b, h, i, j): right-aligned broadcast, -inf past its last dim.
  static double mask_value(const Tensor& m, int64_t b, int64_t h, int64_t i, int64_t j) {
    const Shape& s = m.shape();
    const int64_t full[4] = {b, h, i, j};
    const int64_t r = static_cast<int64_t>(s.rank());
    if (j >= s.back()) return kNegInf;
    int64_t off = 0;
    for (int64_t a = 0; a < r; ++a) {
      const int64_t dim = s[static_cast<size_t>(a)];
      const int64_t idx = dim == 1 && a != r - 1 ? 0 : full[4 - r + a];
      off = off * dim + idx;
    }
    if (m.dtype() == DType::kBool) return m.data<uint8_t>()[off] ? 0.0 : kNegInf;
    return m.data<float>()[off];
  }

  graph::Node node_;
};

}  // namespace

Status register_attention(KernelRegistry& reg) {
  KernelDef d;
  d.op = "Attention";
  d.domain = "";
  d.since_version = 23;
  d.device = Device::kCpu;
  d.dtype = DType::kFloat32;
  d.provider = "reference";
  d.create = [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(new RefOnnxAttention(args.node));
  };
  return reg.add(std::move(d));
}

}  // namespace streamline::ops::reference
