// perf's --input-data: perf_analyzer's JSON format (lists, base64, content + shape, streams),
// one batch row repeated for -b, and errors that name the entry and the input.

#include "tools/perf_input.h"

#include <gtest/gtest.h>

namespace streamline::tools {
namespace {

const std::vector<RemoteTensor> kDeclared = {{"x", "FP32", {-1, 4}}, {"ids", "INT64", {-1, 2}}};

std::vector<RemoteTensor> shaped(int64_t batch) {
  return {{"x", "FP32", {batch, 4}}, {"ids", "INT64", {batch, 2}}};
}

TEST(PerfInput, EntriesBecomeRequestsInOrder) {
  const std::string json = R"({"data": [
      {"x": [1, 2, 3, 4], "ids": [[5, 6]]},
      [{"x": [0, 0, 0, 1], "ids": [7, 8]}, {"x": [9, 9, 9, 9], "ids": [1, 1]}]]})";
  auto r = parse_perf_input_json(json, "d.json", shaped(1), kDeclared, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 3u);  // the list of entries (a stream) is sent entry by entry
  EXPECT_EQ((*r)[0].values[0].data<float>()[2], 3.f);
  EXPECT_EQ((*r)[0].values[1].data<int64_t>()[1], 6);
  EXPECT_EQ((*r)[1].values[1].data<int64_t>()[0], 7);
  EXPECT_EQ((*r)[2].values[0].data<float>()[0], 9.f);
  EXPECT_EQ((*r)[0].tensors[1].shape, (std::vector<int64_t>{1, 2}));
}

TEST(PerfInput, OneRowIsRepeatedForTheBatch) {
  // x gives one row (repeated for the batch of 3), ids the whole batch.
  auto r = parse_perf_input_json(R"({"data": [{"x": [1, 2, 3, 4], "ids": [5, 6, 7, 8, 9, 10]}]})", "d", shaped(3),
                                 kDeclared, 3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& x = (*r)[0].values[0];
  ASSERT_EQ(x.numel(), 12);
  EXPECT_EQ(x.data<float>()[8], 1.f);
  EXPECT_EQ(x.data<float>()[11], 4.f);
  EXPECT_EQ((*r)[0].values[1].data<int64_t>()[5], 10);
  // Neither one row nor the batch.
  EXPECT_FALSE(parse_perf_input_json(R"({"data": [{"x": [1, 2, 3, 4, 5, 6, 7, 8], "ids": [5, 6]}]})", "d", shaped(3),
                                     kDeclared, 3)
                   .ok());
}

TEST(PerfInput, Base64AndExplicitShapes) {
  // Two float32 values 1.0 and 2.0, little-endian: 0000803f 00000040.
  const std::string json = R"({"data": [{"x": {"content": {"b64": "AACAPwAAAEA="}, "shape": [2]},
                                         "ids": {"content": [1, 2, 3, 4], "shape": [2, 2]}}]})";
  const std::vector<RemoteTensor> declared = {{"x", "FP32", {-1, -1}}, {"ids", "INT64", {-1, 2}}};
  auto r = parse_perf_input_json(json, "d", {{"x", "FP32", {1, 1}}, {"ids", "INT64", {1, 2}}}, declared, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].tensors[0].shape, (std::vector<int64_t>{1, 2}));  // the batch dimension added
  EXPECT_EQ((*r)[0].values[0].data<float>()[1], 2.f);
  EXPECT_EQ((*r)[0].tensors[1].shape, (std::vector<int64_t>{2, 2}));  // full rank: as given
}

TEST(PerfInput, ErrorsNameTheEntryAndTheInput) {
  auto expect_error = [](const std::string& json, const std::string& part) {
    auto r = parse_perf_input_json(json, "d.json", shaped(1), kDeclared, 1);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().to_string();
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().to_string();
  };
  expect_error(R"({"data": [{"x": [1, 2, 3, 4], "ids": [1, 2]}, {"x": [1, 2, 3], "ids": [1, 2]}]})",
               "--input-data d.json: entry 1, input 'x': has 3 values; shape [1,4] needs 4");
  expect_error(R"({"data": [{"x": [1, 2, 3, 4]}]})", "entry 0, input 'ids': missing");
  expect_error(R"({"data": [{"x": [1, 2, 3, 4], "ids": [1.5, 2]}]})", "expected integers");
  expect_error(R"({"data": [{"x": ["a", 2, 3, 4], "ids": [1, 2]}]})", "expected numbers or booleans");
  expect_error(R"({"data": []})", "'data' has no entries");
  expect_error(R"({"rows": []})", "expected an object {\"data\": [...]}");
  expect_error("{\"data\": [", "not valid JSON at offset");
  expect_error(R"({"data": [{"x": {"b64": "AAAA"}, "ids": [1, 2]}]})", "has 3 bytes of data; shape [1,4] needs 16");
}

TEST(PerfInput, RangeOfNarrowTypesIsChecked) {
  const std::vector<RemoteTensor> d = {{"b", "UINT8", {2}}};
  EXPECT_FALSE(parse_perf_input_json(R"({"data": [{"b": [1, 256]}]})", "d", d, d, 1).ok());
  auto r = parse_perf_input_json(R"({"data": [{"b": [true, 255]}]})", "d", d, d, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].values[0].data<uint8_t>()[1], 255);
}

TEST(PerfInput, Base64Decoding) {
  EXPECT_EQ(*decode_base64("aGVsbG8="), "hello");
  EXPECT_EQ(*decode_base64("aGVs\nbG8"), "hello");
  EXPECT_FALSE(decode_base64("a*b").ok());
}

TEST(PerfInput, ZeroAndRandomMakeOneRequest) {
  auto z = make_perf_requests(shaped(2), kDeclared, 2, "zero", 0);
  ASSERT_TRUE(z.ok()) << z.status().to_string();
  ASSERT_EQ(z->size(), 1u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*z)[0].values[0].data<float>()[i], 0.f);
  auto r = make_perf_requests(shaped(2), kDeclared, 2, "random", 0);
  ASSERT_TRUE(r.ok());
  bool nonzero = false;
  for (int i = 0; i < 8; ++i) nonzero = nonzero || (*r)[0].values[0].data<float>()[i] != 0.f;
  EXPECT_TRUE(nonzero);
  EXPECT_EQ(make_perf_requests(shaped(1), kDeclared, 1, "/no/such/file.json", 0).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace streamline::tools
