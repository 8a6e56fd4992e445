// Einsum: the CPU kernel against the reference on a table of equations (matmul, batched matmul,
// transposes, traces, diagonals, outer products, ellipses with broadcasting, three operands,
// implicit outputs) with random sizes and a fixed seed.

#include <map>

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

struct EqCase {
  const char* equation;
  std::vector<std::string> terms;  // letters per operand (for choosing shapes); '.' = one ellipsis dim
};

Tensor to_f64(const Tensor& t) {
  Tensor d = Tensor::empty(DType::kFloat64, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) d.data<double>()[i] = t.data<float>()[i];
  return d;
}

TEST(Einsum, MatchesReferenceOnEquationTable) {
  const std::vector<EqCase> cases = {
      {"ij,jk->ik", {"ij", "jk"}},
      {"bij,bjk->bik", {"bij", "bjk"}},
      {"ij->ji", {"ij"}},
      {"ii->i", {"ii"}},
      {"ii", {"ii"}},
      {"ij->", {"ij"}},
      {"i,i", {"i", "i"}},
      {"i,j->ij", {"i", "j"}},
      {"bii->bi", {"bii"}},
      {"...ij,...jk->...ik", {".ij", ".jk"}},
      {"ij,jk,kl->il", {"ij", "jk", "kl"}},
      {"ij,jk", {"ij", "jk"}},
      {"bhqd,bhkd->bhqk", {"bhqd", "bhkd"}},
      {"abc->cab", {"abc"}},
      {"ij,ij->i", {"ij", "ij"}},
      {"i...->...", {"i.."}},
      {"bn,anm,bm->ba", {"bn", "anm", "bm"}},
  };
  std::mt19937 rng(701);
  int iter = 0;
  for (const EqCase& c : cases) {
    for (int rep = 0; rep < 3; ++rep, ++iter) {
      std::map<char, int64_t> size;
      for (const auto& t : c.terms)
        for (char l : t)
          if (l != '.' && !size.count(l)) size[l] = std::uniform_int_distribution<int64_t>(1, 5)(rng);
      std::vector<Tensor> in;
      for (size_t i = 0; i < c.terms.size(); ++i) {
        Shape s;
        for (char l : c.terms[i]) s.push_back(l == '.' ? (rep == 2 && i == 0 ? 1 : 3) : size[l]);
        in.push_back(random_tensor(s, rng));
      }
      NodeCase nc("Einsum", 12, in.size());
      nc.s("equation", c.equation);
      expect_cpu_matches_reference(nc, in, 1e-5, c.equation);
      if (iter % 4 == 0) {
        std::vector<Tensor> d;
        for (const Tensor& t : in) d.push_back(to_f64(t));
        expect_cpu_matches_reference(nc, d, 1e-12, std::string(c.equation) + " f64");
      }
    }
  }
}

TEST(Einsum, RejectsMismatchedLabelSizesAndOperandCount) {
  std::mt19937 rng(702);
  NodeCase bad("Einsum", 12, 2);
  bad.s("equation", "ij,jk->ik");
  EXPECT_FALSE(bad.run(cpu_reg(), {random_tensor(Shape{2, 3}, rng), random_tensor(Shape{4, 2}, rng)}).ok());
  NodeCase count("Einsum", 12, 1);
  count.s("equation", "ij,jk->ik");
  EXPECT_FALSE(count.run(cpu_reg(), {random_tensor(Shape{2, 3}, rng)}).ok());
}

}  // namespace
}  // namespace streamline::ops::testing
