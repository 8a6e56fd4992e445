// Reference DFT (std::complex sums straight from the definition) and TfIdfVectorizer (pool-driven:
// each pool n-gram is searched for at every start and skip distance, the reverse of the CPU kernel's
// row-driven walk).

#include <cmath>
#include <complex>
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

class RefDftKernel final : public Kernel {
 public:
  explicit RefDftKernel(const graph::Node& node) : node_(node) {}

  int64_t length(std::span<const TensorInfo> in) const {
    const int64_t axis = node_.attr_int("axis", 1);
    return in.size() > 1 && in[1].value ? read_i(*in[1].value, 0) : in[0].shape[static_cast<size_t>(axis)];
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    const int64_t axis = node_.attr_int("axis", 1);
    if (axis < 0) return unsupported(prefix(node_) + "reference needs a non-negative axis");
    Shape out = in[0].shape;
    const int64_t len = length(in);
    out[static_cast<size_t>(axis)] = node_.attr_int("onesided", 0) ? len / 2 + 1 : len;
    out[out.rank() - 1] = 2;
    ReshapeResult rr;
    rr.outputs.push_back({in[0].dtype, out});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const size_t axis = static_cast<size_t>(node_.attr_int("axis", 1));
    const bool inverse = node_.attr_int("inverse", 0) != 0;
    const int64_t n_in = x.shape()[axis], comp = x.shape().back();
    const int64_t len = ctx.inputs.size() > 1 && ctx.inputs[1].defined() ? read_i(ctx.inputs[1], 0) : n_in;
    for (int64_t i = 0; i < y.numel(); i += 2) {
      std::vector<int64_t> idx = unravel(i, y.shape());
      const int64_t k = idx[axis];
      std::complex<double> acc = 0;
      for (int64_t t = 0; t < std::min(n_in, len); ++t) {
        idx[axis] = t;
        idx.back() = 0;
        const int64_t off = ravel(idx, x.shape());
        const std::complex<double> v(read_f(x, off), comp == 2 ? read_f(x, off + 1) : 0.0);
        const double ang = (inverse ? 2.0 : -2.0) * std::numbers::pi * double(k) * double(t) / double(len);
        acc += v * std::polar(1.0, ang);
      }
      if (inverse) acc /= double(len);
      write_f(y, i, acc.real());
      write_f(y, i + 1, acc.imag());
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

class RefTfIdfKernel final : public Kernel {
 public:
  explicit RefTfIdfKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    int64_t size = 0;
    for (int64_t v : node_.attr_ints("ngram_indexes")) size = std::max(size, v + 1);
    const Shape& s = in[0].shape;
    ReshapeResult rr;
    rr.outputs.push_back({DType::kFloat32, s.rank() == 1 ? Shape{size} : Shape{s[0], size}});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const int64_t rows = x.shape().rank() == 1 ? 1 : x.shape()[0], cols = x.shape().back();
    const int64_t out = y.shape().back();
    const auto pool = node_.attr_ints("pool_int64s"), counts = node_.attr_ints("ngram_counts"),
               indexes = node_.attr_ints("ngram_indexes");
    const auto weights = node_.attr_floats("weights");
    const int64_t mn = node_.attr_int("min_gram_length", 1), mx = node_.attr_int("max_gram_length", 1),
                  skip = node_.attr_int("max_skip_count", 0);
    const std::string mode = node_.attr_string("mode", "TF");
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> freq(static_cast<size_t>(out), 0.0);
      int64_t ordinal = 0;
      for (size_t seg = 0; seg < counts.size(); ++seg) {
        const int64_t n = static_cast<int64_t>(seg) + 1;
        const int64_t end = seg + 1 < counts.size() ? counts[seg + 1] : static_cast<int64_t>(pool.size());
        for (int64_t p = counts[seg]; p < end; p += n, ++ordinal) {
          if (n < mn || n > mx) continue;
          int64_t hits = 0;
          for (int64_t d = 1; d <= (n == 1 ? 1 : skip + 1); ++d)
            for (int64_t s = 0; s + (n - 1) * d < cols; ++s) {
              bool match = true;
              for (int64_t q = 0; q < n && match; ++q)
                match = read_i(x, r * cols + s + q * d) == pool[static_cast<size_t>(p + q)];
              hits += match;
            }
          freq[static_cast<size_t>(indexes[static_cast<size_t>(ordinal)])] += double(hits);
        }
      }
      for (int64_t o = 0; o < out; ++o) {
        const double w = o < static_cast<int64_t>(weights.size()) ? weights[static_cast<size_t>(o)] : 1.0;
        double v = freq[static_cast<size_t>(o)];
        if (mode == "IDF") v = v > 0 ? w : 0;
        if (mode == "TFIDF") v *= w;
        write_f(y, r * out + o, v);
      }
    }
    return ok_status();
  }

 private:
  graph::Node node_;
};

template <typename K>
KernelFactory factory() {
  return [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<K>(a.node));
  };
}

}  // namespace

Status register_signal(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(math_util::add_ref(reg, "DFT", 17, factory<RefDftKernel>()));
  return math_util::add_ref(reg, "TfIdfVectorizer", 9, factory<RefTfIdfKernel>());
}

}  // namespace streamline::ops::reference
