// Tests of the conformance runner: tensor comparison, the child's result line, case discovery,
// and whole runs of small generated cases through child processes (pass, fail, unsupported,
// timeout, crash).

#include <gtest/gtest.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "conformance_case.h"
#include "conformance_runner.h"
#include "conformance_values.h"

namespace streamline::tools {
namespace {

namespace fs = std::filesystem;

// A folder under the system temp dir, removed when the test ends.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("sl_conformance_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_bytes(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

onnx::TensorProto float_proto(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  for (float x : v) t.add_float_data(x);
  return t;
}

struct CaseSpec {
  std::string op = "Relu";
  int opset = 13;
  bool sequence_input = false;
  std::vector<float> x{-1.f, 2.f, -3.f, 4.f, 0.5f, -0.5f};
  std::vector<float> y{0.f, 2.f, 0.f, 4.f, 0.5f, 0.f};
  bool name_tensors = true;
};

// Writes DIR/model.onnx (one node X -> Y over float[2,3]) and DIR/test_data_set_0/.
void write_case(const fs::path& dir, const CaseSpec& s) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(s.opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* n = g->add_node();
  n->set_op_type(s.op);
  n->add_input("x");
  n->add_output("y");
  auto set_type = [](onnx::TypeProto* t) {
    auto* tt = t->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_value(2);
    tt->mutable_shape()->add_dim()->set_dim_value(3);
  };
  auto* in = g->add_input();
  in->set_name("x");
  if (s.sequence_input)
    set_type(in->mutable_type()->mutable_sequence_type()->mutable_elem_type());
  else
    set_type(in->mutable_type());
  auto* out = g->add_output();
  out->set_name("y");
  set_type(out->mutable_type());
  write_bytes(dir / "model.onnx", m.SerializeAsString());
  write_bytes(dir / "test_data_set_0" / "input_0.pb",
              float_proto(s.name_tensors ? "x" : "", {2, 3}, s.x).SerializeAsString());
  write_bytes(dir / "test_data_set_0" / "output_0.pb",
              float_proto(s.name_tensors ? "y" : "", {2, 3}, s.y).SerializeAsString());
}

Tensor floats(std::vector<float> v) {
  return Tensor::from_vector<float>(Shape{static_cast<int64_t>(v.size())}, v);
}

TEST(CompareTensors, FloatsWithinNumpyIscloseTolerance) {
  EXPECT_EQ(compare_tensors(floats({1.f, 100.f, 0.f}), floats({1.f, 100.09f, 5e-8f})), "");
  const std::string d = compare_tensors(floats({1.f, 100.f, 0.f}), floats({1.f, 100.2f, 0.f}));
  EXPECT_NE(d.find("1 of 3 values differ"), std::string::npos) << d;
  EXPECT_NE(d.find("at index 1 (expected 100, got 100.199997)"), std::string::npos) << d;
  // atol alone: 1e-6 off an expected 0 is outside 1e-7.
  EXPECT_NE(compare_tensors(floats({0.f}), floats({1e-6f})), "");
}

TEST(CompareTensors, NanEqualsNanOnlyAtTheSamePosition) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(compare_tensors(floats({nan, 1.f, inf}), floats({nan, 1.f, inf})), "");
  EXPECT_NE(compare_tensors(floats({nan, 1.f}), floats({1.f, 1.f})), "");
  EXPECT_NE(compare_tensors(floats({1.f, 1.f}), floats({1.f, nan})), "");
  EXPECT_NE(compare_tensors(floats({inf}), floats({-inf})), "");
}

TEST(CompareTensors, IntegersAndBoolsExact) {
  auto i64 = [](std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(Shape{2}, v); };
  EXPECT_EQ(compare_tensors(i64({1, int64_t{1} << 60}), i64({1, int64_t{1} << 60})), "");
  const std::string d = compare_tensors(i64({1, int64_t{1} << 60}), i64({1, (int64_t{1} << 60) + 1}));
  EXPECT_NE(d.find("expected 1152921504606846976, got 1152921504606846977"), std::string::npos) << d;
  Tensor a = Tensor::empty(DType::kBool, Shape{2}), b = Tensor::empty(DType::kBool, Shape{2});
  a.data<uint8_t>()[1] = 1;
  EXPECT_NE(compare_tensors(a, b).find("expected true, got false"), std::string::npos);
}

TEST(CompareTensors, DtypeAndShapeMismatch) {
  EXPECT_EQ(compare_tensors(floats({1.f}), Tensor::from_vector<double>(Shape{1}, {1.0})),
            "dtype float64, expected float32");
  EXPECT_EQ(compare_tensors(floats({1.f, 2.f}), Tensor::from_vector<float>(Shape{1, 2}, {1.f, 2.f})),
            "shape [1,2], expected [2]");
}

TEST(CaseLine, RoundTripsAndFindsTheLastResultLine) {
  const std::string line = format_case_line({CaseStatus::kFailed, "out\t0\nbad"});
  EXPECT_EQ(line, "@@case\tfailed\tout 0 bad");
  auto o = parse_case_line("noise\n" + line + "\n");
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->status, CaseStatus::kFailed);
  EXPECT_EQ(o->detail, "out 0 bad");
  o = parse_case_line("@@case\tunsupported\tfirst\n@@case\tpassed\t\n");
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->status, CaseStatus::kPassed);
  EXPECT_FALSE(parse_case_line("").has_value());
  EXPECT_FALSE(parse_case_line("x @@case\tpassed\t\n").has_value());
  EXPECT_FALSE(parse_case_line("@@case\tgreat\t\n").has_value());
}

TEST(FindCases, NestedFoldersSortedAndTheCaseItself) {
  TempDir t;
  write_case(t.path() / "b" / "test_relu", {});
  write_case(t.path() / "a" / "x" / "test_relu", {});
  auto cases = find_cases(t.path().string());
  ASSERT_TRUE(cases.ok()) << cases.status().to_string();
  ASSERT_EQ(cases->size(), 2u);
  EXPECT_EQ((*cases)[0].name, "a/x/test_relu");
  EXPECT_EQ((*cases)[1].name, "b/test_relu");
  auto one = find_cases((t.path() / "b" / "test_relu").string());
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].name, "test_relu");
  // A link back up the tree is followed once, not in circles.
  fs::create_directory_symlink(t.path(), t.path() / "b" / "loop");
  auto again = find_cases(t.path().string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size(), 2u);
  EXPECT_EQ(find_cases((t.path() / "missing").string()).status().code(), StatusCode::kNotFound);
  fs::create_directories(t.path() / "empty");
  EXPECT_FALSE(find_cases((t.path() / "empty").string()).ok());
}

TEST(RunCaseInProcess, PassFailAndUnsupported) {
  TempDir t;
  write_case(t.path() / "pass", {});
  EXPECT_EQ(run_case_in_process((t.path() / "pass").string(), 1).status, CaseStatus::kPassed);
  CaseSpec unnamed;
  unnamed.name_tensors = false;
  write_case(t.path() / "unnamed", unnamed);
  EXPECT_EQ(run_case_in_process((t.path() / "unnamed").string(), 1).status, CaseStatus::kPassed);

  CaseSpec wrong;
  wrong.y[3] = 4.5f;
  write_case(t.path() / "wrong", wrong);
  CaseOutcome o = run_case_in_process((t.path() / "wrong").string(), 1);
  EXPECT_EQ(o.status, CaseStatus::kFailed);
  EXPECT_NE(o.detail.find("output 0 'y': 1 of 6 values differ; max abs error 0.5 at index 3 (expected 4.5, got 4)"),
            std::string::npos)
      << o.detail;

  CaseSpec seq;
  seq.sequence_input = true;
  write_case(t.path() / "seq", seq);
  o = run_case_in_process((t.path() / "seq").string(), 1);
  EXPECT_EQ(o.status, CaseStatus::kUnsupported);
  EXPECT_NE(o.detail.find("Relu"), std::string::npos) << o.detail;
  EXPECT_NE(o.detail.find("is a sequence of float32; this operator takes tensors"), std::string::npos) << o.detail;

  CaseSpec op;
  op.op = "NoSuchOpAnywhere";
  write_case(t.path() / "op", op);
  o = run_case_in_process((t.path() / "op").string(), 1);
  EXPECT_EQ(o.status, CaseStatus::kUnsupported);
  EXPECT_NE(o.detail.find("NoSuchOpAnywhere"), std::string::npos) << o.detail;
  EXPECT_EQ(case_op((t.path() / "op").string()), "NoSuchOpAnywhere");

  fs::remove(t.path() / "pass" / "test_data_set_0" / "input_0.pb");
  o = run_case_in_process((t.path() / "pass").string(), 1);
  EXPECT_EQ(o.status, CaseStatus::kError);
  EXPECT_NE(o.detail.find("no value for input 'x'"), std::string::npos) << o.detail;
  write_bytes(t.path() / "garbage" / "model.onnx", std::string("\xff\xff\xff\xff not a model", 17));
  EXPECT_EQ(run_case_in_process((t.path() / "garbage").string(), 1).status, CaseStatus::kError);
}

TEST(CompareTensors, StringsExact) {
  const Tensor a = Tensor::from_strings(Shape{3}, {"x", "y", "z"});
  EXPECT_EQ(compare_tensors(a, a.clone()), "");
  EXPECT_EQ(compare_tensors(a, Tensor::from_strings(Shape{3}, {"x", "Y", "Z"})),
            "2 of 3 strings differ; the first at index 1 (expected \"y\", got \"Y\")");
}

onnx::SequenceProto sequence_proto(const std::string& name, std::vector<onnx::TensorProto> items) {
  onnx::SequenceProto s;
  s.set_name(name);
  s.set_elem_type(onnx::SequenceProto::TENSOR);
  for (auto& t : items) *s.add_tensor_values() = t;
  return s;
}

TEST(Values, SequenceAndOptionalProtosReadAndCompare) {
  std::string name;
  const auto seq = sequence_proto("s", {float_proto("", {2}, {1.f, 2.f}), float_proto("", {1}, {3.f})});
  auto v = read_value_pb(seq.SerializeAsString(), ValueKind::kSequence, DType::kFloat32, "", "input_0.pb", &name);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(name, "s");
  ASSERT_TRUE(v->is_sequence());
  ASSERT_EQ(v->items().size(), 2u);
  EXPECT_EQ(v->items()[1].data<float>()[0], 3.f);
  EXPECT_EQ(compare_values(*v, *v), "");
  EXPECT_EQ(compare_values(*v, AnyValue::sequence({v->items()[0]}, DType::kFloat32)),
            "a sequence of 1 tensors, expected 2");
  EXPECT_EQ(compare_values(*v, AnyValue::sequence({v->items()[0], floats({4.f})}, DType::kFloat32)),
            "element 1: 1 of 1 values differ; max abs error 1 at index 0 (expected 3, got 4)");
  EXPECT_EQ(compare_values(*v, AnyValue(floats({1.f}))), "a float32 tensor, expected a sequence of float32");

  onnx::OptionalProto empty;
  empty.set_name("o");
  empty.set_elem_type(onnx::OptionalProto::SEQUENCE);
  auto none =
      read_value_pb(empty.SerializeAsString(), ValueKind::kOptionalSequence, DType::kFloat32, "", "o.pb", &name);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_TRUE(none->is_optional());
  EXPECT_FALSE(none->has_element());
  onnx::OptionalProto full = empty;
  *full.mutable_sequence_value() = seq;
  auto some = read_value_pb(full.SerializeAsString(), ValueKind::kOptionalSequence, DType::kFloat32, "", "o.pb", &name);
  ASSERT_TRUE(some.ok()) << some.status().to_string();
  ASSERT_TRUE(some->has_element());
  EXPECT_EQ(compare_values(*some, AnyValue::some(*v)), "");
  EXPECT_NE(compare_values(*some, *none).find("an empty optional"), std::string::npos);
  // Bytes that are no such message are an error naming the file.
  EXPECT_EQ(read_value_pb("\xff\xff\xff", ValueKind::kSequence, DType::kFloat32, "", "bad.pb", &name).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(RunCaseInProcess, SequenceInputsAndOptionalOutputs) {
  // x: sequence of float[?, 3] -> ConcatFromSequence(axis 0) -> y float; and Optional(y) -> o.
  TempDir t;
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* os = m.add_opset_import();
  os->set_version(16);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* cat = g->add_node();
  cat->set_op_type("ConcatFromSequence");
  cat->add_input("x");
  cat->add_output("y");
  auto* axis = cat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  auto* wrap = g->add_node();
  wrap->set_op_type("Optional");
  wrap->add_input("y");
  wrap->add_output("o");
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(1);
  auto* o = g->add_output();
  o->set_name("o");
  o->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  write_bytes(t.path() / "case" / "model.onnx", m.SerializeAsString());
  const fs::path set = t.path() / "case" / "test_data_set_0";
  const auto a = float_proto("", {1, 3}, {1, 2, 3}), b = float_proto("", {1, 3}, {4, 5, 6});
  write_bytes(set / "input_0.pb", sequence_proto("x", {a, b}).SerializeAsString());
  write_bytes(set / "output_0.pb", float_proto("y", {2, 3}, {1, 2, 3, 4, 5, 6}).SerializeAsString());
  onnx::OptionalProto want;
  want.set_name("o");
  want.set_elem_type(onnx::OptionalProto::TENSOR);
  *want.mutable_tensor_value() = float_proto("", {2, 3}, {1, 2, 3, 4, 5, 6});
  write_bytes(set / "output_1.pb", want.SerializeAsString());
  CaseOutcome out = run_case_in_process((t.path() / "case").string(), 1);
  EXPECT_EQ(out.status, CaseStatus::kPassed) << out.detail;
  // A wrong expected optional fails, saying where.
  *want.mutable_tensor_value() = float_proto("", {2, 3}, {1, 2, 3, 4, 5, 7});
  write_bytes(set / "output_1.pb", want.SerializeAsString());
  out = run_case_in_process((t.path() / "case").string(), 1);
  EXPECT_EQ(out.status, CaseStatus::kFailed);
  EXPECT_NE(out.detail.find("output 1 'o': 1 of 6 values differ"), std::string::npos) << out.detail;
}

TEST(CaseOp, ExpandedFunctionBodyNamesItsOp) {
  TempDir t;
  const fs::path dir = t.path() / "test_softmax_expanded";
  write_case(dir, {});
  onnx::ModelProto m;
  std::ifstream f(dir / "model.onnx", std::ios::binary);
  ASSERT_TRUE(m.ParseFromIstream(&f));
  m.mutable_graph()->mutable_node(0)->set_output(0, "Softmax_test_softmax_expanded_function_y");
  write_bytes(dir / "model.onnx", m.SerializeAsString());
  EXPECT_EQ(case_op(dir.string()), "Softmax");
  EXPECT_EQ(case_op((t.path() / "missing").string()), "?");
}

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_case(t_.path() / "test_pass", {});
    CaseSpec wrong;
    wrong.y[0] = 7.f;
    write_case(t_.path() / "test_wrong", wrong);
    CaseSpec op;
    op.op = "NoSuchOpAnywhere";
    write_case(t_.path() / "test_unsupported", op);
    auto cases = find_cases(t_.path().string());
    ASSERT_TRUE(cases.ok());
    cases_ = *cases;
    options_.exe = SL_STREAMLINE_BINARY;
    options_.jobs = 2;
  }
  TempDir t_;
  std::vector<CaseInfo> cases_;
  RunnerOptions options_;
};

TEST_F(RunnerTest, EachCaseInItsOwnProcess) {
  int done = 0;
  options_.on_done = [&](const CaseInfo&, const CaseOutcome&) { ++done; };
  const auto r = run_cases(cases_, options_);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(done, 3);
  EXPECT_EQ(r[0].info.name, "test_pass");
  EXPECT_EQ(r[0].outcome.status, CaseStatus::kPassed) << r[0].outcome.detail;
  EXPECT_EQ(r[1].outcome.status, CaseStatus::kUnsupported) << r[1].outcome.detail;
  EXPECT_EQ(r[2].outcome.status, CaseStatus::kFailed) << r[2].outcome.detail;
}

TEST_F(RunnerTest, TimeoutKillsTheChild) {
  options_.timeout_s = 0.001;
  for (const auto& r : run_cases(cases_, options_)) {
    EXPECT_EQ(r.outcome.status, CaseStatus::kCrashed);
    EXPECT_EQ(r.outcome.detail, "timeout after 0.001s");
  }
}

TEST_F(RunnerTest, SignalAndBadExitAreCrashes) {
  options_.memory_limit_mb = 1;  // the child cannot even map its libraries
  for (const auto& r : run_cases(cases_, options_)) {
    EXPECT_EQ(r.outcome.status, CaseStatus::kCrashed);
    EXPECT_TRUE(r.outcome.detail.find("signal") != std::string::npos ||
                r.outcome.detail.find("without a result") != std::string::npos)
        << r.outcome.detail;
  }
  options_.memory_limit_mb = 0;
  options_.exe = (t_.path() / "no_such_binary").string();
  for (const auto& r : run_cases(cases_, options_)) {
    EXPECT_EQ(r.outcome.status, CaseStatus::kCrashed);
    EXPECT_NE(r.outcome.detail.find("exited with code 127 without a result; stderr: exec failed"), std::string::npos)
        << r.outcome.detail;
  }
}

}  // namespace
}  // namespace streamline::tools
