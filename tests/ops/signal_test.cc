// DFT and TfIdfVectorizer: the CPU kernels against the reference on random inputs (fixed seed), the
// DFT-20 axis input and IRFFT against DFT-17 and the forward transform, and a TfIdfVectorizer case
// from the spec's examples by hand.

#include "ops/cpu/extra_common.h"
#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

TEST(Signal, DftMatchesReference) {
  std::mt19937 rng(1101);
  for (int iter = 0; iter < 16; ++iter) {
    const int64_t comp = iter % 3 == 0 ? 2 : 1;
    const bool onesided = comp == 1 && iter % 4 == 1;
    Shape s{1 + static_cast<int64_t>(rng() % 2), 1 + static_cast<int64_t>(rng() % 9),
            1 + static_cast<int64_t>(rng() % 4), comp};
    const int64_t axis = 1 + iter % 2;
    const bool with_len = iter % 5 == 2;
    Tensor x = random_tensor(s, rng);
    const Tensor len = Tensor::scalar<int64_t>(1 + static_cast<int64_t>(rng() % 10));
    const std::vector<Tensor> in = with_len ? std::vector<Tensor>{x, len} : std::vector<Tensor>{x};
    const std::vector<bool> constant = with_len ? std::vector<bool>{false, true} : std::vector<bool>{false};
    NodeCase nc("DFT", 17, in.size());
    // onesided with inverse is IRFFT (Dft20AxisInputAndIrfft), which the reference does not model.
    nc.i("axis", axis).i("inverse", onesided ? 0 : iter % 2).i("onesided", onesided ? 1 : 0);
    expect_cpu_matches_reference(nc, in, 1e-5, "DFT " + s.to_string(), 1, constant);
  }
}

// DFT-20 reads its axis from input 2 (default -2, the last signal axis) and gives the same result
// as DFT-17's attribute; IRFFT (onesided inverse) of an RFFT returns the real signal.
TEST(Signal, Dft20AxisInputAndIrfft) {
  std::mt19937 rng(1103);
  const Tensor x = random_tensor(Shape{2, 6, 5, 1}, rng);
  for (int64_t axis : {1, 2, -2, -3}) {
    NodeCase old("DFT", 17, 1), now("DFT", 20, 3, 1, {true, false, true});
    old.i("axis", axis);
    auto a = old.run(cpu_reg(), {x});
    auto b = now.run(cpu_reg(), {x, Tensor(), Tensor::scalar<int64_t>(axis)}, 1, {false, false, true});
    ASSERT_TRUE(a.ok() && b.ok()) << axis << ": " << a.status().to_string() << " " << b.status().to_string();
    EXPECT_TRUE(close_tensor((*b)[0], (*a)[0], 1e-6)) << axis;
  }
  // No axis input: -2, here axis 2.
  NodeCase def("DFT", 20, 1), last("DFT", 17, 1);
  last.i("axis", 2);
  auto d = def.run(cpu_reg(), {x});
  auto l = last.run(cpu_reg(), {x});
  ASSERT_TRUE(d.ok() && l.ok());
  EXPECT_TRUE(close_tensor((*d)[0], (*l)[0], 1e-6));
  // The complex dimension is no signal axis.
  EXPECT_FALSE(NodeCase("DFT", 20, 3, 1, {true, false, true})
                   .run(cpu_reg(), {x, Tensor(), Tensor::scalar<int64_t>(-1)}, 1, {false, false, true})
                   .ok());
  for (int64_t n : {6, 7}) {
    const Tensor sig = random_tensor(Shape{1, n, 1}, rng);
    NodeCase rfft("DFT", 20, 1), irfft("DFT", 20, 2);
    rfft.i("onesided", 1);
    irfft.i("onesided", 1).i("inverse", 1);
    auto spec = rfft.run(cpu_reg(), {sig});
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    ASSERT_EQ((*spec)[0].shape(), (Shape{1, n / 2 + 1, 2}));
    auto back = irfft.run(cpu_reg(), {(*spec)[0], Tensor::scalar<int64_t>(n)}, 1, {false, true});
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_TRUE(close_tensor((*back)[0], sig, 1e-5)) << n;
  }
}

TEST(Signal, TfIdfMatchesReference) {
  std::mt19937 rng(1102);
  const char* modes[] = {"TF", "IDF", "TFIDF"};
  for (int iter = 0; iter < 18; ++iter) {
    // Pool: 3 unigrams, 3 bigrams, 2 trigrams over tokens 0..4.
    const std::vector<int64_t> pool = {1, 2, 3, 1, 2, 2, 3, 4, 0, 1, 2, 3, 3, 3, 4};
    NodeCase nc("TfIdfVectorizer", 9, 1);
    const int64_t mn = 1 + iter % 3, mx = std::max<int64_t>(mn, 1 + (iter / 3) % 3);
    nc.i("min_gram_length", mn)
        .i("max_gram_length", mx)
        .i("max_skip_count", iter % 4)
        .s("mode", modes[iter % 3])
        .ints("ngram_counts", {0, 3, 9})
        .ints("ngram_indexes", {7, 6, 5, 4, 3, 2, 1, 0})
        .ints("pool_int64s", pool)
        .floats("weights", {0.5f, 1.f, 1.5f, 2.f, 2.5f, 3.f, 3.5f, 4.f});
    Tensor x = Tensor::empty(iter % 2 ? DType::kInt32 : DType::kInt64, iter % 2 ? Shape{2, 7} : Shape{9});
    for (int64_t i = 0; i < x.numel(); ++i) cpu::store_f(x.dtype(), x.raw(), i, static_cast<double>(rng() % 5));
    expect_cpu_matches_reference(nc, {x}, 0.0, "TfIdf " + std::to_string(iter));
  }
}

TEST(Signal, TfIdfOnlyBigramsSkipByHand) {
  // The spec's tf_batch_onlybigrams_skip5 example.
  NodeCase nc("TfIdfVectorizer", 9, 1);
  nc.i("min_gram_length", 2)
      .i("max_gram_length", 2)
      .i("max_skip_count", 5)
      .s("mode", "TF")
      .ints("ngram_counts", {0, 4})
      .ints("ngram_indexes", {0, 1, 2, 3, 4, 5, 6})
      .ints("pool_int64s", {2, 3, 5, 4, 5, 6, 7, 8, 6, 7});
  Tensor x = Tensor::from_vector<int32_t>(Shape{2, 6}, {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8});
  auto out = nc.run(cpu_reg(), {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values<float>((*out)[0]), (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}));
}

}  // namespace
}  // namespace streamline::ops::testing
