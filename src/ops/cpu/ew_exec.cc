#include "ops/cpu/ew_exec.h"

#include <cmath>
#include <type_traits>

#include "ops/cpu/math_broadcast.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/math_vec.h"

namespace streamline::ops::cpu {
namespace {

using graph::EwInstr;
using graph::EwOp;

constexpr float kHalfSqrt1_2 = 0.70710678118654752f;
constexpr float kSqrt2OverPi = 0.79788456080286536f;

// The float function of a unary op. Always inlined: each loop below instantiates it with a
// constant op, so the switch folds away and the loop vectorises (called, it stays scalar: 9x
// slower on SiLU).
[[gnu::always_inline]] inline float unary(EwOp op, float x, float p0, float p1) {
  switch (op) {
    case EwOp::kIdentity:
      return x;
    case EwOp::kRelu:
      return x > 0.f ? x : 0.f;
    case EwOp::kLeakyRelu:
      return vec::select(x < 0.f, p0 * x, x);
    case EwOp::kSigmoid:
      return vec::sigmoid(x);
    case EwOp::kTanh:
      return vec::tanh(x);
    case EwOp::kExp:
      return vec::exp(x);
    case EwOp::kLog:
      return vec::log(x);
    case EwOp::kSqrt:
      return std::sqrt(x);
    case EwOp::kReciprocal:
      return 1.f / x;
    case EwOp::kNeg:
      return -x;
    case EwOp::kAbs:
      return std::fabs(x);
    case EwOp::kErf:
      return vec::erf(x);
    case EwOp::kHardSigmoid: {
      const float v = vec::fmadd(p0, x, p1);
      return vec::select(v < 0.f, 0.f, vec::select(v > 1.f, 1.f, v));
    }
    case EwOp::kHardSwish: {
      const float v = vec::fmadd(1.f / 6.f, x, 0.5f);
      return x * vec::select(v < 0.f, 0.f, vec::select(v > 1.f, 1.f, v));
    }
    case EwOp::kSoftplus:
      return vec::softplus(x);
    case EwOp::kElu:
      return vec::select(x < 0.f, p0 * vec::expm1(x), x);
    case EwOp::kClip: {
      const float v = x < p0 ? p0 : x;
      return v > p1 ? p1 : v;
    }
    case EwOp::kFloor:
      return std::floor(x);
    case EwOp::kCeil:
      return std::ceil(x);
    case EwOp::kRound:
      return std::rint(x);
    case EwOp::kSign:
      return x > 0.f ? 1.f : (x < 0.f ? -1.f : x);
    case EwOp::kMish:
      return vec::mish(x);
    case EwOp::kSoftsign:
      return x / (1.f + std::fabs(x));
    case EwOp::kSelu:
      return p1 * vec::select(x > 0.f, x, p0 * vec::expm1(x));
    case EwOp::kCelu:
      return vec::select(x > 0.f, x, p0 * vec::expm1(x / p0));
    case EwOp::kThresholdedRelu:
      return x > p0 ? x : 0.f;
    case EwOp::kSin:
      return std::sin(x);
    case EwOp::kCos:
      return std::cos(x);
    case EwOp::kSilu:
      return x * vec::sigmoid(p0 * x);
    case EwOp::kGeluErf:
      return 0.5f * x * (1.f + vec::erf(x * kHalfSqrt1_2));
    case EwOp::kGeluTanh: {
      const float u = kSqrt2OverPi * vec::fmadd(0.044715f * x, x * x, x);
      return 0.5f * x * (1.f + vec::tanh(u));
    }
    default:
      return x;
  }
}

template <typename F>
inline void loop1(const float* a, bool ua, float* y, int64_t n, F f) {
  if (ua) {
    const float v = f(a[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i]);
  }
}

template <typename F>
inline void loop2(const float* a, bool ua, const float* b, bool ub, float* y, int64_t n, F f) {
  if (!ua && !ub) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], b[i]);
  } else if (!ua) {
    const float bv = b[0];
    for (int64_t i = 0; i < n; ++i) y[i] = f(a[i], bv);
  } else if (!ub) {
    const float av = a[0];
    for (int64_t i = 0; i < n; ++i) y[i] = f(av, b[i]);
  } else {
    const float v = f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

void run_unary(const EwInstr& in, const float* a, bool ua, float* y, int64_t n) {
  const float p0 = in.p0, p1 = in.p1;
  switch (in.op) {
#define SL_EW_UNARY(OP) \
  case EwOp::OP:        \
    return loop1(a, ua, y, n, [p0, p1](float x) { return unary(EwOp::OP, x, p0, p1); });
    SL_EW_UNARY(kIdentity)
    SL_EW_UNARY(kRelu)
    SL_EW_UNARY(kLeakyRelu)
    SL_EW_UNARY(kSigmoid)
    SL_EW_UNARY(kTanh)
    SL_EW_UNARY(kExp)
    SL_EW_UNARY(kLog)
    SL_EW_UNARY(kReciprocal)
    SL_EW_UNARY(kNeg)
    SL_EW_UNARY(kAbs)
    SL_EW_UNARY(kErf)
    SL_EW_UNARY(kHardSigmoid)
    SL_EW_UNARY(kHardSwish)
    SL_EW_UNARY(kSoftplus)
    SL_EW_UNARY(kElu)
    SL_EW_UNARY(kClip)
    SL_EW_UNARY(kFloor)
    SL_EW_UNARY(kCeil)
    SL_EW_UNARY(kRound)
    SL_EW_UNARY(kSign)
    SL_EW_UNARY(kMish)
    SL_EW_UNARY(kSoftsign)
    SL_EW_UNARY(kSelu)
    SL_EW_UNARY(kCelu)
    SL_EW_UNARY(kThresholdedRelu)
    SL_EW_UNARY(kSin)
    SL_EW_UNARY(kCos)
    SL_EW_UNARY(kSilu)
    SL_EW_UNARY(kGeluErf)
    SL_EW_UNARY(kGeluTanh)
#undef SL_EW_UNARY
    case EwOp::kSqrt:
      if (ua) return loop1(a, ua, y, n, [](float x) { return std::sqrt(x); });
      return vec::sqrt_array(a, y, n);
    default:
      return;
  }
}

// Pow with a scalar exponent: small integer and half exponents as multiplications and roots.
void run_pow_scalar(const float* a, bool ua, float e, float* y, int64_t n) {
  if (e == 1.f) return loop1(a, ua, y, n, [](float x) { return x; });
  if (e == 2.f) return loop1(a, ua, y, n, [](float x) { return x * x; });
  if (e == 3.f) return loop1(a, ua, y, n, [](float x) { return x * x * x; });
  if (e == 0.5f) return loop1(a, ua, y, n, [](float x) { return std::sqrt(x); });
  if (e == -1.f) return loop1(a, ua, y, n, [](float x) { return 1.f / x; });
  if (e == -0.5f) return loop1(a, ua, y, n, [](float x) { return 1.f / std::sqrt(x); });
  return loop1(a, ua, y, n, [e](float x) { return std::pow(x, e); });
}

void run_binary(const EwInstr& in, const float* a, bool ua, const float* b, bool ub, float* y, int64_t n) {
  switch (in.op) {
    case EwOp::kAdd:
      return loop2(a, ua, b, ub, y, n, [](float x, float z) { return x + z; });
    case EwOp::kSub:
      return loop2(a, ua, b, ub, y, n, [](float x, float z) { return x - z; });
    case EwOp::kMul:
      return loop2(a, ua, b, ub, y, n, [](float x, float z) { return x * z; });
    case EwOp::kDiv:
      return loop2(a, ua, b, ub, y, n, [](float x, float z) { return x / z; });
    case EwOp::kMax:
      return loop2(a, ua, b, ub, y, n, [](float x, float z) { return (x >= z || x != x) ? x : z; });
    case EwOp::kMin:
      return loop2(a, ua, b, ub, y, n, [](float x, float z) { return (x <= z || x != x) ? x : z; });
    case EwOp::kPRelu:
      return loop2(a, ua, b, ub, y, n, [](float x, float s) { return vec::select(x < 0.f, x * s, x); });
    case EwOp::kPow:
      if (ub) return run_pow_scalar(a, ua, b[0], y, n);
      return loop2(a, ua, b, ub, y, n, [](float x, float z) { return std::pow(x, z); });
    default:
      return;
  }
}

void run_where(const float* c, bool uc, const float* a, bool ua, const float* b, bool ub, float* y, int64_t n) {
  const int64_t sc = uc ? 0 : 1, sa = ua ? 0 : 1, sb = ub ? 0 : 1;
  for (int64_t i = 0; i < n; ++i) y[i] = c[i * sc] != 0.f ? a[i * sa] : b[i * sb];
}

}  // namespace

Result<EwExec> EwExec::compile(const graph::EwProgram& p) {
  SL_RETURN_IF_ERROR(p.validate());
  EwExec ex;
  ex.p_ = p;
  const int ni = p.num_inputs;
  const int nregs = p.num_registers();
  // Last instruction reading each register (-1: never read).
  std::vector<int> last_use(static_cast<size_t>(nregs), -1);
  for (size_t i = 0; i < p.code.size(); ++i)
    for (int k = 0; k < graph::ew_arity(p.code[i].op); ++k) {
      const int a = p.code[i].args[static_cast<size_t>(k)];
      if (a >= 0) last_use[static_cast<size_t>(a)] = static_cast<int>(i);
    }
  // Buffers 0..ni-1 are the gathered inputs; results take the others, reused once dead.
  std::vector<int> buf_of(static_cast<size_t>(nregs), -1);
  std::vector<int> free_bufs;
  int next = ni;
  for (size_t i = 0; i < p.code.size(); ++i) {
    Step st;
    st.instr = p.code[i];
    for (int k = 0; k < graph::ew_arity(st.instr.op); ++k) {
      const int a = st.instr.args[static_cast<size_t>(k)];
      st.arg_buf[k] = a >= ni ? buf_of[static_cast<size_t>(a)] : -1;
    }
    // Operands whose last reader this is give their buffers back before the result takes one
    // (an instruction reads element i before writing it).
    for (int k = 0; k < graph::ew_arity(st.instr.op); ++k) {
      const int a = st.instr.args[static_cast<size_t>(k)];
      if (a >= ni && last_use[static_cast<size_t>(a)] == static_cast<int>(i)) {
        const int b = buf_of[static_cast<size_t>(a)];
        if (b >= 0 && std::find(free_bufs.begin(), free_bufs.end(), b) == free_bufs.end()) free_bufs.push_back(b);
      }
    }
    const int reg = ni + static_cast<int>(i);
    if (i + 1 < p.code.size()) {
      if (!free_bufs.empty()) {
        st.dst_buf = free_bufs.back();
        free_bufs.pop_back();
      } else {
        st.dst_buf = next++;
      }
      buf_of[static_cast<size_t>(reg)] = st.dst_buf;
    }
    ex.steps_.push_back(st);
  }
  ex.num_buffers_ = next;
  return ex;
}

void EwExec::run_chunk(const float* const* in, const bool* uniform, int64_t len, float* out, float* bufs) const {
  const int ni = p_.num_inputs;
  for (const Step& st : steps_) {
    const float* ptr[3];
    bool uni[3];
    for (int k = 0; k < graph::ew_arity(st.instr.op); ++k) {
      const int a = st.instr.args[static_cast<size_t>(k)];
      if (a == EwInstr::kImm) {
        ptr[k] = &st.instr.imm;
        uni[k] = true;
      } else if (a < ni) {
        ptr[k] = in[a];
        uni[k] = uniform[a];
      } else {
        ptr[k] = bufs + st.arg_buf[k] * kChunk;
        uni[k] = false;
      }
    }
    float* y = st.dst_buf >= 0 ? bufs + st.dst_buf * kChunk : out;
    const int arity = graph::ew_arity(st.instr.op);
    if (arity == 1)
      run_unary(st.instr, ptr[0], uni[0], y, len);
    else if (arity == 2)
      run_binary(st.instr, ptr[0], uni[0], ptr[1], uni[1], y, len);
    else
      run_where(ptr[0], uni[0], ptr[1], uni[1], ptr[2], uni[2], y, len);
  }
}

bool ew_walk_supports(const Shape& out, Layout out_layout, std::span<const EwOperand> inputs) {
  std::vector<math::Operand> ops;
  for (const EwOperand& in : inputs) {
    Shape b;
    if (!broadcast_shapes(out, in.shape, &b) || b != out) return false;
    ops.push_back({in.shape, in.layout});
  }
  return math::strided_plan_supports(out, out_layout, ops);
}

Result<EwWalk> make_ew_walk(const Shape& out, Layout out_layout, std::span<const EwOperand> inputs) {
  if (!ew_walk_supports(out, out_layout, inputs))
    return invalid_argument("elementwise walk: inputs do not broadcast to " + out.to_string() + " in layout " +
                            layout_name(out_layout));
  std::vector<math::Operand> ops;
  for (const EwOperand& in : inputs) ops.push_back({in.shape, in.layout});
  // One more operand: the output itself, so that in-place inputs can be recognised by stride.
  ops.push_back({out, out_layout});
  math::StridedWalk sw = math::make_walk(out, out_layout, ops);
  EwWalk w;
  w.numel = out.numel();
  w.dims = sw.dims;
  const std::vector<int64_t>& self = sw.strides.back();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::vector<int64_t>& st = sw.strides[k];
    bool zero = true;
    for (int64_t s : st) zero = zero && s == 0;
    EwWalk::Read r = EwWalk::Read::kGather;
    if (zero)
      r = EwWalk::Read::kUniform;
    else if (st == self && inputs[k].dtype == DType::kFloat32)
      r = EwWalk::Read::kInPlace;
    w.read.push_back(r);
    w.strides.push_back(st);
    w.dtypes.push_back(inputs[k].dtype);
    // The innermost dims along which the input moves (or of size 1) make its period; the dims
    // just outside them along which it is broadcast stretch that pattern over a span.
    int d = static_cast<int>(w.dims.size()) - 1;
    int64_t period = 1;
    for (; d >= 0 && (st[static_cast<size_t>(d)] != 0 || w.dims[static_cast<size_t>(d)] == 1); --d)
      period *= w.dims[static_cast<size_t>(d)];
    int64_t span = period;
    for (; d >= 0 && st[static_cast<size_t>(d)] == 0; --d) span *= w.dims[static_cast<size_t>(d)];
    w.period.push_back(period);
    w.span.push_back(span);
  }
  return w;
}

namespace {

// Copies input k's elements [begin, begin + len) of the walk into dst, as floats.
template <typename T>
void gather(const EwWalk& w, size_t k, const T* src, int64_t begin, int64_t len, float* dst) {
  const std::vector<int64_t>& st = w.strides[k];
  const int r = static_cast<int>(w.dims.size());
  int64_t idx[16];
  int64_t off = 0, rem = begin;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % w.dims[static_cast<size_t>(d)];
    rem /= w.dims[static_cast<size_t>(d)];
    off += idx[d] * st[static_cast<size_t>(d)];
  }
  const int64_t inner = w.dims.back(), s_in = st.back();
  int64_t done = 0;
  while (done < len) {
    const int64_t run = std::min(inner - idx[r - 1], len - done);
    const T* p = src + off;
    if (s_in == 1) {
      for (int64_t i = 0; i < run; ++i) dst[done + i] = static_cast<float>(p[i]);
    } else if (s_in == 0) {
      const float v = static_cast<float>(p[0]);
      for (int64_t i = 0; i < run; ++i) dst[done + i] = v;
    } else {
      for (int64_t i = 0; i < run; ++i) dst[done + i] = static_cast<float>(p[i * s_in]);
    }
    done += run;
    idx[r - 1] += run;
    off += run * s_in;
    for (int d = r - 1; d > 0 && idx[d] == w.dims[static_cast<size_t>(d)]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
      off += st[static_cast<size_t>(d) - 1] - w.dims[static_cast<size_t>(d)] * st[static_cast<size_t>(d)];
    }
  }
}

}  // namespace

void run_ew(const EwExec& ex, const EwWalk& w, std::span<const void* const> inputs, float* out, int threads) {
  const int ni = ex.num_inputs();
  constexpr int64_t kChunk = EwExec::kChunk;
  // Expensive ops (exp, erf, tanh) dominate most programs; chunks of work per thread as theirs.
  math::parallel_chunks(w.numel, math::kExpensiveGrain, threads, [&](int64_t lo, int64_t hi) {
    std::vector<float> bufs(static_cast<size_t>(std::max(ex.num_buffers(), 1) * kChunk));
    std::vector<const float*> in(static_cast<size_t>(ni));
    std::vector<float> uni_vals(static_cast<size_t>(ni));
    std::vector<char> uniform(static_cast<size_t>(ni));
    // Per gathered input: the first element and length of the chunk its buffer holds (-1: none).
    std::vector<int64_t> held_at(static_cast<size_t>(ni), -1), held_len(static_cast<size_t>(ni), 0);
    for (int k = 0; k < ni; ++k) {
      uniform[static_cast<size_t>(k)] = w.read[static_cast<size_t>(k)] == EwWalk::Read::kUniform;
      if (uniform[static_cast<size_t>(k)]) {
        uni_vals[static_cast<size_t>(k)] = w.dtypes[static_cast<size_t>(k)] == DType::kBool
                                               ? static_cast<float>(static_cast<const uint8_t*>(inputs[k])[0])
                                               : static_cast<const float*>(inputs[k])[0];
        in[static_cast<size_t>(k)] = &uni_vals[static_cast<size_t>(k)];
      }
    }
    static_assert(sizeof(bool) == sizeof(char));
    for (int64_t e = lo; e < hi; e += kChunk) {
      const int64_t len = std::min(kChunk, hi - e);
      for (int k = 0; k < ni; ++k) {
        const auto read = w.read[static_cast<size_t>(k)];
        if (read == EwWalk::Read::kInPlace) {
          in[static_cast<size_t>(k)] = static_cast<const float*>(inputs[k]) + e;
        } else if (read == EwWalk::Read::kGather) {
          float* dst = bufs.data() + k * kChunk;
          in[static_cast<size_t>(k)] = dst;
          const auto uk = static_cast<size_t>(k);
          const int64_t span = w.span[uk], period = w.period[uk], prev = held_at[uk];
          if (prev >= 0 && held_len[uk] == len && span > period && (e - prev) % period == 0 &&
              prev / span == (e + len - 1) / span)
            continue;  // the buffer already holds these values: same span, same phase
          held_at[uk] = e;
          held_len[uk] = len;
          if (w.dtypes[static_cast<size_t>(k)] == DType::kBool)
            gather(w, static_cast<size_t>(k), static_cast<const uint8_t*>(inputs[k]), e, len, dst);
          else
            gather(w, static_cast<size_t>(k), static_cast<const float*>(inputs[k]), e, len, dst);
        }
      }
      ex.run_chunk(in.data(), reinterpret_cast<const bool*>(uniform.data()), len, out + e, bufs.data());
    }
  });
}

}  // namespace streamline::ops::cpu
