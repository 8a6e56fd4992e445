// Classical-ML operators of the ai.onnx.ml domain on numeric tensors: Binarizer (1),
// ArrayFeatureExtractor (1) and TreeEnsemble (5).
//
//   Binarizer              y = x > threshold ? 1 : 0
//   ArrayFeatureExtractor  z = x[..., indices] (indices flattened; a 1-D x gives a [1, k] result)
//   TreeEnsemble           X [N, F] -> Y [N, n_targets]: each tree walks from its root, node i
//                          comparing X[n, nodes_featureids[i]] with nodes_splits[i] by nodes_modes
//                          (<=, <, >=, >, ==, !=, membership in a NaN-delimited set of
//                          membership_values; NaN goes the true way where
//                          nodes_missing_value_tracks_true says so) until a leaf, whose weight
//                          goes to its target; per target the trees' weights are summed, averaged,
//                          or their minimum or maximum taken, then post_transform (none, softmax,
//                          logistic, softmax_zero) applied per row.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

constexpr const char* kMl = "ai.onnx.ml";

class BinarizerKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs& a) {
    threshold_ = a.node.attr_float("threshold", 0.f);
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid("expects X");
    if (!is_float_dtype(in[0].dtype) && in[0].dtype != DType::kInt32 && in[0].dtype != DType::kInt64)
      return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, Layout::kPlain});
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    for (int64_t i = 0; i < x.numel(); ++i)
      store_f(x.dtype(), ctx.outputs[0].raw(), i, load_f(x.dtype(), x.raw(), i) > threshold_ ? 1.0 : 0.0);
    return ok_status();
  }

 private:
  float threshold_ = 0.f;
};

class ArrayFeatureExtractorKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs&) { return ok_status(); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid("expects X and Y (indices)");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    if (in[1].dtype != DType::kInt64) return invalid("indices must be int64");
    const Shape& x = in[0].shape;
    if (x.rank() == 0) return invalid("X must have rank 1 or more");
    Shape out = x.rank() == 1 ? Shape{1} : x;
    if (x.rank() > 1) out = Shape(std::vector<int64_t>(x.begin(), x.end() - 1));
    out.push_back(in[1].shape.numel());
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, out, Layout::kPlain});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor &x = ctx.inputs[0], &idx = ctx.inputs[1];
    const int64_t last = x.shape()[x.shape().rank() - 1], rows = x.numel() / std::max<int64_t>(last, 1);
    const int64_t k = idx.numel();
    const size_t esz = dtype_size(x.dtype());
    for (int64_t j = 0; j < k; ++j) {
      const int64_t v = idx.data<int64_t>()[j];
      if (v < 0 || v >= last)
        return invalid("index " + std::to_string(v) + " is out of range [0, " + std::to_string(last) + ")");
    }
    const auto* src = static_cast<const uint8_t*>(x.raw());
    auto* dst = static_cast<uint8_t*>(ctx.outputs[0].raw());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < k; ++j)
        std::memcpy(dst + static_cast<size_t>(r * k + j) * esz,
                    src + static_cast<size_t>(r * last + idx.data<int64_t>()[j]) * esz, esz);
    return ok_status();
  }
};

enum class Cmp : uint8_t { kLeq = 0, kLt = 1, kGte = 2, kGt = 3, kEq = 4, kNeq = 5, kMember = 6 };
enum class Aggregate { kAverage = 0, kSum = 1, kMin = 2, kMax = 3 };
enum class Post { kNone = 0, kSoftmax = 1, kLogistic = 2, kSoftmaxZero = 3, kProbit = 4 };

struct TreeNode {
  Cmp mode = Cmp::kLeq;
  int64_t feature = 0;
  double split = 0;
  bool nan_true = false;
  int64_t child[2] = {0, 0};  // [false, true] branch: a node or a leaf index
  bool is_leaf[2] = {false, false};
  std::vector<double> members;  // kMember only
};

class TreeEnsembleKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    const graph::Node& n = a.node;
    targets_ = n.attr_int("n_targets", 0);
    if (targets_ < 1) return invalid("n_targets must be >= 1");
    const int64_t agg = n.attr_int("aggregate_function", 1), post = n.attr_int("post_transform", 0);
    if (agg < 0 || agg > 3) return invalid("unknown aggregate_function " + std::to_string(agg));
    if (post < 0 || post > 4) return invalid("unknown post_transform " + std::to_string(post));
    if (post == 4) return unsupported_error("post_transform PROBIT is not supported");
    aggregate_ = static_cast<Aggregate>(agg);
    post_ = static_cast<Post>(post);
    SL_ASSIGN_OR_RETURN(std::vector<double> splits, tensor_attr(n, "nodes_splits"));
    SL_ASSIGN_OR_RETURN(std::vector<double> modes, tensor_attr(n, "nodes_modes"));
    SL_ASSIGN_OR_RETURN(leaf_weights_, tensor_attr(n, "leaf_weights"));
    const std::vector<int64_t> features = n.attr_ints("nodes_featureids"), tnodes = n.attr_ints("nodes_truenodeids"),
                               fnodes = n.attr_ints("nodes_falsenodeids"), tleaf = n.attr_ints("nodes_trueleafs"),
                               fleaf = n.attr_ints("nodes_falseleafs"),
                               missing = n.attr_ints("nodes_missing_value_tracks_true");
    leaf_targets_ = n.attr_ints("leaf_targetids");
    roots_ = n.attr_ints("tree_roots");
    const size_t count = splits.size();
    for (size_t len : {features.size(), modes.size(), tnodes.size(), fnodes.size(), tleaf.size(), fleaf.size()})
      if (len != count) return invalid("the nodes_* attributes differ in length");
    if (!missing.empty() && missing.size() != count)
      return invalid("nodes_missing_value_tracks_true has the wrong length");
    if (leaf_targets_.size() != leaf_weights_.size())
      return invalid("leaf_targetids and leaf_weights differ in length");
    for (int64_t t : leaf_targets_)
      if (t < 0 || t >= targets_) return invalid("leaf target " + std::to_string(t) + " is out of range");
    std::vector<double> members;
    if (n.has_attr("membership_values")) {
      SL_ASSIGN_OR_RETURN(members, tensor_attr(n, "membership_values"));
    }
    size_t next_set = 0;
    nodes_.resize(count);
    for (size_t i = 0; i < count; ++i) {
      TreeNode& t = nodes_[i];
      if (modes[i] < 0 || modes[i] > 6) return invalid("unknown node mode " + std::to_string(modes[i]));
      t.mode = static_cast<Cmp>(static_cast<int>(modes[i]));
      t.feature = features[i];
      t.split = splits[i];
      t.nan_true = !missing.empty() && missing[i] != 0;
      t.child[1] = tnodes[i];
      t.child[0] = fnodes[i];
      t.is_leaf[1] = tleaf[i] != 0;
      t.is_leaf[0] = fleaf[i] != 0;
      for (int b = 0; b < 2; ++b) {
        const size_t limit = t.is_leaf[b] ? leaf_weights_.size() : count;
        if (t.child[b] < 0 || static_cast<size_t>(t.child[b]) >= limit) return invalid("a branch points out of range");
      }
      if (t.mode == Cmp::kMember) {
        for (; next_set < members.size() && !std::isnan(members[next_set]); ++next_set)
          t.members.push_back(members[next_set]);
        if (next_set >= members.size() && t.members.empty()) return invalid("a membership node has no set");
        ++next_set;  // the NaN delimiter
      }
    }
    for (int64_t r : roots_)
      if (r < 0 || static_cast<size_t>(r) >= count) return invalid("a tree root is out of range");
    if (roots_.empty()) return invalid("tree_roots is empty");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid("expects X");
    if (!is_float_dtype(in[0].dtype)) return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    if (in[0].shape.rank() != 2) return invalid("X must be [N, F], got " + in[0].shape.to_string());
    for (const TreeNode& t : nodes_)
      if (t.feature < 0 || t.feature >= in[0].shape[1])
        return invalid("a node reads feature " + std::to_string(t.feature) + " of " + std::to_string(in[0].shape[1]));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, Shape{in[0].shape[0], targets_}, Layout::kPlain});
    rr.workspace_bytes = static_cast<size_t>(targets_) * sizeof(double);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    const int64_t rows = x.shape()[0], feats = x.shape()[1];
    auto* acc = static_cast<double*>(ctx.workspace);
    // A target no leaf reaches keeps the identity: 0, or the dtype's largest / lowest finite value.
    const double big = x.dtype() == DType::kFloat64   ? std::numeric_limits<double>::max()
                       : x.dtype() == DType::kFloat32 ? std::numeric_limits<float>::max()
                       : x.dtype() == DType::kFloat16 ? 65504.0
                                                      : 3.3895313892515355e38;  // bfloat16
    const double init = aggregate_ == Aggregate::kMin ? big : aggregate_ == Aggregate::kMax ? -big : 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(acc, acc + targets_, init);
      for (int64_t root : roots_) {
        const int64_t leaf = walk(x, r * feats, root);
        const int64_t t = leaf_targets_[static_cast<size_t>(leaf)];
        const double w = leaf_weights_[static_cast<size_t>(leaf)];
        switch (aggregate_) {
          case Aggregate::kSum:
            acc[t] += w;
            break;
          case Aggregate::kAverage:
            acc[t] += w / static_cast<double>(roots_.size());
            break;
          case Aggregate::kMin:
            acc[t] = std::min(acc[t], w);
            break;
          case Aggregate::kMax:
            acc[t] = std::max(acc[t], w);
            break;
        }
      }
      post_transform(acc);
      for (int64_t t = 0; t < targets_; ++t) store_f(y.dtype(), y.raw(), r * targets_ + t, acc[t]);
    }
    return ok_status();
  }

 private:
  // The leaf the tree from `node` reaches for the row starting at element `row`.
  int64_t walk(const Tensor& x, int64_t row, int64_t node) const {
    for (size_t steps = 0; steps <= nodes_.size(); ++steps) {
      const TreeNode& t = nodes_[static_cast<size_t>(node)];
      const double v = load_f(x.dtype(), x.raw(), row + t.feature);
      bool go = false;
      if (std::isnan(v)) {
        go = t.nan_true;
      } else {
        switch (t.mode) {
          case Cmp::kLeq:
            go = v <= t.split;
            break;
          case Cmp::kLt:
            go = v < t.split;
            break;
          case Cmp::kGte:
            go = v >= t.split;
            break;
          case Cmp::kGt:
            go = v > t.split;
            break;
          case Cmp::kEq:
            go = v == t.split;
            break;
          case Cmp::kNeq:
            go = v != t.split;
            break;
          case Cmp::kMember:
            go = std::find(t.members.begin(), t.members.end(), v) != t.members.end();
            break;
        }
      }
      const int b = go ? 1 : 0;
      if (t.is_leaf[b]) return t.child[b];
      node = t.child[b];
    }
    return 0;  // a cycle in the node graph; init() bounds indices, not shapes
  }

  void post_transform(double* v) const {
    if (post_ == Post::kLogistic) {
      for (int64_t t = 0; t < targets_; ++t) v[t] = 1.0 / (1.0 + std::exp(-v[t]));
    } else if (post_ == Post::kSoftmax || post_ == Post::kSoftmaxZero) {
      double mx = -std::numeric_limits<double>::infinity(), sum = 0.0;
      for (int64_t t = 0; t < targets_; ++t)
        if (post_ == Post::kSoftmax || v[t] != 0.0) mx = std::max(mx, v[t]);
      for (int64_t t = 0; t < targets_; ++t) {
        v[t] = post_ == Post::kSoftmaxZero && v[t] == 0.0 ? 0.0 : std::exp(v[t] - mx);
        sum += v[t];
      }
      if (sum > 0)
        for (int64_t t = 0; t < targets_; ++t) v[t] /= sum;
    }
  }

  static Result<std::vector<double>> tensor_attr(const graph::Node& n, const char* name) {
    auto it = n.attrs.find(name);
    if (it == n.attrs.end() || it->second.kind != graph::Attribute::Kind::kTensor || !it->second.t.defined())
      return invalid_argument(n.describe() + ": tensor attribute '" + name + "' is required");
    const Tensor& t = it->second.t;
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = load_f(t.dtype(), t.raw(), i);
    return v;
  }

  int64_t targets_ = 1;
  Aggregate aggregate_ = Aggregate::kSum;
  Post post_ = Post::kNone;
  std::vector<TreeNode> nodes_;
  std::vector<double> leaf_weights_;
  std::vector<int64_t> leaf_targets_, roots_;
};

}  // namespace

Status register_ml_ops(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, "Binarizer", 1, DType::kUndefined, make_factory<BinarizerKernel>(), kMl));
  SL_RETURN_IF_ERROR(add_typed_def(reg, "ArrayFeatureExtractor", 1, DType::kUndefined,
                                   make_factory<ArrayFeatureExtractorKernel>(), kMl));
  return add_typed_def(reg, "TreeEnsemble", 5, DType::kUndefined, make_factory<TreeEnsembleKernel>(), kMl);
}

}  // namespace streamline::ops::cpu
