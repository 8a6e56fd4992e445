// Reference Softmax/LogSoftmax/Hardmax, reductions, ArgMax/ArgMin and normalisations, plus the element
// helpers of ref_math_util.h. Plain loops in double; no threads.

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/reference/ref_math_util.h"

namespace streamline::ops::reference {
namespace math_util {

bool is_float_type(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}

double read_f(const Tensor& t, int64_t i) {
  return element_as_double(t, i);
}

int64_t read_i(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::kBool) return t.data<uint8_t>()[i] != 0;
  return element_as_int64(t, i);
}

void write_f(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kFloat32:
      t.data<float>()[i] = static_cast<float>(v);
      break;
    case DType::kFloat64:
      t.data<double>()[i] = v;
      break;
    case DType::kFloat16:
      t.data<uint16_t>()[i] = float_to_half(static_cast<float>(v));
      break;
    case DType::kBFloat16:
      t.data<uint16_t>()[i] = float_to_bfloat16(static_cast<float>(v));
      break;
    case DType::kBool:
      t.data<uint8_t>()[i] = v != 0;
      break;
    default:
      write_i(t, i, saturate_to_int(v, t.dtype()));
      break;
  }
}

void write_i(Tensor& t, int64_t i, int64_t v) {
  switch (t.dtype()) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16:
      write_f(t, i, static_cast<double>(v));
      break;
    case DType::kInt64:
      t.data<int64_t>()[i] = v;
      break;
    case DType::kInt32:
      t.data<int32_t>()[i] = static_cast<int32_t>(v);
      break;
    case DType::kInt16:
      t.data<int16_t>()[i] = static_cast<int16_t>(v);
      break;
    case DType::kInt8:
      t.data<int8_t>()[i] = static_cast<int8_t>(v);
      break;
    case DType::kUInt64:
      t.data<uint64_t>()[i] = static_cast<uint64_t>(v);
      break;
    case DType::kUInt32:
      t.data<uint32_t>()[i] = static_cast<uint32_t>(v);
      break;
    case DType::kUInt16:
      t.data<uint16_t>()[i] = static_cast<uint16_t>(v);
      break;
    case DType::kUInt8:
      t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
      break;
    case DType::kBool:
      t.data<uint8_t>()[i] = v != 0;
      break;
    default:
      break;
  }
}

int64_t saturate_to_int(double v, DType to) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  double lo = 0, hi = 0;
  switch (to) {
    case DType::kInt8:
      lo = -128;
      hi = 127;
      break;
    case DType::kInt16:
      lo = -32768;
      hi = 32767;
      break;
    case DType::kInt32:
      lo = -2147483648.0;
      hi = 2147483647.0;
      break;
    case DType::kInt64:
      lo = -9223372036854775808.0;
      hi = 9223372036854775807.0;
      break;
    case DType::kUInt8:
      hi = 255;
      break;
    case DType::kUInt16:
      hi = 65535;
      break;
    case DType::kUInt32:
      hi = 4294967295.0;
      break;
    case DType::kUInt64:
      hi = 18446744073709551615.0;
      break;
    default:
      return static_cast<int64_t>(v);
  }
  if (v <= lo) return to == DType::kInt64 ? std::numeric_limits<int64_t>::min() : static_cast<int64_t>(lo);
  if (v >= hi) {
    if (to == DType::kInt64) return std::numeric_limits<int64_t>::max();
    if (to == DType::kUInt64) return -1;  // all ones, i.e. UINT64_MAX once stored
    return static_cast<int64_t>(hi);
  }
  if (to == DType::kUInt64 && v >= 9223372036854775808.0) return static_cast<int64_t>(static_cast<uint64_t>(v));
  return static_cast<int64_t>(v);
}

int64_t input_offset(const Shape& out, int64_t out_index, const Shape& in) {
  int64_t offset = 0, in_stride = 1, rem = out_index;
  // Extra leading dims of `in` (beyond out's rank) must be 1 and are ignored.
  const size_t extra = in.rank() > out.rank() ? in.rank() - out.rank() : 0;
  const size_t lead = out.rank() + extra - in.rank();
  for (size_t d = out.rank(); d-- > 0;) {
    const int64_t coord = rem % out[d];
    rem /= out[d];
    if (d < lead) continue;
    const int64_t in_dim = in[d - lead + extra];
    if (in_dim != 1) offset += coord * in_stride;
    in_stride *= in_dim;
  }
  return offset;
}

Status add_ref(KernelRegistry& reg, const char* op, int since, KernelFactory f) {
  KernelDef def;
  def.op = op;
  def.since_version = since;
  def.provider = "reference";
  def.create = std::move(f);
  return reg.add(std::move(def));
}

}  // namespace math_util

namespace {

using math_util::prefix;
using math_util::read_f;
using math_util::read_i;
using math_util::write_f;
using math_util::write_i;

Result<int64_t> axis_of(const graph::Node& node, int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return invalid_argument(prefix(node) + "axis " + std::to_string(axis) + " out of range");
  return a;
}

// ---------------------------------------------------------------------------------------------
// Softmax, LogSoftmax, Hardmax.

class RefSoftmaxKernel final : public Kernel {
 public:
  explicit RefSoftmaxKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_RETURN_IF_ERROR(
        axis_of(node_, node_.attr_int("axis", node_.opset < 13 ? 1 : -1), static_cast<int64_t>(in[0].shape.rank()))
            .status());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const Shape& s = x.shape();
    const int64_t rank = static_cast<int64_t>(s.rank());
    SL_ASSIGN_OR_RETURN(int64_t axis, axis_of(node_, node_.attr_int("axis", node_.opset < 13 ? 1 : -1), rank));
    int64_t outer = 1, len = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[d];
    if (node_.opset < 13) {
      for (int64_t d = axis; d < rank; ++d) len *= s[d];
    } else {
      len = s[axis];
      for (int64_t d = axis + 1; d < rank; ++d) inner *= s[d];
    }
    const std::string& op = node_.op_type;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * len * inner + i;
        double mx = -INFINITY;
        int64_t arg = 0;
        for (int64_t k = 0; k < len; ++k) {
          const double v = read_f(x, base + k * inner);
          if (v > mx) {
            mx = v;
            arg = k;
          }
        }
        double sum = 0;
        for (int64_t k = 0; k < len; ++k) sum += std::exp(read_f(x, base + k * inner) - mx);
        for (int64_t k = 0; k < len; ++k) {
          const double v = read_f(x, base + k * inner);
          double r;
          if (op == "Softmax")
            r = std::exp(v - mx) / sum;
          else if (op == "LogSoftmax")
            r = v - mx - std::log(sum);
          else
            r = k == arg ? 1.0 : 0.0;
          write_f(y, base + k * inner, r);
        }
      }
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

// ---------------------------------------------------------------------------------------------
// Reductions and ArgMax/ArgMin.

struct ReduceGeometry {
  std::vector<bool> reduced;  // per input dim
  Shape out_shape;
  bool identity = false;  // noop_with_empty_axes with no axes
};

Result<ReduceGeometry> reduce_geometry(const graph::Node& node, std::span<const TensorInfo> in) {
  const int64_t rank = static_cast<int64_t>(in[0].shape.rank());
  std::vector<int64_t> axes = node.attr_ints("axes");
  if (in.size() > 1 && in[1].present()) {
    if (!in[1].value) return unsupported(prefix(node) + "axes input must be a constant");
    axes.clear();
    for (int64_t i = 0; i < in[1].value->numel(); ++i) axes.push_back(element_as_int64(*in[1].value, i));
  }
  ReduceGeometry g;
  g.reduced.assign(static_cast<size_t>(rank), axes.empty());
  if (axes.empty() && node.attr_int("noop_with_empty_axes", 0) != 0) {
    g.reduced.assign(static_cast<size_t>(rank), false);
    g.identity = true;
  }
  for (int64_t a : axes) {
    SL_ASSIGN_OR_RETURN(int64_t n, axis_of(node, a, rank));
    g.reduced[static_cast<size_t>(n)] = true;
  }
  const bool keep = node.attr_int("keepdims", 1) != 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (!g.reduced[static_cast<size_t>(d)])
      g.out_shape.push_back(in[0].shape[d]);
    else if (keep)
      g.out_shape.push_back(1);
  }
  return g;
}

// Flat output index of input element `i` (reduced coordinates dropped).
int64_t reduced_index(const Shape& s, const std::vector<bool>& reduced, int64_t i) {
  int64_t out = 0, stride = 1, rem = i;
  for (size_t d = s.rank(); d-- > 0;) {
    const int64_t c = rem % s[d];
    rem /= s[d];
    if (reduced[d]) continue;
    out += c * stride;
    stride *= s[d];
  }
  return out;
}

class RefReduceKernel final : public Kernel {
 public:
  explicit RefReduceKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_ASSIGN_OR_RETURN(ReduceGeometry g, reduce_geometry(node_, in));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, g.out_shape, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    std::vector<TensorInfo> infos;
    for (const Tensor& t : ctx.inputs) {
      TensorInfo ti;
      if (t.defined()) {
        ti.dtype = t.dtype();
        ti.shape = t.shape();
        ti.value = &t;
      }
      infos.push_back(ti);
    }
    SL_ASSIGN_OR_RETURN(ReduceGeometry g, reduce_geometry(node_, infos));
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const std::string& op = node_.op_type;
    const int64_t n_out = y.numel();
    const int64_t count = n_out == 0 ? 0 : x.numel() / std::max<int64_t>(n_out, 1);
    double init = 0;
    if (op == "ReduceMax") init = -INFINITY;
    if (op == "ReduceMin") init = INFINITY;
    if (op == "ReduceProd") init = 1;
    std::vector<double> acc(static_cast<size_t>(n_out), init);
    std::vector<double> mx(static_cast<size_t>(n_out), -INFINITY);
    const bool fl = math_util::is_float_type(x.dtype());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const size_t o = static_cast<size_t>(g.identity ? i : reduced_index(x.shape(), g.reduced, i));
      mx[o] = std::max(mx[o], read_f(x, i));
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      const size_t o = static_cast<size_t>(g.identity ? i : reduced_index(x.shape(), g.reduced, i));
      const double v = fl ? read_f(x, i) : static_cast<double>(read_i(x, i));
      if (op == "ReduceSum" || op == "ReduceMean" || op == "ReduceLogSum")
        acc[o] += v;
      else if (op == "ReduceSumSquare" || op == "ReduceL2")
        acc[o] += v * v;
      else if (op == "ReduceL1")
        acc[o] += std::fabs(v);
      else if (op == "ReduceMax")
        acc[o] = std::max(acc[o], v);
      else if (op == "ReduceMin")
        acc[o] = std::min(acc[o], v);
      else if (op == "ReduceProd")
        acc[o] *= v;
      else if (op == "ReduceLogSumExp")
        acc[o] += std::exp(v - mx[o]);
    }
    for (int64_t o = 0; o < n_out; ++o) {
      double r = acc[static_cast<size_t>(o)];
      if (op == "ReduceMean") r = fl ? r / static_cast<double>(count) : std::trunc(r / static_cast<double>(count));
      if (op == "ReduceL2") r = std::sqrt(r);
      if (op == "ReduceLogSum") r = std::log(r);
      if (op == "ReduceLogSumExp") r = std::log(r) + mx[static_cast<size_t>(o)];
      if (fl)
        write_f(y, o, r);
      else
        write_i(y, o, math_util::saturate_to_int(r, y.dtype()));
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

class RefArgKernel final : public Kernel {
 public:
  explicit RefArgKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const int64_t rank = static_cast<int64_t>(in[0].shape.rank());
    SL_ASSIGN_OR_RETURN(int64_t axis, axis_of(node_, node_.attr_int("axis", 0), rank));
    Shape out;
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis)
        out.push_back(in[0].shape[d]);
      else if (node_.attr_int("keepdims", 1) != 0)
        out.push_back(1);
    }
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{DType::kInt64, out, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Shape& s = x.shape();
    const int64_t rank = static_cast<int64_t>(s.rank());
    SL_ASSIGN_OR_RETURN(int64_t axis, axis_of(node_, node_.attr_int("axis", 0), rank));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= s[d];
    for (int64_t d = axis + 1; d < rank; ++d) inner *= s[d];
    const int64_t len = s[axis];
    const bool last = node_.attr_int("select_last_index", 0) != 0;
    const bool is_max = node_.op_type == "ArgMax";
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        int64_t best = 0;
        double bv = read_f(x, o * len * inner + i);
        for (int64_t k = 1; k < len; ++k) {
          const double v = read_f(x, (o * len + k) * inner + i);
          const bool better = is_max ? (v > bv || (last && v == bv)) : (v < bv || (last && v == bv));
          if (better) {
            bv = v;
            best = k;
          }
        }
        ctx.outputs[0].data<int64_t>()[o * inner + i] = best;
      }
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

// ---------------------------------------------------------------------------------------------
// BatchNormalization, InstanceNormalization, LRN, LayerNormalization, MeanVarianceNormalization.

class RefNormKernel final : public Kernel {
 public:
  explicit RefNormKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, Layout::kPlain});
    if (node_.op_type == "LayerNormalization") {
      const int64_t rank = static_cast<int64_t>(in[0].shape.rank());
      SL_ASSIGN_OR_RETURN(int64_t axis, axis_of(node_, node_.attr_int("axis", -1), rank));
      Shape stat = in[0].shape;
      for (int64_t d = axis; d < rank; ++d) stat[static_cast<size_t>(d)] = 1;
      for (size_t k = 1; k < node_.outputs.size(); ++k) rr.outputs.push_back(OutputInfo{DType::kFloat32, stat});
    }
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const std::string& op = node_.op_type;
    if (op == "BatchNormalization") return batch_norm(ctx);
    if (op == "InstanceNormalization") return instance_norm(ctx);
    if (op == "LRN") return lrn(ctx);
    if (op == "LayerNormalization") return layer_norm(ctx);
    return mvn(ctx);
  }

 private:
  Status batch_norm(const RunContext& ctx) const {
    const Tensor& x = ctx.inputs[0];
    const double eps = node_.attr_float("epsilon", 1e-5f);
    const int64_t n = x.shape()[0], c = x.shape()[1], sp = x.numel() / std::max<int64_t>(n * c, 1);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t ch = (i / sp) % c;
      const double v = (read_f(x, i) - read_f(ctx.inputs[3], ch)) / std::sqrt(read_f(ctx.inputs[4], ch) + eps);
      write_f(ctx.outputs[0], i, v * read_f(ctx.inputs[1], ch) + read_f(ctx.inputs[2], ch));
    }
    return ok_status();
  }

  Status instance_norm(const RunContext& ctx) const {
    const Tensor& x = ctx.inputs[0];
    const double eps = node_.attr_float("epsilon", 1e-5f);
    const int64_t n = x.shape()[0], c = x.shape()[1], sp = x.numel() / std::max<int64_t>(n * c, 1);
    for (int64_t nc = 0; nc < n * c; ++nc) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < sp; ++k) mean += read_f(x, nc * sp + k);
      mean /= static_cast<double>(sp);
      for (int64_t k = 0; k < sp; ++k) var += std::pow(read_f(x, nc * sp + k) - mean, 2);
      var /= static_cast<double>(sp);
      const int64_t ch = nc % c;
      for (int64_t k = 0; k < sp; ++k) {
        const double v = (read_f(x, nc * sp + k) - mean) / std::sqrt(var + eps);
        write_f(ctx.outputs[0], nc * sp + k, v * read_f(ctx.inputs[1], ch) + read_f(ctx.inputs[2], ch));
      }
    }
    return ok_status();
  }

  Status lrn(const RunContext& ctx) const {
    const Tensor& x = ctx.inputs[0];
    const double alpha = node_.attr_float("alpha", 1e-4f), beta = node_.attr_float("beta", 0.75f);
    const double bias = node_.attr_float("bias", 1.f);
    const int64_t size = node_.attr_int("size", 1);
    const int64_t n = x.shape()[0], c = x.shape()[1], sp = x.numel() / std::max<int64_t>(n * c, 1);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t ch = (i / sp) % c, b = i / (sp * c), k = i % sp;
      const int64_t lo = std::max<int64_t>(0, ch - (size - 1) / 2), hi = std::min(c - 1, ch + size / 2);
      double sq = 0;
      for (int64_t j = lo; j <= hi; ++j) sq += std::pow(read_f(x, (b * c + j) * sp + k), 2);
      write_f(ctx.outputs[0], i, read_f(x, i) / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
    }
    return ok_status();
  }

  Status layer_norm(const RunContext& ctx) const {
    const Tensor& x = ctx.inputs[0];
    const int64_t rank = static_cast<int64_t>(x.shape().rank());
    SL_ASSIGN_OR_RETURN(int64_t axis, axis_of(node_, node_.attr_int("axis", -1), rank));
    const double eps = node_.attr_float("epsilon", 1e-5f);
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
    const int64_t len = outer == 0 ? 0 : x.numel() / outer;
    Shape norm_shape;
    for (int64_t d = axis; d < rank; ++d) norm_shape.push_back(x.shape()[d]);
    const bool has_b = ctx.inputs.size() > 2 && ctx.inputs[2].defined();
    for (int64_t o = 0; o < outer; ++o) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < len; ++k) mean += read_f(x, o * len + k);
      mean /= static_cast<double>(len);
      for (int64_t k = 0; k < len; ++k) var += std::pow(read_f(x, o * len + k) - mean, 2);
      var /= static_cast<double>(len);
      const double inv = 1 / std::sqrt(var + eps);
      for (int64_t k = 0; k < len; ++k) {
        const double s = read_f(ctx.inputs[1], math_util::input_offset(norm_shape, k, ctx.inputs[1].shape()));
        const double b =
            has_b ? read_f(ctx.inputs[2], math_util::input_offset(norm_shape, k, ctx.inputs[2].shape())) : 0;
        write_f(ctx.outputs[0], o * len + k, (read_f(x, o * len + k) - mean) * inv * s + b);
      }
      if (ctx.outputs.size() > 1 && ctx.outputs[1].defined()) write_f(ctx.outputs[1], o, mean);
      if (ctx.outputs.size() > 2 && ctx.outputs[2].defined()) write_f(ctx.outputs[2], o, inv);
    }
    return ok_status();
  }

  Status mvn(const RunContext& ctx) const {
    const Tensor& x = ctx.inputs[0];
    const int64_t rank = static_cast<int64_t>(x.shape().rank());
    std::vector<bool> reduced(static_cast<size_t>(rank), false);
    for (int64_t a : node_.attr_ints("axes", {0, 2, 3})) {
      SL_ASSIGN_OR_RETURN(int64_t n, axis_of(node_, a, rank));
      reduced[static_cast<size_t>(n)] = true;
    }
    int64_t n_out = 1;
    for (int64_t d = 0; d < rank; ++d)
      if (!reduced[static_cast<size_t>(d)]) n_out *= x.shape()[d];
    const double count = static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(n_out, 1));
    std::vector<double> mean(static_cast<size_t>(n_out), 0.0), var(static_cast<size_t>(n_out), 0.0);
    for (int64_t i = 0; i < x.numel(); ++i)
      mean[static_cast<size_t>(reduced_index(x.shape(), reduced, i))] += read_f(x, i);
    for (double& m : mean) m /= count;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const size_t o = static_cast<size_t>(reduced_index(x.shape(), reduced, i));
      var[o] += std::pow(read_f(x, i) - mean[o], 2);
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      const size_t o = static_cast<size_t>(reduced_index(x.shape(), reduced, i));
      write_f(ctx.outputs[0], i, (read_f(x, i) - mean[o]) / (std::sqrt(var[o] / count) + 1e-9));
    }
    return ok_status();
  }

  graph::Node node_;
};

template <typename K>
KernelFactory factory() {
  return [](const KernelCreateArgs& args) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<K>(args.node));
  };
}

}  // namespace

Status register_math_nn(KernelRegistry& reg) {
  using math_util::add_ref;
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"})
    SL_RETURN_IF_ERROR(add_ref(reg, op, 1, factory<RefSoftmaxKernel>()));
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    SL_RETURN_IF_ERROR(add_ref(reg, op, 1, factory<RefReduceKernel>()));
  for (const char* op : {"ArgMax", "ArgMin"}) SL_RETURN_IF_ERROR(add_ref(reg, op, 1, factory<RefArgKernel>()));
  for (const char* op :
       {"BatchNormalization", "InstanceNormalization", "LRN", "LayerNormalization", "MeanVarianceNormalization"})
    SL_RETURN_IF_ERROR(add_ref(reg, op, 1, factory<RefNormKernel>()));
  return ok_status();
}

}  // namespace streamline::ops::reference
