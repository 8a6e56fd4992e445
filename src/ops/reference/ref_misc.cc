// Reference CumSum, TopK, Det, Shrink, ReverseSequence and MaxUnpool: unravelled indices and plain
// loops; TopK by a full stable sort; Det by cofactor expansion (small matrices only).

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/reference/ref_data_util.h"
#include "ops/reference/ref_math_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

using math_util::prefix;
using math_util::read_f;
using math_util::read_i;
using math_util::write_f;

int64_t norm_axis(int64_t a, size_t rank) {
  return a < 0 ? a + static_cast<int64_t>(rank) : a;
}

double cofactor_det(const std::vector<double>& a, int64_t m) {
  if (m == 0) return 1.0;
  if (m == 1) return a[0];
  double det = 0;
  for (int64_t c = 0; c < m; ++c) {
    std::vector<double> sub;
    for (int64_t r = 1; r < m; ++r)
      for (int64_t k = 0; k < m; ++k)
        if (k != c) sub.push_back(a[static_cast<size_t>(r * m + k)]);
    det += (c % 2 ? -1.0 : 1.0) * a[static_cast<size_t>(c)] * cofactor_det(sub, m - 1);
  }
  return det;
}

class RefMiscKernel final : public Kernel {
 public:
  explicit RefMiscKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const std::string& op = node_.op_type;
    ReshapeResult rr;
    const Shape& s = in[0].shape;
    if (op == "TopK") {
      if (!in[1].value) return unsupported(prefix(node_) + "K must be constant");
      Shape out = s;
      out[static_cast<size_t>(norm_axis(node_.attr_int("axis", -1), s.rank()))] = read_i(*in[1].value, 0);
      rr.outputs.push_back({in[0].dtype, out});
      rr.outputs.push_back({DType::kInt64, out});
    } else if (op == "Det") {
      rr.outputs.push_back({in[0].dtype, Shape(std::span<const int64_t>(s.data(), s.rank() - 2))});
    } else if (op == "MaxUnpool") {
      const auto k = node_.attr_ints("kernel_shape"), st = node_.attr_ints("strides"), p = node_.attr_ints("pads");
      Shape out{s[0], s[1]};
      for (size_t d = 0; d < k.size(); ++d)
        out.push_back((s[d + 2] - 1) * (st.empty() ? 1 : st[d]) - (p.empty() ? 0 : p[d] + p[d + k.size()]) + k[d]);
      if (in.size() > 2 && in[2].value) {
        out = Shape{};
        for (int64_t i = 0; i < in[2].value->numel(); ++i) out.push_back(read_i(*in[2].value, i));
      }
      rr.outputs.push_back({in[0].dtype, out});
    } else {
      rr.outputs.push_back({in[0].dtype, s});
    }
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const std::string& op = node_.op_type;
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const Shape& s = x.shape();
    if (op == "CumSum") {
      const int64_t axis = norm_axis(read_i(ctx.inputs[1], 0), s.rank());
      const bool excl = node_.attr_int("exclusive", 0) != 0, rev = node_.attr_int("reverse", 0) != 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        std::vector<int64_t> idx = unravel(i, s);
        const int64_t pos = idx[static_cast<size_t>(axis)];
        double acc = 0;
        for (int64_t j = 0; j < s[static_cast<size_t>(axis)]; ++j) {
          const bool take = rev ? (excl ? j > pos : j >= pos) : (excl ? j < pos : j <= pos);
          if (!take) continue;
          idx[static_cast<size_t>(axis)] = j;
          acc += read_f(x, ravel(idx, s));
        }
        write_f(y, i, acc);
      }
    } else if (op == "TopK") {
      const int64_t axis = norm_axis(node_.attr_int("axis", -1), s.rank());
      const bool largest = node_.attr_int("largest", 1) != 0;
      const Shape& os = y.shape();
      for (int64_t i = 0; i < y.numel(); ++i) {
        std::vector<int64_t> idx = unravel(i, os);
        const int64_t rank_pos = idx[static_cast<size_t>(axis)];
        std::vector<int64_t> order(static_cast<size_t>(s[static_cast<size_t>(axis)]));
        std::iota(order.begin(), order.end(), 0);
        auto val = [&](int64_t j) {
          idx[static_cast<size_t>(axis)] = j;
          return read_f(x, ravel(idx, s));
        };
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          const double va = val(a), vb = val(b);
          return largest ? va > vb : va < vb;
        });
        const int64_t pick = order[static_cast<size_t>(rank_pos)];
        write_f(y, i, val(pick));
        ctx.outputs[1].data<int64_t>()[i] = pick;
      }
    } else if (op == "Det") {
      const int64_t m = s[s.rank() - 1];
      for (int64_t b = 0; b < y.numel(); ++b) {
        std::vector<double> a(static_cast<size_t>(m * m));
        for (int64_t i = 0; i < m * m; ++i) a[static_cast<size_t>(i)] = read_f(x, b * m * m + i);
        write_f(y, b, cofactor_det(a, m));
      }
    } else if (op == "Shrink") {
      const double l = node_.attr_float("lambd", 0.5f), bias = node_.attr_float("bias", 0.f);
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double v = read_f(x, i);
        write_f(y, i, v < -l ? v + bias : (v > l ? v - bias : 0.0));
      }
    } else if (op == "ReverseSequence") {
      const int64_t ba = node_.attr_int("batch_axis", 1), ta = node_.attr_int("time_axis", 0);
      for (int64_t i = 0; i < x.numel(); ++i) {
        std::vector<int64_t> idx = unravel(i, s);
        const int64_t len = read_i(ctx.inputs[1], idx[static_cast<size_t>(ba)]);
        int64_t& t = idx[static_cast<size_t>(ta)];
        if (t < len) t = len - 1 - t;
        copy_element(x, ravel(idx, s), y, i);
      }
    } else if (op == "MaxUnpool") {
      // Indices address the default unpooled shape; with output_shape the element keeps its
      // coordinates in the larger output.
      const auto k = node_.attr_ints("kernel_shape"), st = node_.attr_ints("strides"), p = node_.attr_ints("pads");
      const Shape& xs = x.shape();
      Shape def{xs[0], xs[1]};
      for (size_t d = 0; d < k.size(); ++d)
        def.push_back((xs[d + 2] - 1) * (st.empty() ? 1 : st[d]) - (p.empty() ? 0 : p[d] + p[d + k.size()]) + k[d]);
      for (int64_t i = 0; i < y.numel(); ++i) write_f(y, i, 0.0);
      for (int64_t i = 0; i < x.numel(); ++i)
        copy_element(x, i, y, ravel(unravel(read_i(ctx.inputs[1], i), def), y.shape()));
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

}  // namespace

Status register_misc(KernelRegistry& reg) {
  auto f = [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<RefMiscKernel>(a.node));
  };
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "CumSum", 11, f));
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "TopK", 10, f));
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "Det", 11, f));
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "Shrink", 9, f));
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "ReverseSequence", 10, f));
  return math_util::add_ref(reg, "MaxUnpool", 9, f);
}

}  // namespace streamline::ops::reference
