// RotaryEmbedding (opset 23): input [B, heads, S, D] or [B, S, heads * D] (num_heads), cos_cache
// and sin_cache [max_position, R/2] indexed by position_ids [B, S], or [B, S, R/2] without them;
// the first R = rotary_embedding_dim (default D) elements of every head vector are rotated as
// pairs (x[i], x[i + R/2]), or (x[2i], x[2i + 1]) when interleaved, the rest copied. Work is split
// over the (batch, position, head) vectors; the pair loop vectorises; may run in place. A
// position outside the caches is an InvalidArgument naming it.

#include <cstring>

#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

class RotaryKernel final : public Kernel {
 public:
  explicit RotaryKernel(const graph::Node& node)
      : who_(node.describe()),
        interleaved_(node.attr_int("interleaved", 0) != 0),
        rotary_dim_(node.attr_int("rotary_embedding_dim", 0)),
        num_heads_(node.attr_int("num_heads", 0)) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() < 3 || !in[0].present() || !in[1].present() || !in[2].present())
      return invalid_argument(who_ + ": needs input, cos_cache and sin_cache");
    for (size_t i = 0; i < 3; ++i)
      if (in[i].dtype != DType::kFloat32)
        return unsupported(who_ + ": only float32 is supported, got " + dtype_name(in[i].dtype));
    const bool has_pos = in.size() > 3 && in[3].present();
    if (has_pos && in[3].dtype != DType::kInt64) return invalid_argument(who_ + ": position_ids must be int64");
    const Shape& x = in[0].shape;
    auto st = std::make_shared<RotaryState>();
    RotaryState& s = *st;
    if (x.rank() == 4) {
      // [B, heads, S, D]: vector (b, s, h) at b * H*S*D + h * S*D + s * D.
      s.batch = x[0], s.heads = x[1], s.seq = x[2], s.d = x[3];
      s.head_stride = s.seq * s.d;
      s.seq_stride = s.d;
    } else if (x.rank() == 3) {
      if (num_heads_ <= 0 || x[2] % num_heads_ != 0)
        return invalid_argument(who_ + ": a 3-D input " + x.to_string() + " needs num_heads dividing its last dim");
      s.batch = x[0], s.seq = x[1], s.heads = num_heads_, s.d = x[2] / num_heads_;
      s.head_stride = s.d;
      s.seq_stride = x[2];
    } else {
      return invalid_argument(who_ + ": input must be 3-D or 4-D, got " + x.to_string());
    }
    s.rot = rotary_dim_ > 0 ? rotary_dim_ : s.d;
    if (s.rot > s.d || s.rot % 2 != 0)
      return invalid_argument(who_ + ": rotary_embedding_dim " + std::to_string(s.rot) +
                              " must be even and at most the head size " + std::to_string(s.d));
    const int64_t half = s.rot / 2;
    const Shape& c = in[1].shape;
    if (in[2].shape != c) return invalid_argument(who_ + ": cos_cache and sin_cache shapes differ");
    if (has_pos) {
      if (in[3].shape != Shape{s.batch, s.seq})
        return invalid_argument(who_ + ": position_ids " + in[3].shape.to_string() + " must be [" +
                                std::to_string(s.batch) + ", " + std::to_string(s.seq) + "]");
      if (c.rank() != 2 || c[1] != half)
        return invalid_argument(who_ + ": with position_ids the caches must be [max_position, " + std::to_string(half) +
                                "], got " + c.to_string());
      s.positions = c[0];
    } else if (c != Shape{s.batch, s.seq, half}) {
      return invalid_argument(who_ + ": without position_ids the caches must be [" + std::to_string(s.batch) + ", " +
                              std::to_string(s.seq) + ", " + std::to_string(half) + "], got " + c.to_string());
    }
    s.has_pos = has_pos;
    ReshapeResult r;
    r.outputs.push_back(OutputInfo{DType::kFloat32, x, Layout::kPlain});
    r.inplace = {0};
    r.state = std::move(st);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* s = static_cast<const RotaryState*>(ctx.state);
    if (!s) return internal_error(who_ + ": run without reshape state");
    const float* x = ctx.inputs[0].data<float>();
    const float* cos = ctx.inputs[1].data<float>();
    const float* sin = ctx.inputs[2].data<float>();
    const int64_t* pos = s->has_pos ? ctx.inputs[3].data<int64_t>() : nullptr;
    float* y = ctx.outputs[0].data<float>();
    const int64_t rows = s->batch * s->seq, half = s->rot / 2;
    if (pos)
      for (int64_t i = 0; i < rows; ++i)
        if (pos[i] < 0 || pos[i] >= s->positions)
          return invalid_argument(who_ + ": position_ids value " + std::to_string(pos[i]) + " at " + std::to_string(i) +
                                  " is outside the caches' " + std::to_string(s->positions) + " positions");
    const int64_t vectors = rows * s->heads;
    math::parallel_chunks(vectors, std::max<int64_t>(1, math::kCheapGrain / std::max<int64_t>(s->d, 1)),
                          ctx.num_threads, [&](int64_t lo, int64_t hi) {
                            for (int64_t t = lo; t < hi; ++t) {
                              const int64_t bs = t / s->heads, h = t % s->heads;
                              const int64_t b = bs / s->seq, q = bs % s->seq;
                              const int64_t off = b * s->heads * s->seq * s->d + h * s->head_stride + q * s->seq_stride;
                              const int64_t crow = (pos ? pos[bs] : bs) * half;
                              rotate(x + off, y + off, cos + crow, sin + crow, s->rot, s->d, interleaved_);
                            }
                          });
    return ok_status();
  }

 private:
  struct RotaryState {
    int64_t batch = 0, heads = 0, seq = 0, d = 0, rot = 0, positions = 0;
    int64_t head_stride = 0, seq_stride = 0;  // element strides of a head and a position
    bool has_pos = false;
  };

  // One head vector of d elements; the first `rot` rotated. In place is fine: each pair is read
  // before it is written.
  static void rotate(const float* x, float* y, const float* c, const float* s, int64_t rot, int64_t d,
                     bool interleaved) {
    const int64_t half = rot / 2;
    if (interleaved) {
      for (int64_t i = 0; i < half; ++i) {
        const float a = x[2 * i], b = x[2 * i + 1];
        y[2 * i] = c[i] * a - s[i] * b;
        y[2 * i + 1] = s[i] * a + c[i] * b;
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float a = x[i], b = x[i + half];
        y[i] = c[i] * a - s[i] * b;
        y[i + half] = s[i] * a + c[i] * b;
      }
    }
    if (y != x && d > rot) std::memcpy(y + rot, x + rot, static_cast<size_t>(d - rot) * sizeof(float));
  }

  std::string who_;
  bool interleaved_;
  int64_t rotary_dim_, num_heads_;
};

}  // namespace

Status register_rotary(KernelRegistry& reg) {
  return math::register_ops(reg, {"RotaryEmbedding"}, 23, INT_MAX,
                            [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
                              return std::unique_ptr<Kernel>(new RotaryKernel(args.node));
                            });
}

}  // namespace streamline::ops::cpu
