#include "graph/onnx_import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include "graph/onnx_test_models.h"

namespace streamline::graph {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;
using testing::OnnxGraph;
using testing::OnnxModel;

::testing::AssertionResult has_error(const Status& s, StatusCode code, const std::vector<std::string>& parts) {
  if (s.ok()) return ::testing::AssertionFailure() << "import succeeded";
  if (s.code() != code) return ::testing::AssertionFailure() << "wrong code: " << s.to_string();
  for (const auto& p : parts)
    if (s.message().find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "message lacks \"" << p << "\": " << s.to_string();
  return ::testing::AssertionSuccess();
}

template <typename T>
::testing::AssertionResult has_error(const Result<T>& r, StatusCode code, const std::vector<std::string>& parts) {
  return has_error(r.status(), code, parts);
}

// A folder under the system temp dir, removed when the test ends.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("sl_onnx_import_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string write(const std::string& name, const std::string& bytes) const {
    const fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }

 private:
  fs::path path_;
};

// X[N,3,8,8] -> Conv 'conv1' (W, B) -> c -> Relu (unnamed) -> Y. W is also listed as an input,
// the IR < 4 way.
void build_conv_relu(OnnxModel& m) {
  std::vector<float> w(4 * 3 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  m.initializer(testing::raw_tensor<float>("W", TensorProto::FLOAT, {4, 3, 3, 3}, w));
  m.initializer(testing::float_tensor("B", {4}, {0.5f, 1.5f, 2.5f, 3.5f}));
  m.input("X", TensorProto::FLOAT, {"N", "3", "8", "8"});
  m.input("W", TensorProto::FLOAT, {"4", "3", "3", "3"});
  auto* conv = m.node("Conv", "conv1", {"X", "W", "B"}, {"c"});
  testing::attr_ints(conv, "pads", {1, 1, 1, 1});
  testing::attr_ints(conv, "strides", {1, 1});
  testing::attr_ints(conv, "kernel_shape", {3, 3});
  testing::attr_int(conv, "group", 1);
  testing::attr_string(conv, "auto_pad", "NOTSET");
  m.node("Relu", "", {"c"}, {"Y"});
  m.output("Y", TensorProto::FLOAT, {"N", "4", "8", "8"});
}

TEST(OnnxImport, ConvReluGraph) {
  OnnxModel m(13);
  build_conv_relu(m);
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Graph& g = *r;
  EXPECT_EQ(g.opsets.at(""), 13);
  EXPECT_EQ(g.producer_name, "streamline-tests");

  ASSERT_EQ(g.inputs().size(), 1u);  // W is an initializer, not an input
  const Value& x = g.value(g.inputs()[0]);
  EXPECT_EQ(x.name, "X");
  EXPECT_EQ(x.dtype, DType::kFloat32);
  ASSERT_TRUE(x.dims.has_value());
  EXPECT_EQ(dims_to_string(*x.dims), "[N,3,8,8]");
  EXPECT_EQ((*x.dims)[0].symbol, "N");
  EXPECT_FALSE((*x.dims)[0].fixed());

  const ValueId w = g.find_value("W");
  ASSERT_NE(w, kNoValue);
  ASSERT_TRUE(g.value(w).constant.has_value());
  EXPECT_EQ(g.value(w).constant->shape(), (Shape{4, 3, 3, 3}));
  EXPECT_EQ(g.value(w).constant->data<float>()[107], 107.f);
  EXPECT_EQ(g.value(w).producer, kNoNode);
  EXPECT_FALSE(g.is_graph_input(w));
  const ValueId b = g.find_value("B");
  ASSERT_TRUE(g.value(b).constant.has_value());
  EXPECT_EQ(g.value(b).constant->data<float>()[3], 3.5f);

  ASSERT_EQ(g.num_nodes(), 2u);
  const Node& conv = g.node(0);
  EXPECT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(conv.name, "conv1");
  EXPECT_EQ(conv.domain, "");
  EXPECT_EQ(conv.opset, 13);
  EXPECT_EQ(conv.inputs, (std::vector<ValueId>{g.inputs()[0], w, b}));
  const ValueId c = g.find_value("c");
  EXPECT_EQ(conv.outputs, std::vector<ValueId>{c});
  EXPECT_EQ(g.value(c).producer, 0);
  EXPECT_EQ(conv.attrs.at("pads").kind, Attribute::Kind::kInts);
  EXPECT_EQ(conv.attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(conv.attrs.at("group").kind, Attribute::Kind::kInt);
  EXPECT_EQ(conv.attr_int("group", 0), 1);
  EXPECT_EQ(conv.attrs.at("auto_pad").kind, Attribute::Kind::kString);
  EXPECT_EQ(conv.attr_string("auto_pad", ""), "NOTSET");

  const Node& relu = g.node(1);
  EXPECT_EQ(relu.name, "Relu_1");
  EXPECT_EQ(relu.inputs, std::vector<ValueId>{c});
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(relu.outputs, std::vector<ValueId>{g.outputs()[0]});
  EXPECT_EQ(g.value(g.outputs()[0]).name, "Y");
  EXPECT_EQ(dims_to_string(*g.value(g.outputs()[0]).dims), "[N,4,8,8]");
  EXPECT_EQ(g.value(c).consumers, std::vector<NodeId>{1});

  // The intermediate value's type comes from ONNX shape inference.
  EXPECT_EQ(g.value(c).dtype, DType::kFloat32);
  ASSERT_TRUE(g.value(c).dims.has_value());
  EXPECT_EQ(dims_to_string(*g.value(c).dims), "[N,4,8,8]");
}

TEST(OnnxImport, FromFileAndErrorsNameTheFile) {
  TempDir dir;
  OnnxModel m(13);
  build_conv_relu(m);
  const std::string path = dir.write("model.onnx", m.bytes());
  Result<Graph> r = import_onnx_file(path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->num_nodes(), 2u);

  m.proto()->mutable_node(1)->set_input(0, "nope");
  const std::string bad = dir.write("bad.onnx", m.bytes());
  EXPECT_TRUE(has_error(import_onnx_file(bad), StatusCode::kInvalidArgument, {bad, "dangling input 'nope'"}));
}

TEST(OnnxImport, MissingEmptyAndGraphlessFiles) {
  TempDir dir;
  EXPECT_TRUE(
      has_error(import_onnx_file((dir.path() / "absent.onnx").string()), StatusCode::kNotFound, {"absent.onnx"}));
  const std::string empty = dir.write("empty.onnx", "");
  EXPECT_TRUE(has_error(import_onnx_file(empty), StatusCode::kInvalidArgument,
                        {"cannot parse '" + empty + "' as an ONNX model"}));
  onnx::ModelProto no_graph;
  no_graph.set_ir_version(8);
  const std::string ng = dir.write("nograph.onnx", no_graph.SerializeAsString());
  EXPECT_TRUE(has_error(import_onnx_file(ng), StatusCode::kInvalidArgument, {"cannot parse", "no graph"}));
  EXPECT_TRUE(has_error(import_onnx_file(dir.path().string()), StatusCode::kInvalidArgument, {"not a regular file"}));
}

TEST(OnnxImport, TruncatedModelsAreErrors) {
  OnnxModel m(13);
  build_conv_relu(m);
  const std::string bytes = m.bytes();
  ASSERT_GT(bytes.size(), 100u);
  std::vector<size_t> cuts = {1, 2, 3, bytes.size() / 2, bytes.size() - 2, bytes.size() - 1};
  for (size_t c = 5; c < bytes.size(); c += bytes.size() / 60) cuts.push_back(c);
  for (size_t cut : cuts) {
    Result<Graph> r = import_onnx_bytes(bytes.substr(0, cut), "", {}, "cut.onnx");
    EXPECT_TRUE(has_error(r, StatusCode::kInvalidArgument, {"cut.onnx"})) << "cut at " << cut;
  }
}

TEST(OnnxImport, GarbageAndMutatedBytesNeverCrash) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    std::string junk(std::uniform_int_distribution<size_t>(1, 400)(rng), '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    EXPECT_FALSE(import_onnx_bytes(junk, "").ok());
  }
  OnnxModel m(13);
  build_conv_relu(m);
  const std::string bytes = m.bytes();
  int parsed = 0;
  for (int i = 0; i < 500; ++i) {
    std::string mutated = bytes;
    const int flips = std::uniform_int_distribution<int>(1, 4)(rng);
    for (int k = 0; k < flips; ++k)
      mutated[std::uniform_int_distribution<size_t>(0, mutated.size() - 1)(rng)] = static_cast<char>(rng());
    Result<Graph> r = import_onnx_bytes(mutated, "");
    if (!r.ok()) continue;
    ++parsed;
    EXPECT_TRUE(r->topological_order().ok());
  }
  EXPECT_GT(parsed, 0);  // most flips land in weights and still import
}

struct DTypeCase {
  int32_t elem;
  DType dtype;
  std::vector<double> values;
};

std::vector<DTypeCase> dtype_cases() {
  const std::vector<double> s = {0, 1, -2, 3, 4, 5};
  const std::vector<double> u = {0, 1, 2, 3, 200, 5};
  return {
      {TensorProto::FLOAT, DType::kFloat32, {0, 1.5, -2.25, 3, 4, 5}},
      {TensorProto::FLOAT16, DType::kFloat16, {0, 1.5, -2.25, 3, 4, 5}},
      {TensorProto::BFLOAT16, DType::kBFloat16, {0, 1.5, -2.25, 3, 4, 5}},
      {TensorProto::DOUBLE, DType::kFloat64, {0, 1.5, -2.25, 3, 4, 1e300}},
      {TensorProto::INT64, DType::kInt64, {0, 1, -2, 3, 1099511627776.0, 5}},
      {TensorProto::INT32, DType::kInt32, {0, 1, -2, 3, 70000, 5}},
      {TensorProto::INT16, DType::kInt16, {0, 1, -2, 3, 3000, 5}},
      {TensorProto::INT8, DType::kInt8, s},
      {TensorProto::UINT8, DType::kUInt8, u},
      {TensorProto::UINT16, DType::kUInt16, {0, 1, 2, 3, 60000, 5}},
      {TensorProto::UINT32, DType::kUInt32, {0, 1, 2, 3, 4000000000.0, 5}},
      {TensorProto::UINT64, DType::kUInt64, {0, 1, 2, 3, 1099511627776.0, 5}},
      {TensorProto::BOOL, DType::kBool, {0, 1, 0, 1, 1, 0}},
  };
}

template <typename T>
std::string pack(const std::vector<double>& v, T (*conv)(double)) {
  std::string out(v.size() * sizeof(T), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const T x = conv(v[i]);
    std::memcpy(out.data() + i * sizeof(T), &x, sizeof(T));
  }
  return out;
}

template <typename T>
T cast(double d) {
  return static_cast<T>(d);
}
uint16_t to_half(double d) {
  return float_to_half(static_cast<float>(d));
}
uint16_t to_bf16(double d) {
  return float_to_bfloat16(static_cast<float>(d));
}

std::string raw_bytes(const DTypeCase& c) {
  switch (c.dtype) {
    case DType::kFloat32:
      return pack<float>(c.values, cast<float>);
    case DType::kFloat16:
      return pack<uint16_t>(c.values, to_half);
    case DType::kBFloat16:
      return pack<uint16_t>(c.values, to_bf16);
    case DType::kFloat64:
      return pack<double>(c.values, cast<double>);
    case DType::kInt64:
      return pack<int64_t>(c.values, cast<int64_t>);
    case DType::kInt32:
      return pack<int32_t>(c.values, cast<int32_t>);
    case DType::kInt16:
      return pack<int16_t>(c.values, cast<int16_t>);
    case DType::kInt8:
      return pack<int8_t>(c.values, cast<int8_t>);
    case DType::kUInt8:
    case DType::kBool:
      return pack<uint8_t>(c.values, cast<uint8_t>);
    case DType::kUInt16:
      return pack<uint16_t>(c.values, cast<uint16_t>);
    case DType::kUInt32:
      return pack<uint32_t>(c.values, cast<uint32_t>);
    case DType::kUInt64:
      return pack<uint64_t>(c.values, cast<uint64_t>);
    default:
      return {};
  }
}

void fill_typed(const DTypeCase& c, TensorProto* t) {
  for (double v : c.values) {
    switch (c.dtype) {
      case DType::kFloat32:
        t->add_float_data(static_cast<float>(v));
        break;
      case DType::kFloat64:
        t->add_double_data(v);
        break;
      case DType::kInt64:
        t->add_int64_data(static_cast<int64_t>(v));
        break;
      case DType::kUInt32:
      case DType::kUInt64:
        t->add_uint64_data(static_cast<uint64_t>(v));
        break;
      case DType::kFloat16:
        t->add_int32_data(to_half(v));
        break;
      case DType::kBFloat16:
        t->add_int32_data(to_bf16(v));
        break;
      default:
        t->add_int32_data(static_cast<int32_t>(v));
        break;
    }
  }
}

// Imports an initializer 'T' of shape [2,3] (feeding Identity) and returns the constant.
Result<Tensor> import_initializer(const TensorProto& t) {
  OnnxModel m(13);
  m.initializer(t);
  m.node("Identity", "id", {t.name()}, {"y"});
  m.output("y", t.data_type(), {"2", "3"});
  SL_ASSIGN_OR_RETURN(Graph g, import_onnx_bytes(m.bytes(), ""));
  const ValueId v = g.find_value(t.name());
  if (v == kNoValue || !g.value(v).constant) return internal_error("no constant");
  return *g.value(v).constant;
}

TEST(OnnxImport, InitializerOfEachDTypeFromRawAndTypedFields) {
  for (const DTypeCase& c : dtype_cases()) {
    for (bool raw : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(c.dtype)) + (raw ? " raw_data" : " typed field"));
      TensorProto t;
      t.set_name("T");
      t.set_data_type(c.elem);
      t.add_dims(2);
      t.add_dims(3);
      if (raw)
        t.set_raw_data(raw_bytes(c));
      else
        fill_typed(c, &t);
      Result<Tensor> r = import_initializer(t);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      EXPECT_EQ(r->dtype(), c.dtype);
      EXPECT_EQ(r->shape(), (Shape{2, 3}));
      for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(element_as_double(*r, i), c.values[static_cast<size_t>(i)]) << i;
    }
  }
}

// int4 packs two values to a byte (low nibble first), int2 four; in memory each takes a byte.
// float8 takes a byte in TensorProto too, one per int32 in int32_data.
TEST(OnnxImport, PackedSmallTypes) {
  TensorProto i4;
  i4.set_name("q");
  i4.set_data_type(22);  // INT4
  i4.add_dims(3);
  i4.set_raw_data(std::string("\x8f\x07", 2));  // -1, -8, 7 (the last nibble is padding)
  Result<Tensor> a = import_initializer(i4);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->dtype(), DType::kInt4);
  EXPECT_EQ(a->nbytes(), 3u);
  EXPECT_EQ((std::vector<double>{element_as_double(*a, 0), element_as_double(*a, 1), element_as_double(*a, 2)}),
            (std::vector<double>{-1, -8, 7}));
  i4.set_raw_data(std::string("\x8f", 1));
  EXPECT_TRUE(has_error(import_initializer(i4).status(), StatusCode::kInvalidArgument, {"raw_data", "needs 2"}));
  TensorProto u2;
  u2.set_name("u");
  u2.set_data_type(25);  // UINT2
  u2.add_dims(5);
  u2.add_int32_data(0b11100100);  // 0, 1, 2, 3
  u2.add_int32_data(0b00000010);  // 2
  Result<Tensor> b = import_initializer(u2);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(element_as_double(*b, i), i < 4 ? i : 2) << i;
  TensorProto f8;
  f8.set_name("f");
  f8.set_data_type(17);  // FLOAT8E4M3FN
  f8.add_dims(2);
  f8.add_int32_data(0x38);  // 1.0
  f8.add_int32_data(0xC0);  // -2.0
  Result<Tensor> c = import_initializer(f8);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(element_as_double(*c, 0), 1.0);
  EXPECT_EQ(element_as_double(*c, 1), -2.0);
}

TEST(OnnxImport, TensorDataErrorsNameTheTensor) {
  TensorProto short_raw = testing::raw_tensor<float>("W", TensorProto::FLOAT, {2, 3}, {1, 2, 3, 4, 5});
  EXPECT_TRUE(has_error(import_initializer(short_raw).status(), StatusCode::kInvalidArgument,
                        {"initializer 'W'", "raw_data", "float32[2,3]"}));
  TensorProto few = testing::float_tensor("W", {2, 3}, {1, 2});
  EXPECT_TRUE(has_error(import_initializer(few).status(), StatusCode::kInvalidArgument, {"'W'", "float_data"}));
  TensorProto wrong_field = testing::float_tensor("W", {2}, {});
  wrong_field.add_int64_data(1);
  wrong_field.add_int64_data(2);
  EXPECT_TRUE(has_error(import_initializer(wrong_field).status(), StatusCode::kInvalidArgument, {"'W'"}));
  TensorProto negative = testing::float_tensor("W", {2, -3}, {});
  EXPECT_TRUE(has_error(import_initializer(negative).status(), StatusCode::kInvalidArgument, {"'W'", "negative"}));
  // Enormous dims with no data behind them fail before anything is allocated.
  TensorProto huge = testing::raw_tensor<float>("W", TensorProto::FLOAT, {int64_t{1} << 40, int64_t{1} << 20}, {});
  EXPECT_TRUE(has_error(import_initializer(huge).status(), StatusCode::kInvalidArgument, {"'W'"}));
  TensorProto overflow = testing::float_tensor("W", {int64_t{1} << 62, int64_t{1} << 62}, {});
  EXPECT_TRUE(has_error(import_initializer(overflow).status(), StatusCode::kInvalidArgument, {"'W'", "elements"}));
  // A zero dim does not excuse the others: their product would overflow before the zero is reached.
  TensorProto zero_after_huge = testing::float_tensor("W", {3, INT64_MAX - 14, 0}, {});
  EXPECT_TRUE(
      has_error(import_initializer(zero_after_huge).status(), StatusCode::kInvalidArgument, {"'W'", "elements"}));
  TensorProto empty = testing::float_tensor("E", {4, 0, 2}, {});
  Result<Tensor> e = import_initializer(empty);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->numel(), 0);

  TensorProto str;
  str.set_name("S");
  str.set_data_type(TensorProto::STRING);
  str.add_dims(1);
  str.add_string_data("hello");
  EXPECT_TRUE(has_error(import_initializer(str).status(), StatusCode::kUnsupported, {"'S'", "string"}));
  TensorProto unknown = testing::float_tensor("U", {1}, {1.f});
  unknown.set_data_type(99);
  EXPECT_TRUE(has_error(import_initializer(unknown).status(), StatusCode::kUnsupported, {"'U'", "99"}));
  TensorProto complex = testing::float_tensor("C", {1}, {1.f, 2.f});
  complex.set_data_type(TensorProto::COMPLEX64);
  EXPECT_TRUE(has_error(import_initializer(complex).status(), StatusCode::kUnsupported, {"'C'", "complex64"}));
}

TEST(OnnxImport, StringTensorAttributeIsUnsupported) {
  OnnxModel m(13);
  TensorProto str;
  str.set_data_type(TensorProto::STRING);
  str.add_dims(1);
  str.add_string_data("a");
  testing::attr_tensor(m.node("Constant", "k", {}, {"y"}), "value", str);
  m.output("y", TensorProto::FLOAT, {"1"});
  EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), ""), StatusCode::kUnsupported,
                        {"attribute 'value' of node Constant 'k'", "string"}));
}

// Model with initializer W float32[2,3] stored in an external file.
std::string external_model(const std::string& location, const std::string& offset, const std::string& length) {
  OnnxModel m(13);
  TensorProto t;
  t.set_name("W");
  t.set_data_type(TensorProto::FLOAT);
  t.add_dims(2);
  t.add_dims(3);
  t.set_data_location(TensorProto::EXTERNAL);
  auto add = [&](const std::string& k, const std::string& v) {
    if (v.empty()) return;
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  add("offset", offset);
  add("length", length);
  m.initializer(t);
  m.node("Identity", "id", {"W"}, {"y"});
  m.output("y", TensorProto::FLOAT, {"2", "3"});
  return m.bytes();
}

TEST(OnnxImport, ExternalData) {
  TempDir dir;
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  std::string blob(16, 'x');
  blob.append(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
  dir.write("weights.bin", blob);
  dir.write("sub/w.bin", blob);

  for (const std::string loc : {"weights.bin", "sub/w.bin", "./sub/../weights.bin"}) {
    const std::string path = dir.write("model.onnx", external_model(loc, "16", "24"));
    Result<Graph> r = import_onnx_file(path);
    ASSERT_TRUE(r.ok()) << loc << ": " << r.status().to_string();
    const Tensor& t = *r->value(r->find_value("W")).constant;
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(t.data<float>()[i], w[static_cast<size_t>(i)]);
  }
  // Length may be omitted: the tensor's size is read from the offset.
  EXPECT_TRUE(import_onnx_file(dir.write("m2.onnx", external_model("weights.bin", "16", ""))).ok());

  auto import = [&](const std::string& loc, const std::string& off, const std::string& len,
                    const ImportOptions& opts = {}) {
    return import_onnx_file(dir.write("model.onnx", external_model(loc, off, len)), opts);
  };
  EXPECT_TRUE(
      has_error(import("nope.bin", "0", "24"), StatusCode::kNotFound, {"missing initializer data", "'W'", "nope.bin"}));
  EXPECT_TRUE(has_error(import("weights.bin", "30", "24"), StatusCode::kInvalidArgument,
                        {"missing initializer data", "'W'", "weights.bin"}));
  EXPECT_TRUE(has_error(import("weights.bin", "99999999999", ""), StatusCode::kInvalidArgument,
                        {"missing initializer data", "'W'"}));
  EXPECT_TRUE(has_error(import("weights.bin", "16", "20"), StatusCode::kInvalidArgument, {"'W'", "length"}));
  EXPECT_TRUE(has_error(import("weights.bin", "-1", ""), StatusCode::kInvalidArgument, {"'W'", "offset"}));
  EXPECT_TRUE(has_error(import((dir.path() / "weights.bin").string(), "16", "24"), StatusCode::kInvalidArgument,
                        {"'W'", "absolute"}));
  EXPECT_TRUE(has_error(import("../weights.bin", "16", "24"), StatusCode::kInvalidArgument, {"'W'", "outside"}));
  EXPECT_TRUE(has_error(import("sub/../../weights.bin", "16", "24"), StatusCode::kInvalidArgument, {"outside"}));
  EXPECT_TRUE(has_error(import("sub", "0", "24"), StatusCode::kInvalidArgument, {"'W'", "not a regular file"}));
  ImportOptions small;
  small.max_external_bytes = 8;
  EXPECT_TRUE(has_error(import("weights.bin", "16", "24", small), StatusCode::kInvalidArgument, {"'W'", "limit"}));
  // From bytes there is no folder to look in.
  EXPECT_TRUE(has_error(import_onnx_bytes(external_model("weights.bin", "16", "24"), ""), StatusCode::kInvalidArgument,
                        {"'W'", "external"}));
}

TEST(OnnxImport, DanglingInput) {
  OnnxModel m(13);
  m.input("x", TensorProto::FLOAT, {"2"});
  m.node("Relu", "r1", {"nope"}, {"y"});
  m.output("y", TensorProto::FLOAT, {"2"});
  EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), ""), StatusCode::kInvalidArgument,
                        {"dangling input 'nope' of node Relu 'r1'"}));
}

TEST(OnnxImport, UntypedInputWithoutInitializer) {
  OnnxModel m(6, /*ir_version=*/3);
  m.input("x", TensorProto::FLOAT, {"1", "3", "4", "4"});
  m.proto()->add_input()->set_name("W");  // IR 3: weights are inputs, fed by initializers
  m.node("Conv", "conv", {"x", "W"}, {"y"});
  m.output("y", TensorProto::FLOAT, {"?"});
  ImportOptions opts;
  opts.min_opset = 1;
  EXPECT_TRUE(
      has_error(import_onnx_bytes(m.bytes(), "", opts), StatusCode::kInvalidArgument, {"missing initializer", "'W'"}));
  m.initializer(testing::float_tensor("W", {1, 3, 1, 1}, {1, 2, 3}));
  EXPECT_TRUE(import_onnx_bytes(m.bytes(), "", opts).ok());
}

TEST(OnnxImport, Cycle) {
  OnnxModel m(13);
  m.input("x", TensorProto::FLOAT, {"2"});
  m.node("Add", "a", {"x", "q"}, {"p"});
  m.node("Relu", "b", {"p"}, {"q"});
  m.node("Relu", "c", {"x"}, {"y"});
  m.output("y", TensorProto::FLOAT, {"2"});
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(has_error(r, StatusCode::kInvalidArgument, {"cycle"}));
  const std::string msg = r.status().message();
  EXPECT_TRUE(msg.find("Add 'a'") != std::string::npos || msg.find("Relu 'b'") != std::string::npos) << msg;
}

TEST(OnnxImport, TwoProducersOfOneValue) {
  OnnxModel m(13);
  m.input("x", TensorProto::FLOAT, {"2"});
  m.node("Relu", "a", {"x"}, {"t"});
  m.node("Neg", "b", {"x"}, {"t"});
  m.output("t", TensorProto::FLOAT, {"2"});
  EXPECT_TRUE(
      has_error(import_onnx_bytes(m.bytes(), ""), StatusCode::kInvalidArgument, {"'t'", "Relu 'a'", "Neg 'b'"}));
  OnnxModel m2(13);
  m2.input("x", TensorProto::FLOAT, {"2"});
  m2.node("Relu", "a", {"x"}, {"x"});
  m2.output("x", TensorProto::FLOAT, {"2"});
  EXPECT_TRUE(
      has_error(import_onnx_bytes(m2.bytes(), ""), StatusCode::kInvalidArgument, {"'x'", "Relu 'a'", "graph input"}));
}

TEST(OnnxImport, OpsetRange) {
  // Below opset 7 a model is accepted and upgraded to opset 7 (legacy_opset_test.cc) unless
  // min_opset refuses it; opsets up to 26 load by default, later ones only when max_opset allows.
  for (int64_t opset : {6, 27}) {
    OnnxModel m(opset);
    m.input("x", TensorProto::FLOAT, {"2"});
    m.node("Relu", "r", {"x"}, {"y"});
    m.output("y", TensorProto::FLOAT, {"2"});
    ImportOptions narrow;
    narrow.min_opset = 7;
    EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), "", narrow), StatusCode::kUnsupported,
                          {"opset " + std::to_string(opset)}));
    ImportOptions wide;
    wide.min_opset = 1;
    wide.max_opset = 27;
    Result<Graph> r = import_onnx_bytes(m.bytes(), "", wide);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->node(0).opset, std::max<int64_t>(opset, 7));
  }
  for (int64_t opset : {18, 23, 26}) {
    OnnxModel m(opset);
    m.input("x", TensorProto::FLOAT, {"2"});
    m.node("Relu", "r", {"x"}, {"y"});
    m.output("y", TensorProto::FLOAT, {"2"});
    Result<Graph> r = import_onnx_bytes(m.bytes(), "");
    ASSERT_TRUE(r.ok()) << "opset " << opset << ": " << r.status().to_string();
    EXPECT_EQ(r->node(0).opset, opset);
  }
  OnnxModel newer(27);
  newer.input("x", TensorProto::FLOAT, {"2"});
  newer.node("Relu", "r", {"x"}, {"y"});
  newer.output("y", TensorProto::FLOAT, {"2"});
  EXPECT_TRUE(has_error(import_onnx_bytes(newer.bytes(), ""), StatusCode::kUnsupported, {"opset 27", "1..26"}));
}

TEST(OnnxImport, DomainsAndOpsets) {
  OnnxModel m(11);
  m.model().mutable_opset_import(0)->set_domain("ai.onnx");
  m.import_opset("com.example", 2);
  m.input("x", TensorProto::FLOAT, {"2"});
  m.node("Relu", "r", {"x"}, {"t"}, "ai.onnx");
  m.node("Gadget", "g", {"t"}, {"y"}, "com.example");
  m.output("y", TensorProto::FLOAT, {"2"});
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->opsets.at(""), 11);
  EXPECT_EQ(r->opsets.at("com.example"), 2);
  EXPECT_EQ(r->node(0).domain, "");
  EXPECT_EQ(r->node(0).opset, 11);
  EXPECT_EQ(r->node(1).domain, "com.example");
  EXPECT_EQ(r->node(1).opset, 2);

  OnnxModel none(13);
  none.model().mutable_opset_import(0)->set_domain("com.example");
  none.input("x", TensorProto::FLOAT, {"2"});
  none.node("Relu", "r", {"x"}, {"y"});
  none.output("y", TensorProto::FLOAT, {"2"});
  EXPECT_TRUE(has_error(import_onnx_bytes(none.bytes(), ""), StatusCode::kInvalidArgument, {"Relu 'r'", "opset"}));
}

TEST(OnnxImport, UnsupportedGraphInputAndOutputTypes) {
  OnnxModel m(13);
  m.input("s", TensorProto::STRING, {"2"});
  m.node("Identity", "i", {"s"}, {"y"});
  m.output("y", TensorProto::STRING, {"2"});
  EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), ""), StatusCode::kUnsupported, {"graph input 's'", "string"}));

  OnnxModel out(13);
  out.input("x", TensorProto::FLOAT, {"2"});
  out.node("Cast", "c", {"x"}, {"y"});
  out.output("y", TensorProto::COMPLEX64, {"2"});
  EXPECT_TRUE(
      has_error(import_onnx_bytes(out.bytes(), ""), StatusCode::kUnsupported, {"graph output 'y'", "complex64"}));

  OnnxModel seq(13);
  auto* in = seq.proto()->add_input();
  in->set_name("q");
  in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  seq.node("Identity", "i", {"q"}, {"y"});
  seq.output("y", TensorProto::FLOAT, {"2"});
  EXPECT_TRUE(has_error(import_onnx_bytes(seq.bytes(), ""), StatusCode::kUnsupported, {"graph input 'q'"}));
}

TEST(OnnxImport, OutputNotProducedAndDuplicateInitializer) {
  OnnxModel m(13);
  m.input("x", TensorProto::FLOAT, {"2"});
  m.node("Relu", "r", {"x"}, {"y"});
  m.output("z", TensorProto::FLOAT, {"2"});
  EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), ""), StatusCode::kInvalidArgument, {"graph output 'z'"}));

  OnnxModel d(13);
  d.initializer(testing::float_tensor("w", {1}, {1}));
  d.initializer(testing::float_tensor("w", {1}, {2}));
  d.node("Relu", "r", {"w"}, {"y"});
  d.output("y", TensorProto::FLOAT, {"1"});
  EXPECT_TRUE(has_error(import_onnx_bytes(d.bytes(), ""), StatusCode::kInvalidArgument, {"initializer 'w'"}));
}

TEST(OnnxImport, OptionalInputsAndOutputs) {
  OnnxModel m(13);
  m.input("x", TensorProto::FLOAT, {"4"});
  m.initializer(testing::float_tensor("mx", {}, {6.f}));
  m.node("Clip", "clip", {"x", "", "mx"}, {"c"});
  m.node("Dropout", "drop", {"c"}, {"y", ""});
  m.output("y", TensorProto::FLOAT, {"4"});
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Node& clip = r->node(0);
  ASSERT_EQ(clip.inputs.size(), 3u);
  EXPECT_EQ(clip.inputs[1], kNoValue);
  EXPECT_EQ(clip.inputs[2], r->find_value("mx"));
  ASSERT_EQ(r->node(1).outputs.size(), 2u);
  EXPECT_EQ(r->node(1).outputs[1], kNoValue);
  EXPECT_EQ(r->value(r->find_value("c")).dtype, DType::kFloat32);
}

TEST(OnnxImport, NodeNamesAreGeneratedAndUnique) {
  OnnxModel m(13);
  m.input("x", TensorProto::FLOAT, {"2"});
  m.node("Relu", "dup", {"x"}, {"a"});
  m.node("Relu", "dup", {"a"}, {"b"});
  m.node("Relu", "", {"b"}, {"c"});
  m.node("Neg", "Relu_2", {"c"}, {"y"});
  m.output("y", TensorProto::FLOAT, {"2"});
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->node(0).name, "dup");
  EXPECT_EQ(r->node(1).name, "dup_1");
  EXPECT_EQ(r->node(2).name, "Relu_2_1");
  EXPECT_EQ(r->node(3).name, "Relu_2");
}

TEST(OnnxImport, UnsortedNodesImportAndSort) {
  OnnxModel m(13);
  m.input("x", TensorProto::FLOAT, {"2"});
  m.node("Relu", "second", {"t"}, {"y"});
  m.node("Neg", "first", {"x"}, {"t"});
  m.output("y", TensorProto::FLOAT, {"2"});
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto order = r->topological_order();
  ASSERT_TRUE(order.ok());
  EXPECT_EQ(*order, (std::vector<NodeId>{1, 0}));
}

TEST(OnnxImport, AttributeKinds) {
  OnnxModel m(13);
  m.import_opset("com.example", 1);
  m.input("x", TensorProto::FLOAT, {"2"});
  auto* n = m.node("Gadget", "g", {"x"}, {"y"}, "com.example");
  testing::attr_float(n, "alpha", 0.25f);
  testing::attr_floats(n, "scales", {1.f, 2.f});
  testing::attr_strings(n, "modes", {"a", "bc"});
  testing::attr_tensor(n, "value", testing::raw_tensor<int64_t>("", TensorProto::INT64, {3}, {7, 8, 9}));
  auto* ts = testing::add_attr(n, "pair", onnx::AttributeProto::TENSORS);
  *ts->add_tensors() = testing::float_tensor("", {1}, {1.f});
  *ts->add_tensors() = testing::float_tensor("", {2}, {2.f, 3.f});
  auto* untyped = n->add_attribute();  // no type: deduced from the field that is set
  untyped->set_name("old");
  untyped->add_ints(4);
  m.output("y", TensorProto::FLOAT, {"2"});
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Node& g = r->node(0);
  EXPECT_EQ(g.attrs.at("alpha").kind, Attribute::Kind::kFloat);
  EXPECT_EQ(g.attr_float("alpha", 0), 0.25f);
  EXPECT_EQ(g.attrs.at("scales").kind, Attribute::Kind::kFloats);
  EXPECT_EQ(g.attr_floats("scales"), (std::vector<float>{1.f, 2.f}));
  EXPECT_EQ(g.attrs.at("modes").kind, Attribute::Kind::kStrings);
  EXPECT_EQ(g.attrs.at("modes").strings, (std::vector<std::string>{"a", "bc"}));
  const Attribute& value = g.attrs.at("value");
  EXPECT_EQ(value.kind, Attribute::Kind::kTensor);
  EXPECT_EQ(value.t.dtype(), DType::kInt64);
  EXPECT_EQ(value.t.data<int64_t>()[2], 9);
  const Attribute& pair = g.attrs.at("pair");
  EXPECT_EQ(pair.kind, Attribute::Kind::kTensors);
  ASSERT_EQ(pair.tensors.size(), 2u);
  EXPECT_EQ(pair.tensors[1].data<float>()[1], 3.f);
  EXPECT_EQ(g.attrs.at("old").kind, Attribute::Kind::kInts);
  EXPECT_EQ(g.attr_ints("old"), std::vector<int64_t>{4});

  testing::add_attr(n, "sparse", onnx::AttributeProto::SPARSE_TENSOR);
  EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), ""), StatusCode::kUnsupported,
                        {"attribute 'sparse' of node com.example.Gadget 'g'"}));
}

// An attribute of a default-domain op whose type is not the one ONNX's schema gives it used to be
// read as that type's zero (Gemm's transB as a string: no transpose), silently computing something
// else than the model says.
TEST(OnnxImport, AttributeOfTheWrongTypeForItsSchemaIsAnError) {
  OnnxModel m(13);
  m.input("a", TensorProto::FLOAT, {"2", "3"});
  m.initializer(testing::float_tensor("b", {4, 3}, std::vector<float>(12, 1.f)));
  auto* gemm = m.node("Gemm", "gemm", {"a", "b"}, {"y"});
  testing::attr_string(gemm, "transB", "1");
  m.output("y", TensorProto::FLOAT, {"2", "4"});
  EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), ""), StatusCode::kInvalidArgument,
                        {"attribute 'transB' of node Gemm 'gemm'", "must be INT", "STRING"}));
  // Deduced from the field that is set, for attributes without a type: the same check.
  gemm->mutable_attribute(0)->Clear();
  gemm->mutable_attribute(0)->set_name("alpha");
  gemm->mutable_attribute(0)->add_ints(2);
  EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), ""), StatusCode::kInvalidArgument,
                        {"attribute 'alpha' of node Gemm 'gemm'", "must be FLOAT", "INTS"}));
  // The right type imports; an attribute the schema does not list is left to the kernel.
  gemm->clear_attribute();
  testing::attr_int(gemm, "transB", 1);
  testing::attr_string(gemm, "unlisted", "x");
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->node(0).attr_int("transB", 0), 1);
}

// then: Relu(x), else: Neg(x) or, with `nested`, an inner If whose branches use x from two levels up.
onnx::GraphProto branch(const std::string& name, const std::string& op, const std::string& out, bool nested) {
  onnx::GraphProto gp;
  gp.set_name(name);
  OnnxGraph b(&gp);
  if (nested) {
    auto* inner = b.node("If", name + "_if", {"cond"}, {out});
    testing::attr_graph(inner, "then_branch", branch(name + "_t", "Relu", out + "_t", false));
    testing::attr_graph(inner, "else_branch", branch(name + "_e", "Neg", out + "_e", false));
  } else {
    b.node(op, name + "_" + op, {"x"}, {out});
  }
  b.output(out, TensorProto::FLOAT, {"2"});
  return gp;
}

TEST(OnnxImport, IfWithSubgraphs) {
  OnnxModel m(13);
  m.input("cond", TensorProto::BOOL, {});
  m.input("x", TensorProto::FLOAT, {"2"});
  auto* n = m.node("If", "if0", {"cond"}, {"y"});
  testing::attr_graph(n, "then_branch", branch("then", "Relu", "t", false));
  testing::attr_graph(n, "else_branch", branch("else", "Neg", "e", true));
  m.output("y", TensorProto::FLOAT, {"2"});
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->num_nodes(), 1u);
  const Node& node = r->node(0);
  EXPECT_EQ(node.inputs, std::vector<ValueId>{r->find_value("cond")});
  ASSERT_EQ(node.attrs.at("then_branch").kind, Attribute::Kind::kGraph);
  const Graph& then_g = *node.attrs.at("then_branch").g;
  ASSERT_EQ(then_g.num_nodes(), 1u);
  EXPECT_EQ(then_g.node(0).op_type, "Relu");
  EXPECT_EQ(then_g.node(0).opset, 13);
  const ValueId x = then_g.find_value("x");
  ASSERT_NE(x, kNoValue);
  EXPECT_EQ(then_g.node(0).inputs, std::vector<ValueId>{x});
  EXPECT_EQ(then_g.value(x).producer, kNoNode);
  EXPECT_FALSE(then_g.is_graph_input(x));
  EXPECT_EQ(then_g.value(x).dtype, DType::kFloat32);
  ASSERT_EQ(then_g.outputs().size(), 1u);
  EXPECT_EQ(then_g.value(then_g.outputs()[0]).name, "t");
  EXPECT_TRUE(then_g.topological_order().ok());

  const Graph& else_g = *node.attrs.at("else_branch").g;
  ASSERT_EQ(else_g.num_nodes(), 1u);
  const Graph& inner = *else_g.node(0).attrs.at("else_branch").g;
  EXPECT_EQ(inner.node(0).op_type, "Neg");
  EXPECT_NE(inner.find_value("x"), kNoValue);
  EXPECT_NE(else_g.find_value("cond"), kNoValue);  // captured from the main graph
  EXPECT_EQ(r->value(r->find_value("y")).dtype, DType::kFloat32);

  // Errors inside a branch name the branch and the node holding it.
  m.proto()->mutable_node(0)->mutable_attribute(0)->mutable_g()->mutable_node(0)->set_input(0, "zz");
  EXPECT_TRUE(has_error(import_onnx_bytes(m.bytes(), ""), StatusCode::kInvalidArgument,
                        {"then_branch", "If 'if0'", "dangling input 'zz'"}));
}

// Nodes that ONNX 1.12's own shape inference reads past the end of, divides by zero on, or loops
// on for ages. Each must import (the runtime reports bad nodes later) without taking the process down.
TEST(OnnxImport, ShapeInferenceHazardsAreContained) {
  std::vector<std::unique_ptr<OnnxModel>> models;
  auto add = [&](int64_t opset) {
    models.push_back(std::make_unique<OnnxModel>(opset));
    return models.back().get();
  };
  {  // Conv whose weight rank differs from the input rank, with SAME padding
    OnnxModel* m = add(13);
    m->input("x", TensorProto::FLOAT, {"1", "2", "5"});
    m->input("w", TensorProto::FLOAT, {"4"});
    testing::attr_string(m->node("Conv", "conv", {"x", "w"}, {"y"}), "auto_pad", "SAME_UPPER");
    m->output("y", TensorProto::FLOAT, {"?"});
  }
  {  // Conv with a kernel_shape whose weight comes from an op inference knows nothing about
    OnnxModel* m = add(13);
    m->import_opset("com.example", 1);
    m->input("x", TensorProto::FLOAT, {"1", "2", "5", "5"});
    m->node("Unknown", "u", {"x"}, {"w"}, "com.example");
    testing::attr_ints(m->node("Conv", "conv", {"x", "w"}, {"y"}), "kernel_shape", {3, 3});
    m->output("y", TensorProto::FLOAT, {"?"});
  }
  {  // zero stride
    OnnxModel* m = add(13);
    m->input("x", TensorProto::FLOAT, {"1", "1", "8", "8"});
    auto* n = m->node("AveragePool", "pool", {"x"}, {"y"});
    testing::attr_ints(n, "kernel_shape", {2, 2});
    testing::attr_ints(n, "strides", {0, 1});
    m->output("y", TensorProto::FLOAT, {"?"});
  }
  {  // SAME padding over a huge input dim: inference would loop 2^39 times
    OnnxModel* m = add(13);
    m->input("x", TensorProto::FLOAT, {"1", "1", "1099511627776", "8"});
    auto* n = m->node("AveragePool", "pool", {"x"}, {"y"});
    testing::attr_ints(n, "kernel_shape", {2, 2});
    testing::attr_ints(n, "strides", {2, 2});
    testing::attr_string(n, "auto_pad", "SAME_UPPER");
    m->output("y", TensorProto::FLOAT, {"?"});
  }
  {  // block size whose square overflows to zero
    OnnxModel* m = add(13);
    m->input("x", TensorProto::FLOAT, {"1", "4", "2", "2"});
    testing::attr_int(m->node("DepthToSpace", "d2s", {"x"}, {"y"}), "blocksize", int64_t{1} << 32);
    m->output("y", TensorProto::FLOAT, {"?"});
  }
  {  // axis outside the input rank
    OnnxModel* m = add(17);
    m->input("x", TensorProto::FLOAT, {"2", "3"});
    m->input("s", TensorProto::FLOAT, {"3"});
    testing::attr_int(m->node("LayerNormalization", "ln", {"x", "s"}, {"y", "mean", "inv"}), "axis", -7);
    m->output("y", TensorProto::FLOAT, {"?"});
  }
  {  // a shape input declared 2^40 long: inference would build a 2^40-rank output
    OnnxModel* m = add(13);
    m->input("shape", TensorProto::INT64, {"1099511627776"});
    m->node("ConstantOfShape", "cos", {"shape"}, {"y"});
    m->output("y", TensorProto::FLOAT, {"?"});
  }
  {  // Scan without its body (fails the schema, so inference must not see it)
    OnnxModel* m = add(13);
    m->input("x", TensorProto::FLOAT, {"2", "2"});
    testing::attr_int(m->node("Scan", "scan", {"x"}, {"y"}), "num_scan_inputs", 1);
    m->output("y", TensorProto::FLOAT, {"?"});
  }
  {  // STFT on a rank-1 signal
    OnnxModel* m = add(17);
    m->input("signal", TensorProto::FLOAT, {"?"});
    m->input("step", TensorProto::INT64, {});
    m->input("len", TensorProto::INT64, {});
    m->node("STFT", "stft", {"signal", "step", "", "len"}, {"y"});
    m->output("y", TensorProto::FLOAT, {"?"});
  }
  for (size_t i = 0; i < models.size(); ++i) {
    Result<Graph> r = import_onnx_bytes(models[i]->bytes(), "");
    EXPECT_TRUE(r.ok()) << "model " << i << ": " << r.status().to_string();
  }
}

// A model-local function that calls itself: local functions are kept away from inference (the
// runtime reports the call as an unknown op later), so the import neither recurses nor fails.
TEST(OnnxImport, RecursiveLocalFunctionIsHarmless) {
  OnnxModel m(13);
  m.import_opset("local", 1);
  m.input("x", TensorProto::FLOAT, {"2"});
  m.node("F", "f", {"x"}, {"y"}, "local");
  m.output("y", TensorProto::FLOAT, {"2"});
  onnx::FunctionProto* f = m.model().add_functions();
  f->set_name("F");
  f->set_domain("local");
  f->add_input("a");
  f->add_output("b");
  auto* op = f->add_opset_import();
  op->set_domain("local");
  op->set_version(1);
  auto* call = f->add_node();
  call->set_op_type("F");
  call->set_domain("local");
  call->add_input("a");
  call->add_output("b");
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->node(0).op_type, "F");
}

TEST(OnnxImport, ShapeInferenceFailureIsNotAnError) {
  OnnxModel m(13);
  m.input("a", TensorProto::FLOAT, {"2", "3"});
  m.input("b", TensorProto::FLOAT, {"4", "5"});
  m.node("Add", "add", {"a", "b"}, {"y"});  // shapes cannot broadcast
  m.output("y", TensorProto::FLOAT, {"?"});
  Result<Graph> r = import_onnx_bytes(m.bytes(), "");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->num_nodes(), 1u);
}

}  // namespace
}  // namespace streamline::graph
