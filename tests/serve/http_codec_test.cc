// The KServe v2 REST codec on its own: every datatype we hold decodes from JSON numbers, the
// binary extension splits the body by binary_data_size, and malformed documents are refused with
// a message naming the culprit.

#include "serve/http_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>

namespace streamline::serve {
namespace {

Result<DecodedInfer> decode(const std::string& body) {
  return decode_infer_request(body, std::nullopt);
}

std::string one_input(const std::string& datatype, const std::string& shape, const std::string& data) {
  return R"({"inputs":[{"name":"x","datatype":")" + datatype + R"(","shape":)" + shape + R"(,"data":)" + data + "}]}";
}

void expect_invalid(const std::string& body, const std::string& fragment) {
  auto d = decode(body);
  ASSERT_FALSE(d.ok()) << body;
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << body;
  EXPECT_NE(d.status().message().find(fragment), std::string::npos) << d.status().message();
}

TEST(HttpCodecTest, DecodesEachDatatypeFlatOrNested) {
  auto f = decode(one_input("FP32", "[2,2]", "[[1.5,-2],[3,4e-3]]"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const Tensor& t = f->request.inputs.at("x");
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  EXPECT_EQ(t.shape(), (Shape{2, 2}));
  EXPECT_FLOAT_EQ(t.data<float>()[0], 1.5f);
  EXPECT_FLOAT_EQ(t.data<float>()[3], 4e-3f);

  auto h = decode(one_input("FP16", "[3]", "[1, 0.5, -2]"));
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  EXPECT_EQ(half_to_float(h->request.inputs.at("x").data<uint16_t>()[1]), 0.5f);

  auto i8 = decode(one_input("INT8", "[3]", "[-128, 0, 127]"));
  ASSERT_TRUE(i8.ok());
  EXPECT_EQ(i8->request.inputs.at("x").data<int8_t>()[0], -128);

  auto i64 = decode(one_input("INT64", "[1]", "[9007199254740993]"));
  ASSERT_TRUE(i64.ok());
  EXPECT_EQ(i64->request.inputs.at("x").data<int64_t>()[0], 9007199254740993ll);  // exact, not via double

  auto b = decode(one_input("BOOL", "[2]", "[true,false]"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->request.inputs.at("x").data<uint8_t>()[0], 1);
  EXPECT_EQ(b->request.inputs.at("x").data<uint8_t>()[1], 0);

  auto u8 = decode(one_input("UINT8", "[0]", "[]"));  // empty tensors are fine
  ASSERT_TRUE(u8.ok());
  EXPECT_EQ(u8->request.inputs.at("x").numel(), 0);
}

TEST(HttpCodecTest, RefusesValuesOutsideTheDatatype) {
  expect_invalid(one_input("INT8", "[1]", "[128]"), "element 0 is not a valid INT8");
  expect_invalid(one_input("UINT8", "[2]", "[1,-1]"), "element 1 is not a valid UINT8");
  expect_invalid(one_input("INT32", "[1]", "[1.5]"), "INT32");
  expect_invalid(one_input("BOOL", "[1]", "[1]"), "BOOL");
  expect_invalid(one_input("FP32", "[2]", "[1,\"2\"]"), "element 1");
  expect_invalid(one_input("FP32", "[1]", "[{}]"), "element 0");
  expect_invalid(one_input("BYTES", "[2]", "[\"a\", 1]"), "element 1 is not a valid BYTES");
  expect_invalid(one_input("INT32", "[1]", "[\"a\"]"), "element 0 is not a valid INT32");
  expect_invalid(one_input("FLOAT", "[1]", "[1]"), "not supported");
}

TEST(HttpCodecTest, RefusesShapesThatDoNotMatchTheData) {
  expect_invalid(one_input("FP32", "[2,3]", "[1,2,3]"), "input 'x': 3 elements given, shape [2,3] holds 6");
  expect_invalid(one_input("FP32", "[-1,3]", "[1,2,3]"), "non-negative");
  expect_invalid(one_input("FP32", "[1.5]", "[1]"), "non-negative");
  expect_invalid(one_input("FP32", "[4294967296,4294967296]", "[1]"), "too many elements");
  expect_invalid(one_input("FP32", "3", "[1,2,3]"), "\"shape\" array");
  std::string deep(200, '[');
  deep += "1" + std::string(200, ']');
  expect_invalid(one_input("FP32", "[1]", deep), "nested deeper");
}

TEST(HttpCodecTest, RefusesMalformedDocuments) {
  expect_invalid("", "malformed JSON");
  expect_invalid("{\"inputs\":[", "malformed JSON");
  expect_invalid(one_input("FP32", "[1]", "[1]") + " trailing", "malformed JSON");
  expect_invalid("[]", "JSON object");
  expect_invalid("{}", "\"inputs\" must be a non-empty array");
  expect_invalid("{\"inputs\":[{\"name\":\"\xff\xfe\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}",
                 "malformed JSON");  // not UTF-8
  expect_invalid("{\"inputs\":[{\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", "needs a \"name\"");
  expect_invalid("{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1]}]}", "neither");
  expect_invalid("{\"id\":5," + one_input("FP32", "[1]", "[1]").substr(1), "\"id\" must be a string");
  expect_invalid("{\"parameters\":{\"priority\":-1}," + one_input("FP32", "[1]", "[1]").substr(1), "priority");
  expect_invalid("{\"outputs\":[{\"name\":\"y\",\"parameters\":{\"classification\":0}}]," +
                     one_input("FP32", "[1]", "[1]").substr(1),
                 "classification must be an integer >= 1");
  // Deep nesting anywhere in the document: parsed iteratively, refused or accepted, never a crash.
  std::string deep =
      "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "," + one_input("FP32", "[1]", "[1]").substr(1);
  EXPECT_TRUE(decode(deep).ok());
}

// RapidJSON reads a NUL byte as the end of its input: a NUL after the document used to end the
// parse there, and whatever followed it was accepted unread.
TEST(HttpCodecTest, RefusesBytesAfterTheDocumentEvenAfterANul) {
  const std::string doc = one_input("FP32", "[1]", "[1]");
  for (const std::string tail : {std::string(1, '\0'), std::string("\0garbage{{", 10), std::string(" \0 ", 3)}) {
    expect_invalid(doc + tail, "malformed JSON at byte ");
    expect_invalid(doc + tail, "must not be followed by other values");
  }
  EXPECT_TRUE(decode(doc + " \r\n\t").ok());  // whitespace after the document is fine
  // The binary extension's JSON header likewise.
  const std::string header = doc + std::string(1, '\0');
  auto d = decode_infer_request(header + "raw", header.size());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("must not be followed"), std::string::npos) << d.status().message();
  // And the small documents of the other routes (POST /v2/repository/index).
  auto ready = parse_bool_member(std::string("{\"ready\":true}\0junk", 19), "ready");
  ASSERT_FALSE(ready.ok());
  EXPECT_NE(ready.status().message().find("must not be followed"), std::string::npos) << ready.status().message();
  EXPECT_TRUE(*parse_bool_member("{\"ready\":true}\n", "ready"));
}

TEST(HttpCodecTest, MapsParametersOntoTheRequest) {
  auto d = decode(R"({"id":"r1","parameters":{"priority":1,"timeout":2500,"binary_data_output":true},)"
                  R"("outputs":[{"name":"b"},{"name":"a","parameters":{"binary_data":false}}],)" +
                  one_input("FP32", "[1]", "[1]").substr(1));
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(*d->id, "r1");
  EXPECT_EQ(d->request.priority, 0);  // Triton's 1 (highest) is our 0
  EXPECT_EQ(d->request.timeout_us, 2500);
  ASSERT_EQ(d->outputs.size(), 2u);
  EXPECT_TRUE(d->outputs[0].binary);   // from binary_data_output
  EXPECT_FALSE(d->outputs[1].binary);  // its own parameter wins
  EXPECT_EQ(d->request.requested_outputs, (std::vector<std::string>{"b", "a"}));

  auto def = decode(R"({"parameters":{"priority":0},)" + one_input("FP32", "[1]", "[1]").substr(1));
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->request.priority, -1);  // the model's default

  // Past the last level an int holds: the lowest level, as over gRPC.
  auto huge = decode(R"({"parameters":{"priority":9223372036854775807},)" + one_input("FP32", "[1]", "[1]").substr(1));
  ASSERT_TRUE(huge.ok()) << huge.status().to_string();
  EXPECT_EQ(huge->request.priority, std::numeric_limits<int>::max());
}

TEST(HttpCodecTest, SplitsTheBinaryPartByBinaryDataSize) {
  const std::string header =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"j","datatype":"INT32","shape":[1],"data":[7]},)"
      R"({"name":"b","datatype":"INT64","shape":[1],"parameters":{"binary_data_size":8}}]})";
  const float a[2] = {1.25f, -3.f};
  const int64_t b = -42;
  std::string body = header;
  body.append(reinterpret_cast<const char*>(a), sizeof(a));
  body.append(reinterpret_cast<const char*>(&b), sizeof(b));

  auto hl = parse_header_length(std::to_string(header.size()), body.size());
  ASSERT_TRUE(hl.ok());
  auto d = decode_infer_request(body, *hl);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->request.inputs.at("a").data<float>()[1], -3.f);
  EXPECT_EQ(d->request.inputs.at("j").data<int32_t>()[0], 7);
  EXPECT_EQ(d->request.inputs.at("b").data<int64_t>()[0], -42);

  // Truncated, padded, or sizes that disagree with the shape.
  auto truncated = decode_infer_request(body.substr(0, body.size() - 1), *hl);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("input 'b'"), std::string::npos) << truncated.status().message();
  EXPECT_FALSE(decode_infer_request(body + "x", *hl).ok());
  std::string wrong = body;
  wrong.replace(wrong.find("\"binary_data_size\":8"), 20, "\"binary_data_size\":4");
  EXPECT_FALSE(decode_infer_request(wrong, *hl).ok());
  std::string huge = body;
  huge.replace(huge.find("\"binary_data_size\":8"), 20, "\"binary_data_size\":9223372036854775807");
  auto hd = decode_infer_request(huge, parse_header_length(std::to_string(header.size() + 18), huge.size()).value());
  EXPECT_FALSE(hd.ok());
  EXPECT_FALSE(decode_infer_request(body, std::optional<size_t>(header.size() - 1)).ok());

  EXPECT_FALSE(parse_header_length("12x", 100).ok());
  EXPECT_FALSE(parse_header_length("-1", 100).ok());
  EXPECT_FALSE(parse_header_length("101", 100).ok());
  EXPECT_FALSE(parse_header_length("99999999999999999999999", 100).ok());
  EXPECT_FALSE(parse_header_length("", 100)->has_value());
}

TEST(HttpCodecTest, EncodesJsonAndBinaryOutputs) {
  DecodedInfer req;
  req.id = "abc";
  req.outputs = {{"y", true}, {"h", false}};
  InferResponse r;
  r.outputs["h"] = Tensor::from_vector<float>(Shape{1, 2}, {0.1f, -2.5f});
  r.outputs["y"] = Tensor::from_vector<int64_t>(Shape{2}, {5, -6});
  auto e = encode_infer_response(req, "m", "3", r);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_TRUE(e->header_length.has_value());
  const std::string json = e->body.substr(0, *e->header_length);
  EXPECT_EQ(json, R"({"model_name":"m","model_version":"3","id":"abc","outputs":[)"
                  R"({"name":"y","datatype":"INT64","shape":[2],"parameters":{"binary_data_size":16}},)"
                  R"({"name":"h","datatype":"FP32","shape":[1,2],"data":[0.1,-2.5]}]})");
  ASSERT_EQ(e->body.size(), json.size() + 16);
  int64_t y[2];
  std::memcpy(y, e->body.data() + json.size(), 16);
  EXPECT_EQ(y[0], 5);
  EXPECT_EQ(y[1], -6);

  DecodedInfer all;  // no outputs listed: every output, by name, as JSON
  auto j = encode_infer_response(all, "m", "1", r);
  ASSERT_TRUE(j.ok());
  EXPECT_FALSE(j->header_length.has_value());
  EXPECT_LT(j->body.find("\"name\":\"h\""), j->body.find("\"name\":\"y\""));

  DecodedInfer missing;
  missing.outputs = {{"z", false}};
  EXPECT_FALSE(encode_infer_response(missing, "m", "1", r).ok());
}

TEST(HttpCodecTest, ErrorJsonIsValidUtf8) {
  EXPECT_EQ(error_json("bad \"x\"\n"), R"({"error":"bad \"x\"\n"})");
  EXPECT_EQ(error_json("model '\xff\xc3('"), R"({"error":"model '??('"})");
  EXPECT_EQ(error_json("caf\xc3\xa9"), "{\"error\":\"caf\xc3\xa9\"}");
}

}  // namespace
}  // namespace streamline::serve
