// String kernels (StringNormalizer, StringConcat, StringSplit, RegexFullMatch, Equal, Cast) and
// ai.onnx.ml LabelEncoder, against the ONNX specification's examples and Python's str methods.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ops/op_test_util.h"

namespace streamline::ops {
namespace {

using testing::fails_with;
using testing::NodeSpec;
using testing::one_int;
using testing::run_node;
using testing::str;
using testing::strs;
using testing::tensor_attr;

Tensor strings(const Shape& s, std::vector<std::string> v) {
  return Tensor::from_strings(s, v);
}

std::vector<std::string> strings_of(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kString);
  return {t.strings(), t.strings() + t.numel()};
}

Result<Tensor> one(const NodeSpec& spec, const std::vector<AnyValue>& in, size_t output = 0) {
  SL_ASSIGN_OR_RETURN(std::vector<AnyValue> outs, run_node(spec, in));
  return outs[output].tensor();
}

TEST(StringNormalizer, StopwordsThenCase) {
  const Tensor x = strings(Shape{5}, {"Monday", "tuesday", "MONDAY", "caf\xc3\xa9", "wednesday"});
  // Case-insensitive stopwords (the default), then upper case, UTF-8 included.
  auto up =
      one({"StringNormalizer", "", 10, {{"case_change_action", str("UPPER")}, {"stopwords", strs({"monday"})}}}, {x});
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  EXPECT_EQ(strings_of(*up), (std::vector<std::string>{"TUESDAY", "CAF\xc3\x89", "WEDNESDAY"}));
  // Case-sensitive: only the exact word goes.
  auto exact =
      one({"StringNormalizer",
           "",
           10,
           {{"is_case_sensitive", one_int(1)}, {"case_change_action", str("LOWER")}, {"stopwords", strs({"MONDAY"})}}},
          {x});
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(strings_of(*exact), (std::vector<std::string>{"monday", "tuesday", "caf\xc3\xa9", "wednesday"}));
  // [1, C] keeps its leading 1; removing everything leaves one empty string.
  auto all =
      one({"StringNormalizer", "", 10, {{"stopwords", strs({"a", "b"})}}}, {strings(Shape{1, 3}, {"A", "b", "a"})});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->shape(), (Shape{1, 1}));
  EXPECT_EQ(strings_of(*all), (std::vector<std::string>{""}));
  EXPECT_TRUE(fails_with(one({"StringNormalizer", "", 10}, {strings(Shape{2, 2}, {})}).status(),
                         StatusCode::kInvalidArgument, {"[C] or [1, C]"}));
  EXPECT_TRUE(fails_with(one({"StringNormalizer", "", 10, {{"case_change_action", str("TITLE")}}}, {x}).status(),
                         StatusCode::kInvalidArgument, {"StringNormalizer 'node0'", "TITLE"}));
}

TEST(StringConcat, Broadcasts) {
  auto y = one({"StringConcat", "", 20}, {strings(Shape{2, 1}, {"a", "b"}), strings(Shape{3}, {"1", "", "\xc3\xa9"})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (Shape{2, 3}));
  EXPECT_EQ(strings_of(*y), (std::vector<std::string>{"a1", "a", "a\xc3\xa9", "b1", "b", "b\xc3\xa9"}));
  EXPECT_TRUE(fails_with(one({"StringConcat", "", 20}, {strings(Shape{2}, {}), strings(Shape{3}, {})}).status(),
                         StatusCode::kInvalidArgument, {"StringConcat 'node0'"}));
}

TEST(StringSplit, FollowsPythonStrSplit) {
  struct Case {
    std::string text, delimiter;
    int64_t maxsplit;
    std::vector<std::string> want;  // Python: text.split(delimiter or None, maxsplit)
  };
  const std::vector<Case> cases = {
      {"  hello   world ! ", "", -1, {"hello", "world", "!"}},
      {"", "", -1, {}},
      {"   ", "", -1, {}},
      {"a b  c  ", "", 1, {"a", "b  c  "}},
      {"the quick brown fox", "", 2, {"the", "quick", "brown fox"}},
      {"o-n-n--x-", "-", -1, {"o", "n", "n", "", "x", ""}},
      {"", ".", -1, {""}},
      {"a.b.c", ".", 1, {"a", "b.c"}},
      {"a::b::", "::", -1, {"a", "b", ""}},
      {"abc", "abc", -1, {"", ""}},
      {"a\tb\nc", "", 0, {"a\tb\nc"}},
  };
  for (const Case& c : cases) {
    std::map<std::string, graph::Attribute> attrs;
    if (!c.delimiter.empty()) attrs["delimiter"] = str(c.delimiter);
    if (c.maxsplit >= 0) attrs["maxsplit"] = one_int(c.maxsplit);
    auto outs = run_node({"StringSplit", "", 20, attrs, 2}, {strings(Shape{1}, {c.text})});
    ASSERT_TRUE(outs.ok()) << outs.status().to_string();
    const Tensor& y = (*outs)[0].tensor();
    const Tensor& z = (*outs)[1].tensor();
    ASSERT_EQ(y.shape(), (Shape{1, static_cast<int64_t>(c.want.size())})) << "'" << c.text << "'";
    EXPECT_EQ(strings_of(y), c.want) << "'" << c.text << "'";
    EXPECT_EQ(z.data<int64_t>()[0], static_cast<int64_t>(c.want.size()));
  }
  // Rows pad with "" to the longest; an empty input gives [0, 0].
  auto outs = run_node({"StringSplit", "", 20, {}, 2}, {strings(Shape{2}, {"a b c", "d"})});
  ASSERT_TRUE(outs.ok());
  EXPECT_EQ(strings_of((*outs)[0].tensor()), (std::vector<std::string>{"a", "b", "c", "d", "", ""}));
  EXPECT_EQ((*outs)[1].tensor().data<int64_t>()[1], 1);
  auto none = run_node({"StringSplit", "", 20, {}, 2}, {strings(Shape{0}, {})});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ((*none)[0].tensor().shape(), (Shape{0, 0}));
}

TEST(RegexFullMatch, MatchesWholeStringsInRe2Syntax) {
  NodeSpec spec{"RegexFullMatch", "", 20, {{"pattern", str(R"(www\.[\w.-]+\.\bcom\b)")}}};
  auto y = one(spec, {strings(Shape{4}, {"www.google.com", "www.bbc.co.uk", "xwww.google.com", "www.a.com "})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kBool);
  const std::vector<uint8_t> got(y->data<uint8_t>(), y->data<uint8_t>() + 4);
  EXPECT_EQ(got, (std::vector<uint8_t>{1, 0, 0, 0}));
  // A pattern that backtracking engines take exponential time on stays linear in RE2.
  auto nested = one({"RegexFullMatch", "", 20, {{"pattern", str("(a+)+$")}}},
                    {strings(Shape{1}, {std::string(20000, 'a') + "b"})});
  ASSERT_TRUE(nested.ok()) << nested.status().to_string();
  EXPECT_EQ(nested->data<uint8_t>()[0], 0);
  EXPECT_TRUE(
      fails_with(one({"RegexFullMatch", "", 20, {{"pattern", str("(unclosed")}}}, {strings(Shape{1}, {"x"})}).status(),
                 StatusCode::kInvalidArgument, {"RegexFullMatch 'node0'", "(unclosed", "RE2"}));
}

TEST(StringEqual, BroadcastsAndRefusesMixedTypes) {
  auto y = one({"Equal", "", 19}, {strings(Shape{3}, {"a", "b", ""}), strings(Shape{1}, {"b"})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kBool);
  EXPECT_EQ(std::vector<uint8_t>(y->data<uint8_t>(), y->data<uint8_t>() + 3), (std::vector<uint8_t>{0, 1, 0}));
  EXPECT_TRUE(fails_with(one({"Equal", "", 19}, {strings(Shape{1}, {"1"}), Tensor::scalar<int64_t>(1)}).status(),
                         StatusCode::kInvalidArgument, {"Equal 'node0'", "two string tensors"}));
}

TEST(StringCast, NumbersRoundTripThroughText) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
  Tensor x = Tensor::empty(DType::kFloat32, Shape{200});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = dist(rng) * std::pow(10.f, static_cast<float>(i % 20) - 12);
  x.data<float>()[0] = INFINITY;
  x.data<float>()[1] = -INFINITY;
  x.data<float>()[2] = NAN;
  auto text = one({"Cast", "", 13, {{"to", one_int(static_cast<int64_t>(DType::kString))}}}, {x});
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  EXPECT_EQ(text->strings()[0], "INF");
  EXPECT_EQ(text->strings()[1], "-INF");
  EXPECT_EQ(text->strings()[2], "NaN");
  auto back = one({"Cast", "", 13, {{"to", one_int(static_cast<int64_t>(DType::kFloat32))}}}, {*text});
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(std::isnan(back->data<float>()[2]));
  for (int64_t i = 0; i < x.numel(); ++i)
    if (i != 2) EXPECT_EQ(back->data<float>()[i], x.data<float>()[i]) << text->strings()[i];
  // The shortest text that reads back: as NumPy prints float32.
  auto short_text =
      one({"Cast", "", 13, {{"to", one_int(8)}}}, {Tensor::from_vector<float>(Shape{2}, {0.039187793f, 0.5f})});
  ASSERT_TRUE(short_text.ok());
  EXPECT_EQ(strings_of(*short_text), (std::vector<std::string>{"0.039187793", "0.5"}));
}

TEST(StringCast, TextToIntegersBoolsAndErrors) {
  const Tensor t = strings(Shape{5}, {"100.5", " -7 ", "+42", "9007199254740993", "1e3"});
  auto ints = one({"Cast", "", 13, {{"to", one_int(static_cast<int64_t>(DType::kInt64))}}}, {t});
  ASSERT_TRUE(ints.ok()) << ints.status().to_string();
  const std::vector<int64_t> got(ints->data<int64_t>(), ints->data<int64_t>() + 5);
  EXPECT_EQ(got, (std::vector<int64_t>{100, -7, 42, 9007199254740993, 1000}));
  auto flags = one({"Cast", "", 13, {{"to", one_int(static_cast<int64_t>(DType::kBool))}}},
                   {strings(Shape{3}, {"True", "false", "0"})});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(std::vector<uint8_t>(flags->data<uint8_t>(), flags->data<uint8_t>() + 3), (std::vector<uint8_t>{1, 0, 0}));
  auto like = one({"CastLike", "", 15}, {strings(Shape{1}, {"-inf"}), Tensor::scalar<double>(0.0)});
  ASSERT_TRUE(like.ok()) << like.status().to_string();
  EXPECT_EQ(like->data<double>()[0], -INFINITY);
  EXPECT_TRUE(fails_with(one({"Cast", "", 13, {{"to", one_int(1)}}}, {strings(Shape{2}, {"1", "one"})}).status(),
                         StatusCode::kInvalidArgument, {"Cast 'node0'", "element 1", "'one'"}));
}

TEST(StringKernels, GenericOpsDoNotTakeStrings) {
  // Arithmetic kernels are dtype-generic over numbers; string tensors never reach them.
  EXPECT_TRUE(fails_with(run_node({"Add", "", 14}, {strings(Shape{2}, {}), strings(Shape{2}, {})}).status(),
                         StatusCode::kUnsupported, {"Add", "string"}));
}

NodeSpec label_encoder(int opset, std::map<std::string, graph::Attribute> attrs) {
  return {"LabelEncoder", "ai.onnx.ml", opset, std::move(attrs)};
}

graph::Attribute int64s(std::vector<int64_t> v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kInts;
  a.ints = std::move(v);
  return a;
}
graph::Attribute floats(std::vector<float> v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kFloats;
  a.floats = std::move(v);
  return a;
}

TEST(LabelEncoder, Opset1MapsBothWays) {
  auto ids = one(label_encoder(1, {{"classes_strings", strs({"cat", "dog"})}, {"default_int64", one_int(9)}}),
                 {strings(Shape{3}, {"dog", "cow", "cat"})});
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(std::vector<int64_t>(ids->data<int64_t>(), ids->data<int64_t>() + 3), (std::vector<int64_t>{1, 9, 0}));
  auto names = one(label_encoder(1, {{"classes_strings", strs({"cat", "dog"})}}),
                   {Tensor::from_vector<int64_t>(Shape{3}, {1, 5, 0})});
  ASSERT_TRUE(names.ok()) << names.status().to_string();
  EXPECT_EQ(strings_of(*names), (std::vector<std::string>{"dog", "_Unused", "cat"}));
}

TEST(LabelEncoder, Opset2TablesAndDefaults) {
  auto f =
      one(label_encoder(2, {{"keys_floats", floats({0.f, NAN, 2.5f})}, {"values_strings", strs({"zero", "nan", "x"})}}),
          {Tensor::from_vector<float>(Shape{4}, {-0.f, NAN, 2.5f, 1.f})});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(strings_of(*f), (std::vector<std::string>{"zero", "nan", "x", "_Unused"}));
  auto g = one(label_encoder(2, {{"keys_int64s", int64s({3, 4})}, {"values_floats", floats({0.5f, 1.5f})}}),
               {Tensor::from_vector<int64_t>(Shape{2, 1}, {4, 7})});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->shape(), (Shape{2, 1}));
  EXPECT_EQ(g->data<float>()[0], 1.5f);
  EXPECT_TRUE(std::signbit(g->data<float>()[1]));  // default_float is -0.0
  EXPECT_EQ(g->data<float>()[1], 0.f);
  EXPECT_TRUE(fails_with(one(label_encoder(2, {{"keys_int64s", int64s({1, 2})}, {"values_floats", floats({1.f})}}),
                             {Tensor::scalar<int64_t>(1)})
                             .status(),
                         StatusCode::kInvalidArgument, {"LabelEncoder", "2 keys and 1 values"}));
  EXPECT_TRUE(fails_with(one(label_encoder(2, {{"keys_int64s", int64s({1})}, {"values_floats", floats({1.f})}}),
                             {Tensor::scalar<float>(1.f)})
                             .status(),
                         StatusCode::kInvalidArgument, {"input is float32, the keys are int64"}));
}

TEST(LabelEncoder, Opset4TensorAttributes) {
  const Tensor values = Tensor::from_vector<int16_t>(Shape{3}, {0, 1, 2});
  Tensor def = Tensor::from_vector<int16_t>(Shape{1}, {42});
  auto y = one(label_encoder(4, {{"keys_tensor", tensor_attr(strings(Shape{3}, {"a", "b", "c"}))},
                                 {"values_tensor", tensor_attr(values)},
                                 {"default_tensor", tensor_attr(def)}}),
               {strings(Shape{5}, {"a", "b", "d", "c", "g"})});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  EXPECT_EQ(y->dtype(), DType::kInt16);
  EXPECT_EQ(std::vector<int16_t>(y->data<int16_t>(), y->data<int16_t>() + 5), (std::vector<int16_t>{0, 1, 42, 2, 42}));
  auto bad_default = one(label_encoder(4, {{"keys_strings", strs({"a", "b", "c"})},
                                           {"values_tensor", tensor_attr(values)},
                                           {"default_tensor", tensor_attr(Tensor::scalar<float>(1.f))}}),
                         {strings(Shape{1}, {"a"})});
  EXPECT_TRUE(fails_with(bad_default.status(), StatusCode::kInvalidArgument, {"default_tensor"}));
}

}  // namespace
}  // namespace streamline::ops
