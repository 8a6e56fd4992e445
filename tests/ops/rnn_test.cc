// RNN, GRU and LSTM: the CPU kernels against the reference on random shapes (fixed seed) over
// directions, layouts, sequence_lens, initial states, peepholes, activations and clip.

#include "ops/op_test_util.h"

namespace streamline::ops::testing {
namespace {

struct RnnCase {
  const char* op;
  int gates;
};

constexpr RnnCase kCells[] = {{"RNN", 1}, {"GRU", 3}, {"LSTM", 4}};

TEST(Recurrent, MatchesReferenceOnRandomCases) {
  std::mt19937 rng(401);
  const char* directions[] = {"forward", "reverse", "bidirectional"};
  for (int iter = 0; iter < 54; ++iter) {
    const RnnCase cell = kCells[iter % 3];
    const char* dir = directions[(iter / 3) % 3];
    const int64_t dirs = std::string(dir) == "bidirectional" ? 2 : 1;
    const int64_t seq = std::uniform_int_distribution<int64_t>(1, 5)(rng);
    const int64_t batch = std::uniform_int_distribution<int64_t>(1, 4)(rng);
    const int64_t input = std::uniform_int_distribution<int64_t>(1, 6)(rng);
    const int64_t hidden = std::uniform_int_distribution<int64_t>(1, 7)(rng);
    const int64_t layout = (iter / 9) % 2;
    const bool with_bias = iter % 2 == 0;
    const bool with_lens = iter % 4 < 2;
    const bool with_init = iter % 5 != 0;
    const int64_t g = cell.gates;
    const Shape state = layout == 0 ? Shape{dirs, batch, hidden} : Shape{batch, dirs, hidden};
    std::vector<Tensor> in = {
        random_tensor(layout == 0 ? Shape{seq, batch, input} : Shape{batch, seq, input}, rng),
        random_tensor(Shape{dirs, g * hidden, input}, rng, -0.7f, 0.7f),
        random_tensor(Shape{dirs, g * hidden, hidden}, rng, -0.7f, 0.7f),
        with_bias ? random_tensor(Shape{dirs, 2 * g * hidden}, rng) : Tensor(),
        Tensor(),
        with_init ? random_tensor(state, rng) : Tensor(),
    };
    if (with_lens) {
      Tensor lens = Tensor::empty(DType::kInt32, Shape{batch});
      for (int64_t b = 0; b < batch; ++b)
        lens.data<int32_t>()[b] = static_cast<int32_t>(std::uniform_int_distribution<int64_t>(0, seq)(rng));
      in[4] = lens;
    }
    size_t outputs = 2;
    if (g == 4) {
      in.push_back(with_init ? random_tensor(state, rng) : Tensor());
      in.push_back(iter % 3 == 2 ? random_tensor(Shape{dirs, 3 * hidden}, rng) : Tensor());
      outputs = 3;
    }
    std::vector<bool> present;
    for (const Tensor& t : in) present.push_back(t.defined());
    NodeCase nc(cell.op, 14, in.size(), outputs, present);
    nc.i("hidden_size", hidden).s("direction", dir).i("layout", layout);
    if (g == 3) nc.i("linear_before_reset", iter % 2);
    if (g == 4 && iter % 7 == 0) nc.i("input_forget", 1);
    if (iter % 6 == 1) nc.f("clip", 0.8f);
    if (iter % 8 == 3) {
      std::vector<std::string> acts = g == 1   ? std::vector<std::string>{"Relu"}
                                      : g == 3 ? std::vector<std::string>{"HardSigmoid", "LeakyRelu"}
                                               : std::vector<std::string>{"HardSigmoid", "Elu", "Softsign"};
      nc.strings("activations", acts).floats("activation_alpha", {0.3f, 0.05f}).floats("activation_beta", {0.4f});
    }
    std::vector<Tensor> args = in;
    expect_cpu_matches_reference(nc, args, 2e-5,
                                 std::string(cell.op) + " " + dir + " seq " + std::to_string(seq) + " batch " +
                                     std::to_string(batch) + " layout " + std::to_string(layout),
                                 iter % 2 ? 2 : 1);
  }
}

TEST(Recurrent, MissingStateOutputsAreFine) {
  std::mt19937 rng(402);
  NodeCase nc("LSTM", 14, 3, 1);
  nc.i("hidden_size", 3);
  expect_cpu_matches_reference(
      nc,
      {random_tensor(Shape{4, 2, 5}, rng), random_tensor(Shape{1, 12, 5}, rng), random_tensor(Shape{1, 12, 3}, rng)},
      2e-5);
}

TEST(Recurrent, RejectsBadSequenceLength) {
  std::mt19937 rng(403);
  Tensor lens = Tensor::from_vector<int32_t>(Shape{2}, {1, 9});
  NodeCase nc("GRU", 14, 5, 2);
  nc.i("hidden_size", 2);
  auto out = nc.run(cpu_reg(), {random_tensor(Shape{3, 2, 2}, rng), random_tensor(Shape{1, 6, 2}, rng),
                                random_tensor(Shape{1, 6, 2}, rng), Tensor(), lens});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

TEST(Recurrent, RejectsWrongWeightShapeAndUnknownActivation) {
  std::mt19937 rng(404);
  NodeCase bad_w("RNN", 14, 3, 1);
  bad_w.i("hidden_size", 3);
  EXPECT_FALSE(bad_w
                   .run(cpu_reg(), {random_tensor(Shape{2, 1, 2}, rng), random_tensor(Shape{1, 4, 2}, rng),
                                    random_tensor(Shape{1, 3, 3}, rng)})
                   .ok());
  NodeCase bad_act("RNN", 14, 3, 1);
  bad_act.i("hidden_size", 3).strings("activations", {"Cube"});
  EXPECT_FALSE(bad_act
                   .run(cpu_reg(), {random_tensor(Shape{2, 1, 2}, rng), random_tensor(Shape{1, 3, 2}, rng),
                                    random_tensor(Shape{1, 3, 3}, rng)})
                   .ok());
}

}  // namespace
}  // namespace streamline::ops::testing
