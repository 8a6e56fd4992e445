// Reference NonZero, Unique, Compress, NonMaxSuppression and the window generators. Their output
// shapes depend on input values, so reshape() computes the whole result from constant inputs (and
// answers Unsupported otherwise); run() copies it out. Written as directly as possible: quadratic
// de-duplication for Unique, an all-pairs IoU table for NonMaxSuppression.

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
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

class RefValueShapedKernel final : public Kernel {
 public:
  explicit RefValueShapedKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    std::vector<Tensor> v;
    for (const auto& i : in) {
      if (i.present() && !i.value) return unsupported(prefix(node_) + "needs constant inputs");
      v.push_back(i.present() ? *i.value : Tensor());
    }
    SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, compute(v));
    ReshapeResult rr;
    for (const Tensor& t : outs) rr.outputs.push_back({t.dtype(), t.shape()});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, compute(std::vector<Tensor>(ctx.inputs.begin(), ctx.inputs.end())));
    for (size_t i = 0; i < outs.size(); ++i)
      for (int64_t k = 0; k < outs[i].numel(); ++k) copy_element(outs[i], k, ctx.outputs[i], k);
    return ok_status();
  }

 private:
  Result<std::vector<Tensor>> compute(const std::vector<Tensor>& in) const {
    const std::string& op = node_.op_type;
    if (op == "NonZero") {
      std::vector<std::vector<int64_t>> coords;
      for (int64_t i = 0; i < in[0].numel(); ++i)
        if (read_f(in[0], i) != 0) coords.push_back(unravel(i, in[0].shape()));
      const int64_t r = static_cast<int64_t>(in[0].shape().rank()), n = static_cast<int64_t>(coords.size());
      Tensor y = Tensor::empty(DType::kInt64, Shape{r, n});
      for (int64_t d = 0; d < r; ++d)
        for (int64_t j = 0; j < n; ++j)
          y.data<int64_t>()[d * n + j] = coords[static_cast<size_t>(j)][static_cast<size_t>(d)];
      return std::vector<Tensor>{y};
    }
    if (op == "Unique") return unique(in[0]);
    if (op == "Compress") {
      const Tensor& x = in[0];
      const bool has_axis = node_.has_attr("axis");
      int64_t axis = node_.attr_int("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(x.shape().rank());
      Shape ys = has_axis ? x.shape() : Shape{0};
      int64_t kept = 0;
      for (int64_t i = 0; i < in[1].numel(); ++i) kept += read_f(in[1], i) != 0;
      ys[has_axis ? static_cast<size_t>(axis) : 0] = kept;
      Tensor y = Tensor::empty(x.dtype(), ys);
      int64_t o = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const int64_t pos = has_axis ? unravel(i, x.shape())[static_cast<size_t>(axis)] : i;
        if (pos < in[1].numel() && read_f(in[1], pos) != 0) copy_element(x, i, y, o++);
      }
      return std::vector<Tensor>{y};
    }
    if (op == "NonMaxSuppression") return nms(in);
    const int64_t size = static_cast<int64_t>(read_f(in[0], 0));
    const bool periodic = node_.attr_int("periodic", 1) != 0;
    Tensor y = Tensor::empty(static_cast<DType>(node_.attr_int("output_datatype", 1)), Shape{size});
    for (int64_t i = 0; i < size; ++i) {
      const double n = double(periodic ? size : size - 1);
      const double t = n > 0 ? double(i) / n : 0.0;
      double v = 0;
      if (op == "HannWindow") v = std::pow(std::sin(std::numbers::pi * t), 2);
      if (op == "HammingWindow") v = 0.54347826086956519 - 0.45652173913043476 * std::cos(2 * std::numbers::pi * t);
      if (op == "BlackmanWindow")
        v = 0.42 - 0.5 * std::cos(2 * std::numbers::pi * t) + 0.08 * std::cos(4 * std::numbers::pi * t);
      write_f(y, i, v);
    }
    return std::vector<Tensor>{y};
  }

  Result<std::vector<Tensor>> unique(const Tensor& x) const {
    const bool has_axis = node_.has_attr("axis");
    const bool sorted = node_.attr_int("sorted", 1) != 0;
    int64_t axis = node_.attr_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(x.shape().rank());
    const int64_t len = has_axis ? x.shape()[static_cast<size_t>(axis)] : x.numel();
    auto slice = [&](int64_t k) {
      std::vector<double> v;
      for (int64_t i = 0; i < x.numel(); ++i)
        if ((has_axis ? unravel(i, x.shape())[static_cast<size_t>(axis)] : i) == k) v.push_back(read_f(x, i));
      return v;
    };
    std::vector<std::vector<double>> distinct;
    std::vector<int64_t> first, count, inverse;
    for (int64_t k = 0; k < len; ++k) {
      const auto s = slice(k);
      auto it = std::find(distinct.begin(), distinct.end(), s);
      if (it == distinct.end()) {
        distinct.push_back(s);
        first.push_back(k);
        count.push_back(0);
        it = distinct.end() - 1;
      }
      ++count[static_cast<size_t>(it - distinct.begin())];
    }
    std::vector<size_t> order(distinct.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    if (sorted)
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return distinct[a] < distinct[b]; });
    std::vector<int64_t> pos(order.size());
    for (size_t p = 0; p < order.size(); ++p) pos[order[p]] = static_cast<int64_t>(p);
    for (int64_t k = 0; k < len; ++k)
      inverse.push_back(
          pos[static_cast<size_t>(std::find(distinct.begin(), distinct.end(), slice(k)) - distinct.begin())]);
    const int64_t u = static_cast<int64_t>(order.size());
    Shape ys = has_axis ? x.shape() : Shape{u};
    if (has_axis) ys[static_cast<size_t>(axis)] = u;
    Tensor y = Tensor::empty(x.dtype(), ys), yi = Tensor::empty(DType::kInt64, Shape{u}),
           yc = Tensor::empty(DType::kInt64, Shape{u});
    for (int64_t i = 0; i < y.numel(); ++i) {
      std::vector<int64_t> idx = has_axis ? unravel(i, ys) : std::vector<int64_t>{i};
      int64_t& k = idx[has_axis ? static_cast<size_t>(axis) : 0];
      k = first[order[static_cast<size_t>(k)]];
      copy_element(x, has_axis ? ravel(idx, x.shape()) : k, y, i);
    }
    for (int64_t p = 0; p < u; ++p) {
      yi.data<int64_t>()[p] = first[order[static_cast<size_t>(p)]];
      yc.data<int64_t>()[p] = count[order[static_cast<size_t>(p)]];
    }
    return std::vector<Tensor>{y, yi, Tensor::from_vector<int64_t>(Shape{len}, inverse), yc};
  }

  Result<std::vector<Tensor>> nms(const std::vector<Tensor>& in) const {
    const Tensor& boxes = in[0];
    const Tensor& scores = in[1];
    auto opt = [&](size_t i) { return i < in.size() && in[i].defined(); };
    const int64_t max_out = opt(2) ? std::max<int64_t>(0, read_i(in[2], 0)) : 0;  // exactly: INT64_MAX is common
    const double iou_t = opt(3) ? read_f(in[3], 0) : 0.0;
    const bool center = node_.attr_int("center_point_box", 0) != 0;
    const int64_t B = boxes.shape()[0], N = boxes.shape()[1], C = scores.shape()[1];
    std::vector<int64_t> sel;
    for (int64_t b = 0; b < B; ++b) {
      // Corner boxes [y1, x1, y2, x2] normalised, then the IoU table.
      std::vector<std::array<double, 4>> bx(static_cast<size_t>(N));
      for (int64_t i = 0; i < N; ++i) {
        double v[4];
        for (int k = 0; k < 4; ++k) v[k] = read_f(boxes, (b * N + i) * 4 + k);
        if (center)
          bx[static_cast<size_t>(i)] = {v[0] - v[2] / 2, v[1] - v[3] / 2, v[0] + v[2] / 2, v[1] + v[3] / 2};
        else
          bx[static_cast<size_t>(i)] = {std::min(v[1], v[3]), std::min(v[0], v[2]), std::max(v[1], v[3]),
                                        std::max(v[0], v[2])};
      }
      auto iou = [&](int64_t i, int64_t j) {
        const auto& p = bx[static_cast<size_t>(i)];
        const auto& q = bx[static_cast<size_t>(j)];
        const double ap = (p[2] - p[0]) * (p[3] - p[1]), aq = (q[2] - q[0]) * (q[3] - q[1]);
        const double w = std::max(0.0, std::min(p[2], q[2]) - std::max(p[0], q[0]));
        const double h = std::max(0.0, std::min(p[3], q[3]) - std::max(p[1], q[1]));
        if (ap <= 0 || aq <= 0 || w * h <= 0) return 0.0;
        return w * h / (ap + aq - w * h);
      };
      for (int64_t c = 0; c < C; ++c) {
        std::vector<int64_t> order;
        for (int64_t i = 0; i < N; ++i)
          if (!opt(4) || read_f(scores, (b * C + c) * N + i) > read_f(in[4], 0)) order.push_back(i);
        std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
          return read_f(scores, (b * C + c) * N + i) > read_f(scores, (b * C + c) * N + j);
        });
        std::vector<int64_t> kept;
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          bool ok = true;
          for (int64_t j : kept) ok = ok && !(iou(i, j) > iou_t);
          if (ok) kept.push_back(i);
        }
        for (int64_t i : kept) sel.insert(sel.end(), {b, c, i});
      }
    }
    return std::vector<Tensor>{Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(sel.size() / 3), 3}, sel)};
  }

  graph::Node node_;
};

}  // namespace

Status register_value_shaped(KernelRegistry& reg) {
  auto f = [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<RefValueShapedKernel>(a.node));
  };
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "NonZero", 9, f));
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "Unique", 11, f));
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "Compress", 9, f));
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "NonMaxSuppression", 10, f));
  for (const char* w : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    SL_RETURN_IF_ERROR(math_util::add_ref(reg, w, 17, f));
  return ok_status();
}

}  // namespace streamline::ops::reference
