// Operators whose output shape depends on input values: NonZero (9/13), Unique (11), Compress
// (9/11), NonMaxSuppression (10/11) and the generators HannWindow, HammingWindow, BlackmanWindow
// and MelWeightMatrix (17).
//
// A plan fixes every shape before anything runs, so these kernels can only be planned when the
// inputs that decide the output shape are constants: reshape() then computes the result and hands
// it to the planner as known values (the node is folded). With non-constant inputs reshape()
// answers Unsupported, naming the input; run() computes the same result for direct evaluation.

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <numeric>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

enum class Kind { kNonZero, kUnique, kCompress, kNms, kHann, kHamming, kBlackman, kMel };

class ValueShapedKernel final : public DataKernel {
 public:
  ValueShapedKernel(const graph::Node& node, Kind kind) : DataKernel(node), kind_(kind), node_(node) {}

  Status init(const KernelCreateArgs&) { return ok_status(); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    std::vector<Tensor> values;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].present()) {
        values.emplace_back();
        continue;
      }
      if (!in[i].value)
        return unsupported_error("the output shape depends on the values of input " + std::to_string(i) +
                                 ", which is not a constant (the planner needs static shapes)");
      values.push_back(*in[i].value);
    }
    SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, compute(values));
    ReshapeResult rr;
    for (const Tensor& t : outs) {
      rr.outputs.push_back(OutputInfo{t.dtype(), t.shape(), Layout::kPlain});
      rr.known_values.emplace_back(t);
    }
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    std::vector<Tensor> ins(ctx.inputs.begin(), ctx.inputs.end());
    SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, compute(ins));
    for (size_t i = 0; i < outs.size() && i < ctx.outputs.size(); ++i) {
      if (!ctx.outputs[i].defined()) continue;
      if (ctx.outputs[i].shape() != outs[i].shape()) return invalid("output shape changed since planning");
      std::memcpy(ctx.outputs[i].raw(), outs[i].raw(), outs[i].nbytes());
    }
    return ok_status();
  }

 private:
  Result<std::vector<Tensor>> compute(const std::vector<Tensor>& in) const {
    switch (kind_) {
      case Kind::kNonZero:
        return nonzero(in);
      case Kind::kUnique:
        return unique(in);
      case Kind::kCompress:
        return compress(in);
      case Kind::kNms:
        return nms(in);
      case Kind::kMel:
        return mel(in);
      default:
        return window(in);
    }
  }

  Result<std::vector<Tensor>> nonzero(const std::vector<Tensor>& in) const {
    if (in.size() != 1) return invalid("expected one input");
    const Tensor& x = in[0];
    SL_RETURN_IF_ERROR(check_movable(x.dtype(), desc_));
    const Shape& s = x.shape();
    std::vector<int64_t> hits;
    for (int64_t i = 0; i < x.numel(); ++i)
      if (load_f(x.dtype(), x.raw(), i) != 0.0) hits.push_back(i);
    const int64_t rank = static_cast<int64_t>(s.rank()), n = static_cast<int64_t>(hits.size());
    Tensor y = Tensor::empty(DType::kInt64, Shape{rank, n});
    for (int64_t j = 0; j < n; ++j) {
      int64_t rem = hits[static_cast<size_t>(j)];
      for (int64_t d = rank - 1; d >= 0; --d) {
        y.data<int64_t>()[d * n + j] = rem % s[static_cast<size_t>(d)];
        rem /= s[static_cast<size_t>(d)];
      }
    }
    return std::vector<Tensor>{y};
  }

  Result<std::vector<Tensor>> unique(const std::vector<Tensor>& in) const {
    if (in.size() != 1) return invalid("expected one input");
    const Tensor& x = in[0];
    SL_RETURN_IF_ERROR(check_movable(x.dtype(), desc_));
    const bool sorted = node_.attr_int("sorted", 1) != 0;
    const bool has_axis = node_.has_attr("axis");
    int64_t axis = 0;
    Shape s = x.shape();
    if (has_axis && !normalize_axis(node_.attr_int("axis", 0), static_cast<int64_t>(s.rank()), &axis))
      return invalid("axis out of range");
    // Slices along the axis (single elements without an axis), compared element by element.
    int64_t outer = 1, len = x.numel(), inner = 1;
    if (has_axis) {
      len = s[static_cast<size_t>(axis)];
      for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
      for (size_t d = static_cast<size_t>(axis) + 1; d < s.rank(); ++d) inner *= s[d];
    }
    const DType dt = x.dtype();
    auto slice_less = [&](int64_t a, int64_t b) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const double va = load_f(dt, x.raw(), (o * len + a) * inner + i),
                       vb = load_f(dt, x.raw(), (o * len + b) * inner + i);
          if (va != vb) return va < vb;
        }
      return false;
    };
    auto slice_equal = [&](int64_t a, int64_t b) { return !slice_less(a, b) && !slice_less(b, a); };
    std::vector<int64_t> firsts;  // first index of each distinct slice, in output order
    std::vector<int64_t> inverse(static_cast<size_t>(len));
    std::vector<int64_t> counts;
    std::vector<int64_t> order(static_cast<size_t>(len));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), slice_less);
    std::vector<int64_t> group_of(static_cast<size_t>(len));
    std::vector<int64_t> group_first;
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == 0 || !slice_equal(order[k - 1], order[k])) group_first.push_back(order[k]);
      group_of[static_cast<size_t>(order[k])] = static_cast<int64_t>(group_first.size()) - 1;
    }
    // Output position of each group: sorted order, or order of first appearance.
    std::vector<int64_t> pos(group_first.size());
    std::iota(pos.begin(), pos.end(), 0);
    if (!sorted) {
      std::vector<int64_t> by_first(group_first.size());
      std::iota(by_first.begin(), by_first.end(), 0);
      std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) {
        return group_first[static_cast<size_t>(a)] < group_first[static_cast<size_t>(b)];
      });
      for (size_t p = 0; p < by_first.size(); ++p) pos[static_cast<size_t>(by_first[p])] = static_cast<int64_t>(p);
    }
    firsts.assign(group_first.size(), 0);
    counts.assign(group_first.size(), 0);
    for (size_t g = 0; g < group_first.size(); ++g) firsts[static_cast<size_t>(pos[g])] = group_first[g];
    for (int64_t i = 0; i < len; ++i) {
      const int64_t p = pos[static_cast<size_t>(group_of[static_cast<size_t>(i)])];
      inverse[static_cast<size_t>(i)] = p;
      ++counts[static_cast<size_t>(p)];
    }
    const int64_t u = static_cast<int64_t>(firsts.size());
    Shape ys = has_axis ? s : Shape{u};
    if (has_axis) ys[static_cast<size_t>(axis)] = u;
    Tensor y = Tensor::empty(dt, ys);
    const size_t esz = dtype_size(dt);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < u; ++k)
        std::memcpy(static_cast<uint8_t*>(y.raw()) + static_cast<size_t>((o * u + k) * inner) * esz,
                    static_cast<const uint8_t*>(x.raw()) +
                        static_cast<size_t>((o * len + firsts[static_cast<size_t>(k)]) * inner) * esz,
                    static_cast<size_t>(inner) * esz);
    return std::vector<Tensor>{y, Tensor::from_vector<int64_t>(Shape{u}, firsts),
                               Tensor::from_vector<int64_t>(Shape{len}, inverse),
                               Tensor::from_vector<int64_t>(Shape{u}, counts)};
  }

  Result<std::vector<Tensor>> compress(const std::vector<Tensor>& in) const {
    if (in.size() != 2) return invalid("expected input and condition");
    const Tensor& x = in[0];
    const Tensor& c = in[1];
    SL_RETURN_IF_ERROR(check_movable(x.dtype(), desc_));
    if (c.shape().rank() != 1) return invalid("condition must be 1-D");
    const bool has_axis = node_.has_attr("axis");
    int64_t axis = 0, outer = 1, len = x.numel(), inner = 1;
    if (has_axis) {
      if (!normalize_axis(node_.attr_int("axis", 0), static_cast<int64_t>(x.shape().rank()), &axis))
        return invalid("axis out of range");
      len = x.shape()[static_cast<size_t>(axis)];
      for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[static_cast<size_t>(d)];
      for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape().rank(); ++d) inner *= x.shape()[d];
    }
    if (c.numel() > len) return invalid("condition is longer than the compressed dimension");
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < c.numel(); ++i)
      if (load_f(c.dtype(), c.raw(), i) != 0.0) keep.push_back(i);
    const int64_t k = static_cast<int64_t>(keep.size());
    Shape ys = has_axis ? x.shape() : Shape{k};
    if (has_axis) ys[static_cast<size_t>(axis)] = k;
    Tensor y = Tensor::empty(x.dtype(), ys);
    const size_t esz = dtype_size(x.dtype()), row = static_cast<size_t>(inner) * esz;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < k; ++j)
        std::memcpy(
            static_cast<uint8_t*>(y.raw()) + static_cast<size_t>(o * k + j) * row,
            static_cast<const uint8_t*>(x.raw()) + static_cast<size_t>(o * len + keep[static_cast<size_t>(j)]) * row,
            row);
    return std::vector<Tensor>{y};
  }

  // Greedy per class, highest score first (ties: the lower index), with ONNX Runtime's float
  // arithmetic for the overlap. max_output_boxes_per_class is read as the integer it is: exporters
  // pass INT64_MAX for "no limit", which no double holds. Corners and areas are computed once per
  // batch; the boxes kept so far sit in arrays of their own, so a candidate is tested against them
  // in vector loops (torchvision's detectors keep thousands of boxes out of tens of thousands).
  Result<std::vector<Tensor>> nms(const std::vector<Tensor>& in) const {
    if (in.size() < 2) return invalid("expected boxes and scores");
    const Tensor& boxes = in[0];
    const Tensor& scores = in[1];
    if (boxes.shape().rank() != 3 || boxes.shape()[2] != 4 || scores.shape().rank() != 3 ||
        scores.shape()[0] != boxes.shape()[0] || scores.shape()[2] != boxes.shape()[1])
      return invalid("boxes must be [B, N, 4] and scores [B, C, N]");
    auto present = [&](size_t i) { return i < in.size() && in[i].defined() && in[i].numel() > 0; };
    auto scalar = [&](size_t i, double def) { return present(i) ? load_f(in[i].dtype(), in[i].raw(), 0) : def; };
    const int64_t max_out = present(2) ? std::max<int64_t>(0, load_int(in[2].dtype(), in[2].raw(), 0)) : 0;
    const auto iou_threshold = static_cast<float>(scalar(3, 0));
    const bool has_score_threshold = present(4);
    const auto score_threshold = static_cast<float>(scalar(4, 0));
    const bool center = node_.attr_int("center_point_box", 0) != 0;
    const int64_t nb = boxes.shape()[0], nc = scores.shape()[1], n = boxes.shape()[1];
    const auto un = static_cast<size_t>(n);
    std::vector<float> y1(un), x1(un), y2(un), x2(un), area(un);  // every box of the batch
    std::vector<float> ky1, kx1, ky2, kx2, karea;                 // the boxes kept so far
    std::vector<std::pair<float, int64_t>> cand;
    std::vector<int64_t> kept;
    std::vector<int64_t> selected;
    // Whether a box with corners (ay1, ax1, ay2, ax2) and area aa overlaps one of kept boxes
    // [j0, j1) by more than the threshold.
    auto overlaps = [&](float ay1, float ax1, float ay2, float ax2, float aa, size_t j0, size_t j1) {
      int hit = 0;
      for (size_t j = j0; j < j1; ++j) {  // branch-free, so that it vectorises
        const float ih = std::min(ay2, ky2[j]) - std::max(ay1, ky1[j]);
        const float iw = std::min(ax2, kx2[j]) - std::max(ax1, kx1[j]);
        const float inter = ih * iw;
        const float uni = aa + karea[j] - inter;
        const float iou = inter / uni;
        hit |= static_cast<int>(ih > 0.f) & static_cast<int>(iw > 0.f) & static_cast<int>(karea[j] > 0.f) &
               static_cast<int>(uni > 0.f) & static_cast<int>(iou > iou_threshold);
      }
      return hit != 0;
    };
    for (int64_t b = 0; b < nb; ++b) {
      for (size_t i = 0; i < un; ++i) {
        float v[4];
        for (int k = 0; k < 4; ++k)
          v[k] = static_cast<float>(load_f(boxes.dtype(), boxes.raw(), (b * n + static_cast<int64_t>(i)) * 4 + k));
        if (center) {
          y1[i] = v[1] - v[3] / 2;
          x1[i] = v[0] - v[2] / 2;
          y2[i] = v[1] + v[3] / 2;
          x2[i] = v[0] + v[2] / 2;
        } else {
          y1[i] = std::min(v[0], v[2]);
          x1[i] = std::min(v[1], v[3]);
          y2[i] = std::max(v[0], v[2]);
          x2[i] = std::max(v[1], v[3]);
        }
        area[i] = (y2[i] - y1[i]) * (x2[i] - x1[i]);
      }
      for (int64_t c = 0; c < nc; ++c) {
        cand.clear();
        for (int64_t i = 0; i < n; ++i) {
          const auto s = static_cast<float>(load_f(scores.dtype(), scores.raw(), (b * nc + c) * n + i));
          if (!has_score_threshold || s > score_threshold) cand.emplace_back(s, i);
        }
        std::stable_sort(cand.begin(), cand.end(), [](const auto& p, const auto& q) { return p.first > q.first; });
        kept.clear();
        ky1.clear(), kx1.clear(), ky2.clear(), kx2.clear(), karea.clear();
        constexpr size_t kChunk = 256;  // kept boxes tested between checks for an early stop
        for (const auto& [s, i] : cand) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          const auto ui = static_cast<size_t>(i);
          bool suppressed = false;
          if (area[ui] > 0.f)
            for (size_t j0 = 0; j0 < kept.size() && !suppressed; j0 += kChunk)
              suppressed = overlaps(y1[ui], x1[ui], y2[ui], x2[ui], area[ui], j0, std::min(kept.size(), j0 + kChunk));
          if (suppressed) continue;
          kept.push_back(i);
          ky1.push_back(y1[ui]), kx1.push_back(x1[ui]), ky2.push_back(y2[ui]), kx2.push_back(x2[ui]);
          karea.push_back(area[ui]);
        }
        for (int64_t i : kept) selected.insert(selected.end(), {b, c, i});
      }
    }
    return std::vector<Tensor>{
        Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(selected.size() / 3), 3}, selected)};
  }

  Result<std::vector<Tensor>> window(const std::vector<Tensor>& in) const {
    if (in.size() != 1 || in[0].numel() != 1) return invalid("expected a scalar size");
    const int64_t size = static_cast<int64_t>(load_f(in[0].dtype(), in[0].raw(), 0));
    if (size < 0) return invalid("negative window size");
    const DType out = static_cast<DType>(node_.attr_int("output_datatype", 1));
    if (!dtype_supported(out) || out == DType::kBool) return unsupported_error("output_datatype");
    const bool periodic = node_.attr_int("periodic", 1) != 0;
    const double denom = static_cast<double>(periodic ? size : size - 1);
    Tensor y = Tensor::empty(out, Shape{size});
    for (int64_t i = 0; i < size; ++i) {
      const double a = denom > 0 ? 2.0 * std::numbers::pi * static_cast<double>(i) / denom : 0.0;
      double v = 0;
      if (kind_ == Kind::kHann) v = 0.5 - 0.5 * std::cos(a);
      if (kind_ == Kind::kHamming) v = 25.0 / 46.0 - 21.0 / 46.0 * std::cos(a);
      if (kind_ == Kind::kBlackman) v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
      store_f(out, y.raw(), i, v);
    }
    return std::vector<Tensor>{y};
  }

  // MelWeightMatrix: [dft_length / 2 + 1, num_mel_bins] triangles on the mel scale,
  // mel(f) = 2595 log10(1 + f / 700). num_mel_bins + 2 points equally spaced in mel from the lower
  // edge, in steps of (high - low) / (num_mel_bins + 2), become DFT bins floor((dft_length + 1) *
  // hz / sample_rate); band i rises from point i to point i + 1 (peak 1) and falls to point i + 2.
  Result<std::vector<Tensor>> mel(const std::vector<Tensor>& in) const {
    if (in.size() != 5) return invalid("expected num_mel_bins, dft_length, sample_rate, lower and upper edge hertz");
    for (const Tensor& t : in)
      if (!t.defined() || t.numel() != 1) return invalid("every input must be a scalar");
    const int64_t bins = load_int(in[0].dtype(), in[0].raw(), 0), dft = load_int(in[1].dtype(), in[1].raw(), 0);
    const int64_t rate = load_int(in[2].dtype(), in[2].raw(), 0);
    const double lo = load_f(in[3].dtype(), in[3].raw(), 0), hi = load_f(in[4].dtype(), in[4].raw(), 0);
    if (bins < 1 || dft < 1 || rate < 1) return invalid("num_mel_bins, dft_length and sample_rate must be positive");
    const DType out = static_cast<DType>(node_.attr_int("output_datatype", 1));
    if (!dtype_supported(out) || out == DType::kBool) return unsupported_error("output_datatype");
    const int64_t spec = dft / 2 + 1;
    // A corrupt model must not ask for an impossible matrix (2^28 elements is 1 GiB of float32).
    if (bins > (int64_t{1} << 28) / spec) return invalid("a mel matrix of that size is too large");
    const auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
    const double low_mel = to_mel(lo), step = (to_mel(hi) - low_mel) / static_cast<double>(bins + 2);
    std::vector<int64_t> point(static_cast<size_t>(bins + 2));
    for (int64_t m = 0; m < bins + 2; ++m) {
      const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(m) * step + low_mel) / 2595.0) - 1.0);
      point[static_cast<size_t>(m)] =
          static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * hz / static_cast<double>(rate)));
    }
    std::vector<double> w(static_cast<size_t>(spec * bins), 0.0);
    const auto put = [&](int64_t j, int64_t i, double v) {
      if (j >= 0 && j < spec) w[static_cast<size_t>(j * bins + i)] = v;
    };
    for (int64_t i = 0; i < bins; ++i) {
      const int64_t left = point[static_cast<size_t>(i)], centre = point[static_cast<size_t>(i + 1)],
                    right = point[static_cast<size_t>(i + 2)];
      if (centre == left)
        put(centre, i, 1.0);
      else
        for (int64_t j = left; j <= centre; ++j)
          put(j, i, static_cast<double>(j - left) / static_cast<double>(centre - left));
      for (int64_t j = centre; j < right; ++j)
        put(j, i, static_cast<double>(right - j) / static_cast<double>(right - centre));
    }
    Tensor y = Tensor::empty(out, Shape{spec, bins});
    for (int64_t k = 0; k < y.numel(); ++k) store_f(out, y.raw(), k, w[static_cast<size_t>(k)]);
    return std::vector<Tensor>{y};
  }

  Kind kind_;
  graph::Node node_;
};

KernelFactory value_factory(Kind kind) {
  return [kind](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<ValueShapedKernel>(a.node, kind));
  };
}

}  // namespace

Status register_value_shaped(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "NonZero", 9, DType::kUndefined, value_factory(Kind::kNonZero)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Unique", 11, DType::kUndefined, value_factory(Kind::kUnique)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Compress", 9, DType::kUndefined, value_factory(Kind::kCompress)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "NonMaxSuppression", 10, DType::kUndefined, value_factory(Kind::kNms)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "HannWindow", 17, DType::kUndefined, value_factory(Kind::kHann)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "HammingWindow", 17, DType::kUndefined, value_factory(Kind::kHamming)));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "BlackmanWindow", 17, DType::kUndefined, value_factory(Kind::kBlackman)));
  return add_typed_def(reg, "MelWeightMatrix", 17, DType::kUndefined, value_factory(Kind::kMel));
}

}  // namespace streamline::ops::cpu
