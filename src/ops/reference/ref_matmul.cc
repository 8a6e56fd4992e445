// Reference Gemm, MatMul, streamline.FusedGemm and streamline.FusedMatMul: triple loops in double
// precision, per the ONNX specs (MatMul with NumPy semantics: 1-D operands and broadcast batch dims).

#include "ops/reference/ref_ew.h"
#include "ops/reference/ref_nn_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

class RefGemm final : public RefKernel {
 public:
  explicit RefGemm(const graph::Node& node) : RefKernel(node) {}

  Status init() {
    if (node_.domain == "streamline") {
      SL_ASSIGN_OR_RETURN(act_, RefActivation::parse(node_));
      SL_ASSIGN_OR_RETURN(epilogue_, graph::read_program_attrs(node_));
    }
    return ok_status();
  }

 protected:
  Result<std::vector<Shape>> shapes(const std::vector<Shape>& in, const std::vector<bool>& present) const override {
    if (in.size() < 2 || !present[0] || !present[1]) return invalid_argument(node_.describe() + ": needs A and B");
    const Shape &a = in[0], &b = in[1];
    if (a.rank() != 2 || b.rank() != 2) return invalid_argument(node_.describe() + ": A and B must be 2-D");
    const bool ta = node_.attr_int("transA", 0) != 0, tb = node_.attr_int("transB", 0) != 0;
    const int64_t m = ta ? a[1] : a[0], k = ta ? a[0] : a[1], kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
    if (k != kb) return invalid_argument(node_.describe() + ": inner dimensions differ");
    const Shape y{m, n};
    if (in.size() > 2 && present[2]) {
      Shape out;
      if (in[2].rank() > 2 || !broadcast_shapes(in[2], y, &out) || out != y)
        return invalid_argument(node_.describe() + ": C does not broadcast to the output");
    }
    return std::vector<Shape>{y};
  }

  Status compute(std::span<const Tensor> in, std::span<Tensor> out) const override {
    const Shape& as = in[0].shape();
    const bool ta = node_.attr_int("transA", 0) != 0, tb = node_.attr_int("transB", 0) != 0;
    const float alpha = node_.attr_float("alpha", 1.f), beta = node_.attr_float("beta", 1.f);
    const Shape& ys = out[0].shape();
    const int64_t m = ys[0], n = ys[1], k = ta ? as[0] : as[1];
    const float* a = in[0].data<float>();
    const float* b = in[1].data<float>();
    const Tensor* c = in.size() > 2 && in[2].defined() ? &in[2] : nullptr;
    float* y = out[0].data<float>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p)
          acc += double(ta ? a[p * m + i] : a[i * k + p]) * double(tb ? b[j * k + p] : b[p * n + j]);
        double v = alpha * acc;
        if (c) {
          const Shape& cs = c->shape();
          const int64_t cm = cs.rank() == 2 ? cs[0] : 1, cn = cs.rank() >= 1 ? cs[cs.rank() - 1] : 1;
          v += beta * double(c->data<float>()[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)]);
        }
        y[i * n + j] = act_(static_cast<float>(v));
      }
    if (epilogue_ && in.size() >= 3) ref_apply_program(*epilogue_, y, ys, in.subspan(3));
    return ok_status();
  }

 private:
  RefActivation act_;
  std::optional<graph::EwProgram> epilogue_;  // ew_* attributes of the fused ops
};

class RefMatMul final : public RefKernel {
 public:
  explicit RefMatMul(const graph::Node& node) : RefKernel(node) {}

  Status init() {
    if (node_.domain == "streamline") {
      SL_ASSIGN_OR_RETURN(act_, RefActivation::parse(node_));
      SL_ASSIGN_OR_RETURN(epilogue_, graph::read_program_attrs(node_));
    }
    return ok_status();
  }

 protected:
  // NumPy matmul shapes: batch dims broadcast, 1-D operands promoted then their unit axis dropped.
  Result<std::vector<Shape>> shapes(const std::vector<Shape>& in, const std::vector<bool>& present) const override {
    if (in.size() < 2 || !present[0] || !present[1]) return invalid_argument(node_.describe() + ": needs A and B");
    const Shape &a = in[0], &b = in[1];
    if (a.rank() < 1 || b.rank() < 1) return invalid_argument(node_.describe() + ": inputs must have rank >= 1");
    const int64_t k = a[a.rank() - 1], kb = b.rank() >= 2 ? b[b.rank() - 2] : b[0];
    if (k != kb) return invalid_argument(node_.describe() + ": inner dimensions differ");
    Shape ab, bb, y;
    for (size_t i = 0; i + 2 < a.rank(); ++i) ab.push_back(a[i]);
    for (size_t i = 0; i + 2 < b.rank(); ++i) bb.push_back(b[i]);
    if (!broadcast_shapes(ab, bb, &y)) return invalid_argument(node_.describe() + ": batch dims do not broadcast");
    if (a.rank() >= 2) y.push_back(a[a.rank() - 2]);
    const int64_t n = b.rank() >= 2 ? b[b.rank() - 1] : 1;
    if (b.rank() >= 2) y.push_back(n);
    if (in.size() > 2 && present[2] && (in[2].rank() != 1 || in[2][0] != n))
      return invalid_argument(node_.describe() + ": bias must be [N]");
    return std::vector<Shape>{y};
  }

  Status compute(std::span<const Tensor> in, std::span<Tensor> out) const override {
    // Promote to rank >= 2 and left-pad both batch parts to the output's batch rank.
    Shape as = in[0].shape(), bs = in[1].shape();
    if (as.rank() == 1) as = Shape{1, as[0]};
    if (bs.rank() == 1) bs = Shape{bs[0], 1};
    const int64_t m = as[as.rank() - 2], k = as[as.rank() - 1], n = bs[bs.rank() - 1];
    const size_t br = std::max(as.rank(), bs.rank()) - 2;
    std::vector<int64_t> abatch(br, 1), bbatch(br, 1), ybatch(br, 1);
    for (size_t i = 0; i + 2 < as.rank(); ++i) abatch[br - (as.rank() - 2) + i] = as[i];
    for (size_t i = 0; i + 2 < bs.rank(); ++i) bbatch[br - (bs.rank() - 2) + i] = bs[i];
    int64_t batches = 1;
    for (size_t i = 0; i < br; ++i) {
      ybatch[i] = std::max(abatch[i], bbatch[i]);
      batches *= ybatch[i];
    }
    const float* a = in[0].data<float>();
    const float* b = in[1].data<float>();
    const float* bias = in.size() > 2 && in[2].defined() ? in[2].data<float>() : nullptr;
    float* y = out[0].data<float>();
    for (int64_t bi = 0; bi < batches; ++bi) {
      // Offsets of this output batch in A and B (broadcast axes repeat their single slice).
      int64_t rem = bi, aoff = 0, boff = 0, astride = 1, bstride = 1;
      for (size_t i = br; i-- > 0;) {
        const int64_t idx = rem % ybatch[i];
        rem /= ybatch[i];
        aoff += (abatch[i] == 1 ? 0 : idx) * astride;
        boff += (bbatch[i] == 1 ? 0 : idx) * bstride;
        astride *= abatch[i];
        bstride *= bbatch[i];
      }
      const float* ab = a + aoff * m * k;
      const float* bb = b + boff * k * n;
      float* yb = y + bi * m * n;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = bias ? bias[j] : 0.0;
          for (int64_t p = 0; p < k; ++p) acc += double(ab[i * k + p]) * double(bb[p * n + j]);
          yb[i * n + j] = act_(static_cast<float>(acc));
        }
    }
    if (epilogue_ && in.size() >= 3) ref_apply_program(*epilogue_, y, out[0].shape(), in.subspan(3));
    return ok_status();
  }

 private:
  RefActivation act_;
  std::optional<graph::EwProgram> epilogue_;  // ew_* attributes of the fused ops
};

}  // namespace

Status register_matmul(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefGemm>("Gemm", "", 7)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefGemm>("FusedGemm", "streamline", 1)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefMatMul>("MatMul", "", 1)));
  SL_RETURN_IF_ERROR(reg.add(ref_def<RefMatMul>("FusedMatMul", "streamline", 1)));
  return ok_status();
}

}  // namespace streamline::ops::reference
