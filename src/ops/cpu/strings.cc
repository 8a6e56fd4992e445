// String tensors (DType::kString, one std::string per element, UTF-8):
//
//   StringNormalizer-10(X)    drops `stopwords` (case-insensitively unless is_case_sensitive), then
//                             maps case (`case_change_action` NONE/LOWER/UPPER); X is [C] or [1, C]
//   StringConcat-20(X, Y)     X + Y elementwise, broadcasting
//   StringSplit-20(X)         Python's str.split: on `delimiter` (empty or absent: runs of
//                             whitespace), at most `maxsplit` splits; Y = X.shape + [most pieces],
//                             padded with "", Z = the piece count of each element
//   RegexFullMatch-20(X)      whether each element matches `pattern` whole (RE2 syntax, as ONNX
//                             specifies; RE2 runs in linear time, so no input can make it blow up)
//   Equal-19 on strings, Identity on strings, Cast/CastLike between strings and numbers
//
// Case mapping decodes UTF-8 and uses the C.UTF-8 locale's wide-character tables (ASCII only where
// that locale is missing); the `locale` attribute is read but every locale maps case the same way.
// All outputs depend on element values, and string tensors never live in a plan's arena, so graphs
// with these ops run node by node (ops/eager.h).

#include <re2/re2.h>

#include <algorithm>
#include <locale>
#include <memory>
#include <unordered_set>

#include "core/utf8.h"
#include "ops/cpu/data_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_broadcast.h"
#include "ops/cpu/string_cast.h"

namespace streamline::ops::cpu {
namespace {

// The wide-character case tables: C.UTF-8's when the system has it, else the classic (ASCII) ones.
const std::ctype<wchar_t>& case_table() {
  static const std::locale loc = [] {
    try {
      return std::locale("C.UTF-8");
    } catch (const std::exception&) {
      return std::locale::classic();
    }
  }();
  return std::use_facet<std::ctype<wchar_t>>(loc);
}

enum class CaseChange { kNone, kLower, kUpper };

std::string change_case(const std::string& s, CaseChange c) {
  if (c == CaseChange::kNone) return s;
  std::u32string cps = utf8_decode(s);
  const auto& table = case_table();
  for (char32_t& cp : cps) {
    const auto w = static_cast<wchar_t>(cp);
    cp = static_cast<char32_t>(c == CaseChange::kUpper ? table.toupper(w) : table.tolower(w));
  }
  return utf8_encode(cps);
}

Status need_value(const TensorInfo& in, const std::string& desc) {
  if (!in.value) return unsupported(desc + ": needs the values of its input: string tensors run node by node");
  return ok_status();
}

class StringNormalizerKernel final : public DataKernel {
 public:
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<StringNormalizerKernel>(a.node);
    const std::string action = a.node.attr_string("case_change_action", "NONE");
    if (action == "LOWER") {
      k->case_ = CaseChange::kLower;
    } else if (action == "UPPER") {
      k->case_ = CaseChange::kUpper;
    } else if (action != "NONE") {
      return k->invalid("case_change_action must be NONE, LOWER or UPPER, got '" + action + "'");
    }
    k->case_sensitive_ = a.node.attr_int("is_case_sensitive", 0) != 0;
    auto it = a.node.attrs.find("stopwords");
    if (it != a.node.attrs.end())
      for (const std::string& w : it->second.strings) k->stopwords_.insert(k->key(w));
    return std::unique_ptr<Kernel>(std::move(k));
  }
  using DataKernel::DataKernel;

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || in[0].dtype != DType::kString) return invalid("input must be a string tensor");
    const Shape& s = in[0].shape;
    if (s.rank() != 1 && !(s.rank() == 2 && s[0] == 1))
      return invalid("input must be [C] or [1, C], got " + s.to_string());
    SL_RETURN_IF_ERROR(need_value(in[0], desc_));
    int64_t kept = 0;
    for (int64_t i = 0; i < in[0].value->numel(); ++i) kept += keep(in[0].value->strings()[i]) ? 1 : 0;
    // Everything removed: one empty string, as ONNX Runtime gives.
    Shape out = s;
    out[s.rank() - 1] = std::max<int64_t>(kept, 1);
    ReshapeResult r;
    r.outputs.push_back({DType::kString, out, Layout::kPlain});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    std::string* y = ctx.outputs[0].strings();
    int64_t o = 0;
    for (int64_t i = 0; i < x.numel(); ++i)
      if (keep(x.strings()[i])) y[o++] = change_case(x.strings()[i], case_);
    return ok_status();
  }

 private:
  std::string key(const std::string& w) const { return case_sensitive_ ? w : change_case(w, CaseChange::kUpper); }
  bool keep(const std::string& w) const { return stopwords_.empty() || !stopwords_.count(key(w)); }

  CaseChange case_ = CaseChange::kNone;
  bool case_sensitive_ = false;
  std::unordered_set<std::string> stopwords_;
};

// Base of the broadcasting binary string ops.
class StringBinaryKernel : public DataKernel {
 public:
  StringBinaryKernel(const graph::Node& node, DType out) : DataKernel(node), node_(node), out_(out) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || in[0].dtype != DType::kString || in[1].dtype != DType::kString)
      return invalid("takes two string tensors");
    const Shape shapes[] = {in[0].shape, in[1].shape};
    SL_ASSIGN_OR_RETURN(Shape out, math::broadcast_all(node_, shapes));
    ReshapeResult r;
    r.outputs.push_back({out_, out, Layout::kPlain});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& y = ctx.outputs[0];
    const math::Operand ops[] = {{ctx.inputs[0].shape()}, {ctx.inputs[1].shape()}};
    const math::StridedPlan p = math::make_strided_plan(y.shape(), Layout::kPlain, ops);
    const std::string* a = ctx.inputs[0].strings();
    const std::string* b = ctx.inputs[1].strings();
    math::for_each_run(p, 0, p.numel, [&](int64_t o, const int64_t* off, int64_t len) {
      for (int64_t i = 0; i < len; ++i)
        apply(a[off[0] + i * p.inner_stride(0)], b[off[1] + i * p.inner_stride(1)], y, o + i);
    });
    return ok_status();
  }

 protected:
  virtual void apply(const std::string& a, const std::string& b, const Tensor& y, int64_t at) const = 0;

 private:
  graph::Node node_;
  DType out_;
};

class StringConcatKernel final : public StringBinaryKernel {
 public:
  explicit StringConcatKernel(const graph::Node& n) : StringBinaryKernel(n, DType::kString) {}
  static KernelPtr create(const KernelCreateArgs& a) {
    return std::unique_ptr<Kernel>(std::make_unique<StringConcatKernel>(a.node));
  }

 protected:
  void apply(const std::string& a, const std::string& b, const Tensor& y, int64_t at) const override {
    y.strings()[at] = a + b;
  }
};

class StringEqualKernel final : public StringBinaryKernel {
 public:
  explicit StringEqualKernel(const graph::Node& n) : StringBinaryKernel(n, DType::kBool) {}
  static KernelPtr create(const KernelCreateArgs& a) {
    return std::unique_ptr<Kernel>(std::make_unique<StringEqualKernel>(a.node));
  }

 protected:
  void apply(const std::string& a, const std::string& b, const Tensor& y, int64_t at) const override {
    y.data<uint8_t>()[at] = a == b ? 1 : 0;
  }
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

class StringSplitKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<StringSplitKernel>(a.node);
    k->delimiter_ = a.node.attr_string("delimiter", "");
    k->maxsplit_ = a.node.attr_int("maxsplit", -1);
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || in[0].dtype != DType::kString) return invalid("input must be a string tensor");
    SL_RETURN_IF_ERROR(need_value(in[0], desc_));
    int64_t most = 0;
    for (int64_t i = 0; i < in[0].value->numel(); ++i)
      most = std::max<int64_t>(most, static_cast<int64_t>(split(in[0].value->strings()[i]).size()));
    Shape y = in[0].shape;
    y.push_back(most);
    ReshapeResult r;
    r.outputs.push_back({DType::kString, y, Layout::kPlain});
    r.outputs.push_back({DType::kInt64, in[0].shape, Layout::kPlain});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& y = ctx.outputs[0];
    const int64_t most = y.shape().back();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const std::vector<std::string> pieces = split(x.strings()[i]);
      for (size_t k = 0; k < pieces.size(); ++k) y.strings()[i * most + static_cast<int64_t>(k)] = pieces[k];
      if (ctx.outputs.size() > 1 && ctx.outputs[1].defined())
        ctx.outputs[1].data<int64_t>()[i] = static_cast<int64_t>(pieces.size());
    }
    return ok_status();
  }

 private:
  std::vector<std::string> split(const std::string& s) const {
    std::vector<std::string> out;
    const bool limited = maxsplit_ >= 0;
    if (delimiter_.empty()) {
      // Runs of whitespace separate pieces; leading and trailing whitespace gives none.
      size_t i = 0;
      while (true) {
        while (i < s.size() && is_space(s[i])) ++i;
        if (i == s.size()) break;
        if (limited && static_cast<int64_t>(out.size()) == maxsplit_) {
          out.push_back(s.substr(i));
          break;
        }
        size_t j = i;
        while (j < s.size() && !is_space(s[j])) ++j;
        out.push_back(s.substr(i, j - i));
        i = j;
      }
      return out;
    }
    size_t pos = 0;
    for (size_t f; (!limited || static_cast<int64_t>(out.size()) < maxsplit_) &&
                   (f = s.find(delimiter_, pos)) != std::string::npos;
         pos = f + delimiter_.size())
      out.push_back(s.substr(pos, f - pos));
    out.push_back(s.substr(pos));
    return out;
  }

  std::string delimiter_;
  int64_t maxsplit_ = -1;
};

class RegexFullMatchKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<RegexFullMatchKernel>(a.node);
    if (!a.node.has_attr("pattern")) return k->invalid("missing attribute 'pattern'");
    RE2::Options opts;
    opts.set_log_errors(false);
    k->re_ = std::make_unique<RE2>(a.node.attr_string("pattern", ""), opts);
    if (!k->re_->ok())
      return k->invalid("pattern '" + k->re_->pattern() + "' is not a valid RE2 expression: " + k->re_->error());
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || in[0].dtype != DType::kString) return invalid("input must be a string tensor");
    ReshapeResult r;
    r.outputs.push_back({DType::kBool, in[0].shape, Layout::kPlain});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    uint8_t* y = ctx.outputs[0].data<uint8_t>();
    for (int64_t i = 0; i < x.numel(); ++i) y[i] = RE2::FullMatch(x.strings()[i], *re_) ? 1 : 0;
    return ok_status();
  }

 private:
  std::unique_ptr<RE2> re_;  // RE2 is thread-safe for matching
};

class StringIdentityKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    return std::unique_ptr<Kernel>(std::make_unique<StringIdentityKernel>(a.node));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input");
    ReshapeResult r;
    r.outputs.push_back({in[0].dtype, in[0].shape, Layout::kPlain});
    return r;
  }
  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    std::copy(x.strings(), x.strings() + x.numel(), ctx.outputs[0].strings());
    return ok_status();
  }
};

template <typename K>
Status add_string_def(KernelRegistry& reg, const char* op, int since, const char* domain = "") {
  KernelDef def;
  def.op = op;
  def.domain = domain;
  def.since_version = since;
  def.dtype = DType::kString;
  def.provider = "cpu";
  def.create = [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> { return K::create(a); };
  return reg.add(std::move(def));
}

}  // namespace

Status register_strings(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_string_def<StringNormalizerKernel>(reg, "StringNormalizer", 10));
  SL_RETURN_IF_ERROR(add_string_def<StringConcatKernel>(reg, "StringConcat", 20));
  SL_RETURN_IF_ERROR(add_string_def<StringSplitKernel>(reg, "StringSplit", 20));
  SL_RETURN_IF_ERROR(add_string_def<RegexFullMatchKernel>(reg, "RegexFullMatch", 20));
  SL_RETURN_IF_ERROR(add_string_def<StringEqualKernel>(reg, "Equal", 19));
  SL_RETURN_IF_ERROR(add_string_def<StringIdentityKernel>(reg, "Identity", 1));
  // Cast and CastLike from strings; to strings, cast.cc hands the node to make_string_cast.
  for (auto [op, since, like] : {std::tuple{"Cast", 6, false}, std::tuple{"CastLike", 15, true}}) {
    KernelDef def;
    def.op = op;
    def.since_version = since;
    def.dtype = DType::kString;
    def.provider = "cpu";
    def.create = [like = like](const KernelCreateArgs& a) { return make_string_cast(a, like); };
    SL_RETURN_IF_ERROR(reg.add(std::move(def)));
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu
