// Recurrent layers: RNN, GRU and LSTM (opsets 7 to 14, float32), every direction, optional bias,
// sequence_lens, initial states, LSTM peepholes and input_forget, GRU linear_before_reset, the
// activations/activation_alpha/activation_beta attributes, clip, and the opset-14 batch-first layout.
//
// Per direction:
//   1. XW = X . W^T + biases for every time step at once (one sgemm over seq * batch rows).
//   2. For each step, HR = H . R^T (one sgemm over the batch), then the gate arithmetic per batch
//      row, in place on H (and C). Rows whose sequence has ended keep their state; Y stays zero there.
//   3. The final states go to Y_h / Y_c.
// Workspace: XW, HR and the state rows; nothing is allocated in run().

#include <dnnl.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

enum class Cell { kRnn, kGru, kLstm };

enum class Act {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct Activation {
  Act kind = Act::kTanh;
  float alpha = 0.f;
  float beta = 0.f;
};

inline float apply(const Activation& a, float x) {
  switch (a.kind) {
    case Act::kRelu:
      return x > 0.f ? x : 0.f;
    case Act::kTanh:
      return std::tanh(x);
    case Act::kSigmoid:
      return 1.f / (1.f + std::exp(-x));
    case Act::kAffine:
      return a.alpha * x + a.beta;
    case Act::kLeakyRelu:
      return x >= 0.f ? x : a.alpha * x;
    case Act::kThresholdedRelu:
      return x > a.alpha ? x : 0.f;
    case Act::kScaledTanh:
      return a.alpha * std::tanh(a.beta * x);
    case Act::kHardSigmoid:
      return std::min(1.f, std::max(0.f, a.alpha * x + a.beta));
    case Act::kElu:
      return x >= 0.f ? x : a.alpha * (std::exp(x) - 1.f);
    case Act::kSoftsign:
      return x / (1.f + std::fabs(x));
    case Act::kSoftplus:
      return x > 20.f ? x : std::log1p(std::exp(x));
  }
  return x;
}

// Parses one activation name; alpha/beta are taken in order from the attribute lists for the
// activations that use them, defaults otherwise.
bool parse_activation(std::string name, const std::vector<float>& alphas, const std::vector<float>& betas,
                      size_t* next_alpha, size_t* next_beta, Activation* out) {
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct Known {
    const char* name;
    Act kind;
    bool uses_alpha, uses_beta;
    float alpha, beta;
  };
  static const Known kKnown[] = {
      {"relu", Act::kRelu, false, false, 0.f, 0.f},
      {"tanh", Act::kTanh, false, false, 0.f, 0.f},
      {"sigmoid", Act::kSigmoid, false, false, 0.f, 0.f},
      {"affine", Act::kAffine, true, true, 1.f, 0.f},
      {"leakyrelu", Act::kLeakyRelu, true, false, 0.01f, 0.f},
      {"thresholdedrelu", Act::kThresholdedRelu, true, false, 1.f, 0.f},
      {"scaledtanh", Act::kScaledTanh, true, true, 1.f, 1.f},
      {"hardsigmoid", Act::kHardSigmoid, true, true, 0.2f, 0.5f},
      {"elu", Act::kElu, true, false, 1.f, 0.f},
      {"softsign", Act::kSoftsign, false, false, 0.f, 0.f},
      {"softplus", Act::kSoftplus, false, false, 0.f, 0.f},
  };
  for (const Known& k : kKnown) {
    if (name != k.name) continue;
    out->kind = k.kind;
    out->alpha = k.alpha;
    out->beta = k.beta;
    if (k.uses_alpha && *next_alpha < alphas.size()) out->alpha = alphas[(*next_alpha)++];
    if (k.uses_beta && *next_beta < betas.size()) out->beta = betas[(*next_beta)++];
    return true;
  }
  return false;
}

// C[M,N] = A[M,K] . B[N,K]^T (+ C when accumulate), row-major.
void gemm_nt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
             int64_t ldc, bool accumulate) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    return;
  }
  dnnl_sgemm('N', 'T', m, n, k, 1.f, a, lda, b, ldb, accumulate ? 1.f : 0.f, c, ldc);
}

class RecurrentKernel final : public DataKernel {
 public:
  RecurrentKernel(const graph::Node& node, Cell cell)
      : DataKernel(node), cell_(cell), node_outputs_(node.outputs.size()) {}

  Status init(const KernelCreateArgs& a) {
    const graph::Node& n = a.node;
    const std::string dir = n.attr_string("direction", "forward");
    if (dir == "forward")
      dirs_ = 1;
    else if (dir == "reverse")
      dirs_ = 1, reverse_only_ = true;
    else if (dir == "bidirectional")
      dirs_ = 2;
    else
      return invalid("unknown direction '" + dir + "'");
    hidden_attr_ = n.attr_int("hidden_size", -1);
    layout_ = n.attr_int("layout", 0);
    if (layout_ != 0 && layout_ != 1) return invalid("layout must be 0 or 1");
    has_clip_ = n.has_attr("clip");
    clip_ = n.attr_float("clip", 0.f);
    if (has_clip_ && !(clip_ > 0.f)) return invalid("clip must be positive");
    linear_before_reset_ = n.attr_int("linear_before_reset", 0) != 0;
    input_forget_ = n.attr_int("input_forget", 0) != 0;
    const size_t per_dir = cell_ == Cell::kRnn ? 1 : cell_ == Cell::kGru ? 2 : 3;
    std::vector<std::string> names;
    auto it = n.attrs.find("activations");
    if (it != n.attrs.end()) names = it->second.strings;
    if (names.empty()) {
      if (cell_ == Cell::kRnn) names = {"Tanh"};
      if (cell_ == Cell::kGru) names = {"Sigmoid", "Tanh"};
      if (cell_ == Cell::kLstm) names = {"Sigmoid", "Tanh", "Tanh"};
    }
    if (names.size() == per_dir && dirs_ == 2) {
      const std::vector<std::string> once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    if (names.size() != per_dir * static_cast<size_t>(dirs_))
      return invalid("expected " + std::to_string(per_dir * static_cast<size_t>(dirs_)) + " activations, got " +
                     std::to_string(names.size()));
    const std::vector<float> alphas = n.attr_floats("activation_alpha");
    const std::vector<float> betas = n.attr_floats("activation_beta");
    size_t na = 0, nb = 0;
    for (const std::string& name : names) {
      Activation act;
      if (!parse_activation(name, alphas, betas, &na, &nb, &act)) return unsupported_error("activation '" + name + "'");
      acts_.push_back(act);
    }
    if (node_outputs_ > (cell_ == Cell::kLstm ? 3u : 2u)) return invalid("too many outputs");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid("expected X, W and R");
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].present() && i != 4 && in[i].dtype != DType::kFloat32)
        return unsupported_error(std::string("dtype ") + dtype_name(in[i].dtype) + " (only float32)");
    SL_ASSIGN_OR_RETURN(Dims d, dims(in));
    ReshapeResult rr;
    const Shape y = layout_ == 0 ? Shape{d.seq, dirs_, d.batch, d.hidden} : Shape{d.batch, d.seq, dirs_, d.hidden};
    const Shape state = layout_ == 0 ? Shape{dirs_, d.batch, d.hidden} : Shape{d.batch, dirs_, d.hidden};
    rr.outputs.push_back(OutputInfo{DType::kFloat32, y, Layout::kPlain});
    if (node_outputs_ > 1) rr.outputs.push_back(OutputInfo{DType::kFloat32, state, Layout::kPlain});
    if (node_outputs_ > 2) rr.outputs.push_back(OutputInfo{DType::kFloat32, state, Layout::kPlain});
    const int64_t g = gates();
    const int64_t floats = d.seq * d.batch * g * d.hidden + d.batch * g * d.hidden + 3 * d.batch * d.hidden;
    rr.workspace_bytes = static_cast<size_t>(floats) * sizeof(float) + static_cast<size_t>(d.batch) * sizeof(int64_t);
    rr.state = std::make_shared<Dims>(d);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Dims& d = *static_cast<const Dims*>(ctx.state);
    const int64_t g = gates(), h = d.hidden, batch = d.batch, seq = d.seq;
    float* xw = static_cast<float*>(ctx.workspace);
    float* hr = xw + seq * batch * g * h;
    float* hs = hr + batch * g * h;
    float* cs = hs + batch * h;
    float* tmp = cs + batch * h;
    auto* lens = reinterpret_cast<int64_t*>(tmp + batch * h);
    const Tensor* seq_lens = input(ctx, 4);
    for (int64_t b = 0; b < batch; ++b) {
      lens[b] = seq_lens ? load_index(*seq_lens, b) : seq;
      if (lens[b] < 0 || lens[b] > seq)
        return invalid("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lens[b]) + " is outside [0, " +
                       std::to_string(seq) + "]");
    }
    Tensor& y = ctx.outputs[0];
    float* yp = y.defined() ? y.data<float>() : nullptr;
    if (yp) std::fill(yp, yp + y.numel(), 0.f);
    for (int64_t dir = 0; dir < dirs_; ++dir) {
      const bool reverse = reverse_only_ || dir == 1;
      run_direction(ctx, d, dir, reverse, lens, xw, hr, hs, cs, tmp, yp);
      for (size_t o = 1; o < ctx.outputs.size() && o < 3; ++o) {
        Tensor& st = ctx.outputs[o];
        if (!st.defined()) continue;
        const float* src = o == 1 ? hs : cs;
        for (int64_t b = 0; b < batch; ++b)
          std::memcpy(st.data<float>() + state_offset(d, dir, b), src + b * h, static_cast<size_t>(h) * sizeof(float));
      }
    }
    return ok_status();
  }

 private:
  struct Dims {
    int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  };

  int64_t gates() const { return cell_ == Cell::kRnn ? 1 : cell_ == Cell::kGru ? 3 : 4; }

  static const Tensor* input(const RunContext& ctx, size_t i) {
    return i < ctx.inputs.size() && ctx.inputs[i].defined() ? &ctx.inputs[i] : nullptr;
  }

  Result<Dims> dims(std::span<const TensorInfo> in) const {
    const Shape& x = in[0].shape;
    const Shape& w = in[1].shape;
    const Shape& r = in[2].shape;
    if (x.rank() != 3 || w.rank() != 3 || r.rank() != 3) return invalid("X, W and R must have rank 3");
    Dims d;
    d.seq = layout_ == 0 ? x[0] : x[1];
    d.batch = layout_ == 0 ? x[1] : x[0];
    d.input = x[2];
    d.hidden = hidden_attr_ >= 0 ? hidden_attr_ : r[2];
    const int64_t g = gates();
    if (w[0] != dirs_ || w[1] != g * d.hidden || w[2] != d.input)
      return invalid("W has shape " + w.to_string() + ", expected [" + std::to_string(dirs_) + "," +
                     std::to_string(g * d.hidden) + "," + std::to_string(d.input) + "]");
    if (r[0] != dirs_ || r[1] != g * d.hidden || r[2] != d.hidden)
      return invalid("R has shape " + r.to_string() + ", expected [" + std::to_string(dirs_) + "," +
                     std::to_string(g * d.hidden) + "," + std::to_string(d.hidden) + "]");
    auto present = [&](size_t i) { return i < in.size() && in[i].present(); };
    if (present(3) && in[3].shape != Shape{dirs_, 2 * g * d.hidden})
      return invalid("B has shape " + in[3].shape.to_string());
    if (present(4)) {
      if (in[4].dtype != DType::kInt32 && in[4].dtype != DType::kInt64)
        return invalid("sequence_lens must be int32 or int64");
      if (in[4].shape != Shape{d.batch}) return invalid("sequence_lens has shape " + in[4].shape.to_string());
    }
    const Shape state = layout_ == 0 ? Shape{dirs_, d.batch, d.hidden} : Shape{d.batch, dirs_, d.hidden};
    if (present(5) && in[5].shape != state) return invalid("initial_h has shape " + in[5].shape.to_string());
    if (cell_ == Cell::kLstm) {
      if (present(6) && in[6].shape != state) return invalid("initial_c has shape " + in[6].shape.to_string());
      if (present(7) && in[7].shape != Shape{dirs_, 3 * d.hidden})
        return invalid("P has shape " + in[7].shape.to_string());
    }
    return d;
  }

  int64_t state_offset(const Dims& d, int64_t dir, int64_t b) const {
    return layout_ == 0 ? (dir * d.batch + b) * d.hidden : (b * dirs_ + dir) * d.hidden;
  }

  float clip(float v) const { return has_clip_ ? std::min(clip_, std::max(-clip_, v)) : v; }

  void run_direction(const RunContext& ctx, const Dims& d, int64_t dir, bool reverse, const int64_t* lens, float* xw,
                     float* hr, float* hs, float* cs, float* tmp, float* yp) const {
    const int64_t g = gates(), h = d.hidden, batch = d.batch, seq = d.seq, gh = g * h;
    const float* x = ctx.inputs[0].data<float>();
    const float* w = ctx.inputs[1].data<float>() + dir * gh * d.input;
    const float* r = ctx.inputs[2].data<float>() + dir * gh * h;
    const Tensor* bias = input(ctx, 3);
    const float* wb = bias ? bias->data<float>() + dir * 2 * gh : nullptr;
    const float* rb = wb ? wb + gh : nullptr;
    const Tensor* h0 = input(ctx, 5);
    const Tensor* c0 = cell_ == Cell::kLstm ? input(ctx, 6) : nullptr;
    const Tensor* peep = cell_ == Cell::kLstm ? input(ctx, 7) : nullptr;
    const float* p = peep ? peep->data<float>() + dir * 3 * h : nullptr;
    const Activation* act = acts_.data() + dir * (cell_ == Cell::kRnn ? 1 : cell_ == Cell::kGru ? 2 : 3);

    // Pass 1: input projections of every step (rows in X's own order) plus the biases that are
    // added unconditionally.
    gemm_nt(seq * batch, gh, d.input, x, d.input, w, d.input, xw, gh, false);
    if (wb) {
      for (int64_t row = 0; row < seq * batch; ++row) {
        float* out = xw + row * gh;
        for (int64_t j = 0; j < gh; ++j) {
          const bool recurrent_inside = cell_ == Cell::kGru && j >= 2 * h && linear_before_reset_;
          out[j] += wb[j] + (recurrent_inside ? 0.f : rb[j]);
        }
      }
    }
    for (int64_t b = 0; b < batch; ++b) {
      if (h0)
        std::memcpy(hs + b * h, h0->data<float>() + state_offset(d, dir, b), static_cast<size_t>(h) * sizeof(float));
      else
        std::fill(hs + b * h, hs + (b + 1) * h, 0.f);
      if (c0)
        std::memcpy(cs + b * h, c0->data<float>() + state_offset(d, dir, b), static_cast<size_t>(h) * sizeof(float));
      else
        std::fill(cs + b * h, cs + (b + 1) * h, 0.f);
    }
    // Pass 2: the recurrence.
    const int64_t recurrent_cols = cell_ == Cell::kGru && !linear_before_reset_ ? 2 * h : gh;
    for (int64_t s = 0; s < seq; ++s) {
      gemm_nt(batch, recurrent_cols, h, hs, h, r, h, hr, gh, false);
      if (cell_ == Cell::kGru && !linear_before_reset_) {
        // (r . H) . Rh^T needs r first.
        for (int64_t b = 0; b < batch; ++b) {
          if (s >= lens[b]) continue;
          const float* row = xw + x_row(d, step_time(s, lens[b], reverse), b) * gh;
          for (int64_t j = 0; j < h; ++j) {
            const float rt = apply(act[0], clip(row[h + j] + hr[b * gh + h + j]));
            tmp[b * h + j] = rt * hs[b * h + j];
          }
        }
        gemm_nt(batch, h, h, tmp, h, r + 2 * h * h, h, hr + 2 * h, gh, false);
      }
      for (int64_t b = 0; b < batch; ++b) {
        if (s >= lens[b]) continue;
        const int64_t t = step_time(s, lens[b], reverse);
        const float* row = xw + x_row(d, t, b) * gh;
        const float* rec = hr + b * gh;
        float* hb = hs + b * h;
        float* cb = cs + b * h;
        for (int64_t j = 0; j < h; ++j) {
          switch (cell_) {
            case Cell::kRnn:
              hb[j] = apply(act[0], clip(row[j] + rec[j]));
              break;
            case Cell::kGru: {
              const float z = apply(act[0], clip(row[j] + rec[j]));
              float hh;
              if (linear_before_reset_) {
                const float rt = apply(act[0], clip(row[h + j] + rec[h + j]));
                const float rbh = rb ? rb[2 * h + j] : 0.f;
                hh = apply(act[1], clip(row[2 * h + j] + rt * (rec[2 * h + j] + rbh)));
              } else {
                hh = apply(act[1], clip(row[2 * h + j] + rec[2 * h + j]));
              }
              hb[j] = (1.f - z) * hh + z * hb[j];
              break;
            }
            case Cell::kLstm: {
              const float c_prev = cb[j];
              const float it = apply(act[0], clip(row[j] + rec[j] + (p ? p[j] * c_prev : 0.f)));
              const float ft =
                  input_forget_
                      ? 1.f - it
                      : apply(act[0], clip(row[2 * h + j] + rec[2 * h + j] + (p ? p[2 * h + j] * c_prev : 0.f)));
              const float ct = apply(act[1], clip(row[3 * h + j] + rec[3 * h + j]));
              const float c_new = ft * c_prev + it * ct;
              const float ot = apply(act[0], clip(row[h + j] + rec[h + j] + (p ? p[h + j] * c_new : 0.f)));
              cb[j] = c_new;
              hb[j] = ot * apply(act[2], c_new);
              break;
            }
          }
        }
        if (yp) {
          const int64_t off = layout_ == 0 ? ((t * dirs_ + dir) * batch + b) * h : ((b * seq + t) * dirs_ + dir) * h;
          std::memcpy(yp + off, hb, static_cast<size_t>(h) * sizeof(float));
        }
      }
    }
  }

  static int64_t step_time(int64_t s, int64_t len, bool reverse) { return reverse ? len - 1 - s : s; }
  int64_t x_row(const Dims& d, int64_t t, int64_t b) const { return layout_ == 0 ? t * d.batch + b : b * d.seq + t; }

  Cell cell_;
  size_t node_outputs_;
  int64_t dirs_ = 1;
  bool reverse_only_ = false;
  int64_t hidden_attr_ = -1;
  int64_t layout_ = 0;
  bool has_clip_ = false;
  float clip_ = 0.f;
  bool linear_before_reset_ = false;
  bool input_forget_ = false;
  std::vector<Activation> acts_;
};

KernelFactory recurrent_factory(Cell cell) {
  return [cell](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<RecurrentKernel>(a.node, cell);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

}  // namespace

Status register_rnn(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "RNN", 7, DType::kUndefined, recurrent_factory(Cell::kRnn)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "GRU", 7, DType::kUndefined, recurrent_factory(Cell::kGru)));
  return add_typed_def(reg, "LSTM", 7, DType::kUndefined, recurrent_factory(Cell::kLstm));
}

}  // namespace streamline::ops::cpu
