// Greedy generation: the load-time checks of a generator model, the checks of one request, and the
// step loop through a real ServerCore on a tiny decoder whose next token is (last + 1) % 8.

#include "serve/generate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "serve/repository.h"
#include "serve/server_core.h"
#include "serve_test_util.h"

namespace streamline::serve {
namespace {

using testing::TempRepo;

constexpr int kVocab = 8;

// input_ids int64 [B, S] -> logits [B, S, 8] = Gather(E, input_ids), E[i] = one_hot((i + 1) % 8).
std::string successor_onnx() {
  std::vector<float> e(kVocab * kVocab, 0.f);
  for (int i = 0; i < kVocab; ++i) e[static_cast<size_t>(i * kVocab + (i + 1) % kVocab)] = 1.f;
  graph::testing::OnnxModel m(13);
  m.input("input_ids", onnx::TensorProto::INT64, {"B", "S"});
  m.initializer(graph::testing::float_tensor("E", {kVocab, kVocab}, e));
  m.node("Gather", "gather", {"E", "input_ids"}, {"logits"});
  m.output("logits", onnx::TensorProto::FLOAT, {"B", "S", "8"});
  return m.bytes();
}

std::string generator_config(const std::string& name, bool decoupled, const std::string& extra = "") {
  return "name: \"" + name + "\"\nmax_batch_size: 0\n" +
         (decoupled ? "model_transaction_policy { decoupled: true }\n" : "") +
         "parameters { key: \"threads\" value: { string_value: \"1\" } }\n"
         "parameters { key: \"generate\" value: { string_value: \"greedy\" } }\n" +
         extra;
}

struct Outcome {
  std::vector<int64_t> tokens, indices;
  Status status;
  int lasts = 0;
};

// Runs one generation to its end.
Outcome run(ServerCore& core, GenerateJob job) {
  std::promise<void> done;
  Outcome out;
  std::mutex mu;
  generate(core, std::move(job), [&](const Status& s, const GeneratedToken& t, bool last) {
    std::lock_guard<std::mutex> lock(mu);
    if (s.ok()) {
      out.tokens.push_back(t.token);
      out.indices.push_back(t.index);
    } else {
      out.status = s;
    }
    if (last && ++out.lasts == 1) done.set_value();
  });
  done.get_future().wait();
  std::lock_guard<std::mutex> lock(mu);
  return out;
}

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.write(
        "gen/config.pbtxt",
        generator_config("gen", true, "parameters { key: \"max_new_tokens\" value: { string_value: \"4\" } }\n"));
    dir_.write("gen/1/model.onnx", successor_onnx());
    dir_.write("not_decoupled/config.pbtxt", generator_config("not_decoupled", false));
    dir_.write("not_decoupled/1/model.onnx", successor_onnx());
    dir_.write("bad_mode/config.pbtxt",
               "model_transaction_policy { decoupled: true }\n"
               "parameters { key: \"generate\" value: { string_value: \"beam\" } }\n");
    dir_.write("bad_mode/1/model.onnx", successor_onnx());
    dir_.write("no_ids/config.pbtxt", generator_config("no_ids", true));
    dir_.write("no_ids/1/model.onnx", testing::matmul_relu_onnx());
    RepositoryOptions o;
    o.default_threads = 1;
    repo_ = std::make_unique<Repository>(dir_.path(), o);
    ASSERT_TRUE(repo_->load_all().ok());
  }
  GenerateJob job(std::vector<int64_t> prompt, int64_t max_new, int64_t eos = -1) {
    auto m = repo_->get("gen");
    EXPECT_TRUE(m.ok());
    GenerateJob j;
    j.model = "gen";
    j.version = "1";
    j.spec = (*m)->generator;
    j.prompt = std::move(prompt);
    j.max_new_tokens = max_new;
    j.eos_token_id = eos;
    return j;
  }
  std::string reason(const std::string& name) const {
    for (const auto& e : repo_->index())
      if (e.name == name) return e.reason;
    return "(not in the index)";
  }
  TempRepo dir_;
  std::unique_ptr<Repository> repo_;
};

TEST_F(GenerateTest, LoadReadsTheSpecAndRefusesModelsThatDoNotFit) {
  auto m = repo_->get("gen");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE((*m)->generator.enabled);
  EXPECT_EQ((*m)->generator.max_new_tokens, 4);
  EXPECT_EQ((*m)->generator.eos_token_id, -1);
  EXPECT_EQ((*m)->generator.ids_dtype, DType::kInt64);
  EXPECT_FALSE((*m)->generator.has_attention_mask);
  EXPECT_NE(reason("not_decoupled").find("decoupled"), std::string::npos) << reason("not_decoupled");
  EXPECT_NE(reason("not_decoupled").find("not_decoupled"), std::string::npos) << reason("not_decoupled");
  EXPECT_NE(reason("bad_mode").find("greedy"), std::string::npos) << reason("bad_mode");
  EXPECT_NE(reason("no_ids").find("input_ids"), std::string::npos) << reason("no_ids");
}

TEST_F(GenerateTest, StepsFollowTheModelAndStopAtMaxOrEos) {
  ServerCore core(*repo_, {});
  Outcome a = run(core, job({6}, 4));
  ASSERT_TRUE(a.status.ok()) << a.status.message();
  EXPECT_EQ(a.tokens, (std::vector<int64_t>{7, 0, 1, 2}));
  EXPECT_EQ(a.indices, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(a.lasts, 1);
  Outcome b = run(core, job({1, 2}, 10, /*eos=*/5));
  ASSERT_TRUE(b.status.ok()) << b.status.message();
  EXPECT_EQ(b.tokens, (std::vector<int64_t>{3, 4, 5}));
}

TEST_F(GenerateTest, StoppedClientEndsTheGenerationWithCancelled) {
  ServerCore core(*repo_, {});
  GenerateJob j = job({0}, 100);
  auto calls = std::make_shared<std::atomic<int>>(0);
  j.stopped = [calls] { return calls->fetch_add(1) >= 3; };  // gone before the fourth step
  Outcome o = run(core, std::move(j));
  EXPECT_EQ(o.tokens, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(o.status.code(), StatusCode::kCancelled) << o.status.message();
  EXPECT_EQ(o.lasts, 1);
}

TEST_F(GenerateTest, DrainingServerAnswersTheGenerationWithAnError) {
  ServerCore core(*repo_, {});
  EXPECT_TRUE(core.drain(std::chrono::milliseconds(0)));
  Outcome o = run(core, job({0}, 5));
  EXPECT_TRUE(o.tokens.empty());
  EXPECT_EQ(o.status.code(), StatusCode::kUnavailable) << o.status.message();
  EXPECT_EQ(o.lasts, 1);
}

TEST_F(GenerateTest, RequestChecksNameTheMisfit) {
  auto m = repo_->get("gen");
  ASSERT_TRUE(m.ok());
  const GeneratorSpec& spec = (*m)->generator;
  auto request = [](Tensor ids) {
    InferRequest r;
    r.inputs.emplace(kInputIds, std::move(ids));
    return r;
  };
  auto ok = generate_job("gen", spec, request(Tensor::from_vector<int64_t>(Shape{1, 2}, {3, 4})), 2, std::nullopt);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->prompt, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(ok->max_new_tokens, 2);
  InferRequest urgent = request(Tensor::from_vector<int64_t>(Shape{1, 1}, {3}));
  urgent.priority = 0;
  urgent.timeout_us = 500;
  auto u = generate_job("gen", spec, urgent, std::nullopt, 7);
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->priority, 0);
  EXPECT_EQ(u->timeout_us, 500);
  EXPECT_EQ(u->eos_token_id, 7);
  EXPECT_EQ(generate_job("gen", spec, request(Tensor::from_vector<int64_t>(Shape{1, 1}, {3})), {}, {})->max_new_tokens,
            4);
  struct Bad {
    InferRequest r;
    std::optional<int64_t> max_new;
    const char* word;
  };
  InferRequest extra = request(Tensor::from_vector<int64_t>(Shape{1, 1}, {1}));
  extra.inputs.emplace("attention_mask", Tensor::from_vector<int64_t>(Shape{1, 1}, {1}));
  InferRequest wrong_output = request(Tensor::from_vector<int64_t>(Shape{1, 1}, {1}));
  wrong_output.requested_outputs = {"logits"};
  std::vector<Bad> bad;
  bad.push_back({request(Tensor::from_vector<int32_t>(Shape{1, 2}, {1, 2})), {}, "int64"});
  bad.push_back({request(Tensor::from_vector<int64_t>(Shape{2}, {1, 2})), {}, "[1, seq]"});
  bad.push_back({request(Tensor::from_vector<int64_t>(Shape{2, 1}, {1, 2})), {}, "one sequence"});
  bad.push_back({request(Tensor::empty(DType::kInt64, Shape{1, 0})), {}, "seq >= 1"});
  bad.push_back({std::move(extra), {}, "attention_mask"});
  bad.push_back({std::move(wrong_output), {}, "logits"});
  bad.push_back({request(Tensor::from_vector<int64_t>(Shape{1, 1}, {1})), 0, "max_new_tokens"});
  bad.push_back({request(Tensor::from_vector<int64_t>(Shape{1, 1}, {1})), kMaxNewTokensLimit + 1, "max_new_tokens"});
  for (const Bad& b : bad) {
    auto r = generate_job("gen", spec, b.r, b.max_new, std::nullopt);
    ASSERT_FALSE(r.ok()) << b.word;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(b.word), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("'gen'"), std::string::npos) << r.status().message();
  }
}

TEST(GenerateConfig, ParametersAreCheckedWhenTheConfigIsParsed) {
  const std::string head = "parameters { key: \"generate\" value: { string_value: \"greedy\" } }\n";
  auto param = [](const std::string& key, const std::string& value) {
    return "parameters { key: \"" + key + "\" value: { string_value: \"" + value + "\" } }\n";
  };
  EXPECT_TRUE(parse_model_config(head + param("max_new_tokens", "4096") + param("eos_token_id", "0"), "g").ok());
  for (const auto& [text, word] :
       std::vector<std::pair<std::string, std::string>>{{head + param("max_new_tokens", "0"), "max_new_tokens"},
                                                        {head + param("max_new_tokens", "4097"), "max_new_tokens"},
                                                        {head + param("eos_token_id", "-3"), "eos_token_id"},
                                                        {param("generate", "sample"), "greedy"}}) {
    auto c = parse_model_config(text, "gen/config.pbtxt");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.status().message().find(word), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("gen/config.pbtxt"), std::string::npos) << c.status().message();
  }
}

TEST(Argmax, FirstOfEqualsAndNanNeverWins) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float a[] = {1.f, 3.f, 3.f, 2.f};
  EXPECT_EQ(argmax(a, 4), 1);
  const float b[] = {nan, -5.f, nan, -1.f};
  EXPECT_EQ(argmax(b, 4), 3);
  const float c[] = {-2.f};
  EXPECT_EQ(argmax(c, 1), 0);
}

}  // namespace
}  // namespace streamline::serve
