// Reference Einsum: one loop over every combination of label values (output labels and summed
// labels); each combination adds the product of the operands' elements. Explicit and implicit
// equations, ellipses (right-aligned, broadcasting size 1), repeated labels.

#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "ops/reference/ref_math_util.h"
#include "ops/reference/reference.h"

namespace streamline::ops::reference {
namespace {

using math_util::prefix;
using math_util::read_f;
using math_util::write_f;

struct Parsed {
  std::vector<std::vector<char>> terms;  // per operand, one label per axis ('0'+k for ellipsis dim k)
  std::vector<char> out;
  std::map<char, int64_t> size;
};

Result<Parsed> parse(const graph::Node& node, std::span<const Shape> shapes) {
  std::string eq;
  for (char c : node.attr_string("equation", ""))
    if (!std::isspace(static_cast<unsigned char>(c))) eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> raw;
  for (size_t s = 0;;) {
    const size_t c = lhs.find(',', s);
    raw.push_back(lhs.substr(s, c == std::string::npos ? std::string::npos : c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  if (raw.size() != shapes.size()) return invalid_argument(prefix(node) + "operand count");
  Parsed p;
  int64_t max_e = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    const std::string& t = raw[i];
    const size_t dots = t.find("...");
    const int64_t letters = static_cast<int64_t>(t.size()) - (dots == std::string::npos ? 0 : 3);
    const int64_t e = static_cast<int64_t>(shapes[i].rank()) - letters;
    max_e = std::max(max_e, e);
    std::vector<char> labels;
    for (size_t k = 0; k < t.size(); ++k) {
      if (dots != std::string::npos && k == dots) {
        for (int64_t j = 0; j < e; ++j) labels.push_back(static_cast<char>('0' + 0));  // fixed below
        k += 2;
        continue;
      }
      labels.push_back(t[k]);
    }
    // Ellipsis dims get '0' + (position counted so the last ellipsis dim is max_e - 1).
    if (dots != std::string::npos)
      for (int64_t j = 0; j < e; ++j) labels[dots + static_cast<size_t>(j)] = static_cast<char>('0' + j);
    p.terms.push_back(labels);
  }
  // Right-align ellipsis positions to max_e.
  for (size_t i = 0; i < p.terms.size(); ++i) {
    int64_t e = 0;
    for (char c : p.terms[i]) e += std::isdigit(static_cast<unsigned char>(c)) ? 1 : 0;
    for (char& c : p.terms[i])
      if (std::isdigit(static_cast<unsigned char>(c))) c = static_cast<char>(c + (max_e - e));
    for (size_t a = 0; a < p.terms[i].size(); ++a) {
      const char l = p.terms[i][a];
      const int64_t d = shapes[i][a];
      auto it = p.size.find(l);
      if (it == p.size.end() || it->second == 1) p.size[l] = d;
    }
  }
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    for (size_t k = 0; k < rhs.size(); ++k) {
      if (rhs.compare(k, 3, "...") == 0) {
        for (int64_t j = 0; j < max_e; ++j) p.out.push_back(static_cast<char>('0' + j));
        k += 2;
        continue;
      }
      p.out.push_back(rhs[k]);
    }
  } else {
    for (int64_t j = 0; j < max_e; ++j) p.out.push_back(static_cast<char>('0' + j));
    std::map<char, int> count;
    for (const auto& t : p.terms)
      for (char c : t)
        if (!std::isdigit(static_cast<unsigned char>(c))) ++count[c];
    for (const auto& [c, n] : count)
      if (n == 1) p.out.push_back(c);
  }
  return p;
}

class RefEinsumKernel final : public Kernel {
 public:
  explicit RefEinsumKernel(const graph::Node& node) : node_(node) {}

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    std::vector<Shape> shapes;
    for (const auto& i : in) shapes.push_back(i.shape);
    SL_ASSIGN_OR_RETURN(Parsed p, parse(node_, shapes));
    Shape out;
    for (char c : p.out) out.push_back(p.size[c]);
    ReshapeResult rr;
    rr.outputs.push_back({in[0].dtype, out});
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    std::vector<Shape> shapes;
    for (const auto& t : ctx.inputs) shapes.push_back(t.shape());
    SL_ASSIGN_OR_RETURN(Parsed p, parse(node_, shapes));
    std::vector<char> all = p.out;
    for (const auto& [c, s] : p.size)
      if (std::find(all.begin(), all.end(), c) == all.end()) all.push_back(c);
    std::map<char, int64_t> value;
    Tensor& y = ctx.outputs[0];
    std::vector<double> acc(static_cast<size_t>(y.numel()), 0.0);
    int64_t total = 1;
    for (char c : all) total *= p.size[c];
    for (int64_t it = 0; it < total; ++it) {
      int64_t rem = it;
      for (size_t k = all.size(); k-- > 0;) {
        value[all[k]] = rem % p.size[all[k]];
        rem /= p.size[all[k]];
      }
      double prod = 1.0;
      for (size_t i = 0; i < ctx.inputs.size(); ++i) {
        int64_t off = 0;
        for (size_t a = 0; a < p.terms[i].size(); ++a) {
          const int64_t d = shapes[i][a];
          off = off * d + (d == 1 ? 0 : value[p.terms[i][a]]);
        }
        prod *= read_f(ctx.inputs[i], off);
      }
      int64_t o = 0;
      for (char c : p.out) o = o * p.size[c] + value[c];
      acc[static_cast<size_t>(o)] += prod;
    }
    for (int64_t i = 0; i < y.numel(); ++i) write_f(y, i, acc[static_cast<size_t>(i)]);
    return ok_status();
  }

 private:
  graph::Node node_;
};

}  // namespace

Status register_einsum(KernelRegistry& reg) {
  return math_util::add_ref(reg, "Einsum", 12, [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<RefEinsumKernel>(a.node));
  });
}

}  // namespace streamline::ops::reference
