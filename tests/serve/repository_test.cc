// The model repository on a folder written by the test: each model loads or fails on its own,
// versions, get() errors, unload and reload.

#include "serve/repository.h"

#include <gtest/gtest.h>

#include "serve_test_util.h"

namespace streamline::serve {
namespace {

using testing::TempRepo;

const char* kGoodConfig = R"(name: "with_config"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: 500 }
parameters { key: "threads" value: { string_value: "1" } }
)";

const char* kBrokenConfig = R"(name: "broken_config"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_NOPE } ]
)";

class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model = testing::matmul_relu_onnx();
    dir_.write("with_config/config.pbtxt", kGoodConfig);
    dir_.write("with_config/1/model.onnx", model);
    dir_.write("no_config/1/model.onnx", model);
    dir_.write("no_config/3/model.onnx", model);
    dir_.mkdir("no_config/7");       // a version folder without a model is skipped
    dir_.mkdir("no_config/latest");  // not a version
    dir_.write("broken_config/config.pbtxt", kBrokenConfig);
    dir_.write("broken_config/1/model.onnx", model);
    dir_.write("corrupt/1/model.onnx", "this is not an ONNX model");
    dir_.mkdir("no_version/notes");
    dir_.write("README.md", "a file at the root is not a model");
    dir_.mkdir(".hidden/1");
  }
  RepositoryOptions options() const {
    RepositoryOptions o;
    o.default_threads = 1;
    return o;
  }
  static const RepositoryEntry* find(const std::vector<RepositoryEntry>& index, const std::string& name) {
    for (const auto& e : index)
      if (e.name == name) return &e;
    return nullptr;
  }
  TempRepo dir_;
};

TEST_F(RepositoryTest, EachModelLoadsOrFailsOnItsOwn) {
  Repository repo(dir_.path(), options());
  ASSERT_TRUE(repo.load_all().ok());
  const auto index = repo.index();
  ASSERT_EQ(index.size(), 5u);  // sorted by name; the file and the hidden folder are not models
  EXPECT_EQ(index[0].name, "broken_config");
  EXPECT_EQ(index[4].name, "with_config");

  const RepositoryEntry* good = find(index, "with_config");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->state, ModelState::kReady);
  EXPECT_EQ(good->version, "1");
  EXPECT_EQ(good->reason, "");

  const RepositoryEntry* derived = find(index, "no_config");
  ASSERT_TRUE(derived);
  EXPECT_EQ(derived->state, ModelState::kReady);
  EXPECT_EQ(derived->version, "3");  // the highest version holding model.onnx

  const RepositoryEntry* broken = find(index, "broken_config");
  ASSERT_TRUE(broken);
  EXPECT_EQ(broken->state, ModelState::kUnavailable);
  EXPECT_EQ(broken->reason.rfind("broken_config/config.pbtxt: line 3 col", 0), 0u) << broken->reason;
  EXPECT_NE(broken->reason.find("TYPE_NOPE"), std::string::npos) << broken->reason;

  const RepositoryEntry* corrupt = find(index, "corrupt");
  ASSERT_TRUE(corrupt);
  EXPECT_EQ(corrupt->state, ModelState::kUnavailable);
  EXPECT_EQ(corrupt->version, "1");
  EXPECT_FALSE(corrupt->reason.empty());

  const RepositoryEntry* none = find(index, "no_version");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->state, ModelState::kUnavailable);
  EXPECT_NE(none->reason.find("no version folder"), std::string::npos) << none->reason;

  EXPECT_EQ(model_state_name(ModelState::kReady), std::string("READY"));
  EXPECT_EQ(model_state_name(ModelState::kUnavailable), std::string("UNAVAILABLE"));
  EXPECT_EQ(repo.ready_models().size(), 2u);
}

// A config.pbtxt nested 20,000 deep: that model is unavailable with a located reason, at scan
// and on an explicit load, and the process and the other models are unharmed.
TEST_F(RepositoryTest, DeeplyNestedConfigFailsThatModelOnly) {
  std::string deep = "max_batch_size: 8\n";
  for (int i = 0; i < 20000; ++i) deep += "foo { ";
  for (int i = 0; i < 20000; ++i) deep += "} ";
  dir_.write("deep/config.pbtxt", deep);
  dir_.write("deep/1/model.onnx", testing::matmul_relu_onnx());
  Repository repo(dir_.path(), options());
  ASSERT_TRUE(repo.load_all().ok());
  const auto index = repo.index();
  const RepositoryEntry* e = find(index, "deep");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->state, ModelState::kUnavailable);
  EXPECT_EQ(e->reason.rfind("deep/config.pbtxt: line 2 col ", 0), 0u) << e->reason;
  EXPECT_NE(e->reason.find("nested deeper than 64 levels"), std::string::npos) << e->reason;
  const Status again = repo.load("deep");
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.message().find("model 'deep': deep/config.pbtxt: line 2"), std::string::npos) << again.message();
  EXPECT_TRUE(repo.get("with_config").ok());
}

TEST_F(RepositoryTest, ConfigAndDefaultsReachTheRuntime) {
  RepositoryOptions o = options();
  o.default_instances = 3;
  Repository repo(dir_.path(), o);
  ASSERT_TRUE(repo.load_all().ok());
  auto with = repo.get("with_config");
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  EXPECT_EQ((*with)->serving->options().instances, 2);  // the config's instance_group wins
  EXPECT_EQ((*with)->serving->options().batching.max_batch_size, 8);
  EXPECT_EQ((*with)->serving->options().batching.max_queue_delay_us, 500);
  EXPECT_EQ((*with)->serving->threads_per_instance(), 1);
  EXPECT_EQ((*with)->config.outputs.size(), 2u);  // completed from the model
  EXPECT_EQ((*with)->path, dir_.path() + "/with_config/1/model.onnx");

  auto derived = repo.get("no_config");
  ASSERT_TRUE(derived.ok());
  EXPECT_EQ((*derived)->serving->options().instances, 3);  // the repository default
  EXPECT_EQ((*derived)->config.max_batch_size, 8);
  EXPECT_EQ((*derived)->serving->options().batching.max_batch_size, 1);
}

TEST_F(RepositoryTest, GetErrors) {
  Repository repo(dir_.path(), options());
  ASSERT_TRUE(repo.load_all().ok());
  auto unknown = repo.get("nope");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);

  auto broken = repo.get("broken_config");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(broken.status().message().find("config.pbtxt: line 3"), std::string::npos) << broken.status().message();

  auto old_version = repo.get("no_config", "1");
  ASSERT_FALSE(old_version.ok());
  EXPECT_EQ(old_version.status().code(), StatusCode::kNotFound);
  auto served = repo.get("no_config", "3");
  ASSERT_TRUE(served.ok());
  EXPECT_EQ((*served)->version, "3");

  EXPECT_EQ(repo.load("../escape").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.load("a/b").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.load("").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(repo.load("missing").code(), StatusCode::kNotFound);
  EXPECT_EQ(repo.unload("missing").code(), StatusCode::kNotFound);
  EXPECT_EQ(repo.index().size(), 5u);  // refused names leave no entry behind

  Repository nowhere(dir_.path() + "/does_not_exist", options());
  EXPECT_EQ(nowhere.load_all().code(), StatusCode::kNotFound);
}

TEST_F(RepositoryTest, NameMustMatchFolder) {
  dir_.write("renamed/config.pbtxt", "name: \"something_else\"\n");
  dir_.write("renamed/1/model.onnx", testing::matmul_relu_onnx());
  Repository repo(dir_.path(), options());
  Status s = repo.load("renamed");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  const auto index = repo.index();
  ASSERT_EQ(index.size(), 1u);
  EXPECT_EQ(index[0].state, ModelState::kUnavailable);
  EXPECT_NE(index[0].reason.find("does not match the model folder 'renamed'"), std::string::npos) << index[0].reason;
}

TEST_F(RepositoryTest, UnloadAndReload) {
  Repository repo(dir_.path(), options());
  ASSERT_TRUE(repo.load("no_config").ok());
  auto held = repo.get("no_config");
  ASSERT_TRUE(held.ok());

  InferRequest req;
  req.inputs["x"] = testing::random_input(2, 11);
  InferResponse before = (*held)->serving->infer(req);
  ASSERT_TRUE(before.status.ok()) << before.status.to_string();

  ASSERT_TRUE(repo.unload("no_config").ok());
  auto gone = repo.get("no_config");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable);
  ASSERT_EQ(repo.index().size(), 1u);
  EXPECT_EQ(repo.index()[0].state, ModelState::kUnavailable);
  EXPECT_EQ(repo.index()[0].reason, "unloaded");
  EXPECT_TRUE(repo.unload("no_config").ok());  // already unloaded: nothing to do
  // The holder's model stays valid but takes no more requests.
  InferResponse after = (*held)->serving->infer(req);
  EXPECT_EQ(after.status.code(), StatusCode::kUnavailable);

  ASSERT_TRUE(repo.load("no_config").ok());
  auto again = repo.get("no_config");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->version, "3");

  // A new version appears: load() replaces the served one once the new one is ready.
  dir_.write("no_config/12/model.onnx", testing::matmul_relu_onnx());
  ASSERT_TRUE(repo.load("no_config").ok());
  auto newest = repo.get("no_config");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ((*newest)->version, "12");  // numeric order, not text order
  EXPECT_EQ((*again)->serving->infer(req).status.code(), StatusCode::kUnavailable);
  InferResponse r = (*newest)->serving->infer(req);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  std::vector<float> x(req.inputs["x"].data<float>(), req.inputs["x"].data<float>() + 2 * testing::kIn), h, y;
  testing::matmul_relu_reference(x, 2, &h, &y);
  const Tensor& out = r.outputs.at("y");
  ASSERT_EQ(out.numel(), 2 * testing::kOut);
  for (int i = 0; i < out.numel(); ++i) EXPECT_NEAR(out.data<float>()[i], y[static_cast<size_t>(i)], 1e-5f);

  // A failed reload keeps the served version.
  dir_.write("no_config/config.pbtxt", "max_batch_size: -3\n");
  Status s = repo.load("no_config");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("max_batch_size must be >= 0"), std::string::npos) << s.message();
  auto still = repo.get("no_config");
  ASSERT_TRUE(still.ok());
  EXPECT_EQ((*still)->version, "12");
  EXPECT_EQ(repo.index()[0].state, ModelState::kReady);
}

}  // namespace
}  // namespace streamline::serve
