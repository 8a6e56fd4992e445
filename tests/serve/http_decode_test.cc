// The streaming JSON decoder of inference requests: every datatype round-trips exactly whatever the
// order of an input's members, flat or nested, with unknown members anywhere; ragged or misshapen
// nesting is refused even when the count matches; errors name the input and the element.

#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "serve/http_codec.h"
#include "serve/json_data_sink.h"

namespace streamline::serve {
namespace {

Result<DecodedInfer> decode(const std::string& body) {
  return decode_infer_request(body, std::nullopt);
}

void expect_invalid(const std::string& body, const std::string& fragment) {
  auto d = decode(body);
  ASSERT_FALSE(d.ok()) << body.substr(0, 300);
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << body.substr(0, 300);
  EXPECT_NE(d.status().message().find(fragment), std::string::npos) << d.status().message();
}

// A datatype, how to write a random value of it as JSON text, and the bytes the tensor must hold.
struct TypeCase {
  const char* kserve;
  DType dtype;
};

const TypeCase kTypes[] = {{"FP32", DType::kFloat32},  {"FP64", DType::kFloat64},  {"FP16", DType::kFloat16},
                           {"BF16", DType::kBFloat16}, {"INT8", DType::kInt8},     {"INT16", DType::kInt16},
                           {"INT32", DType::kInt32},   {"INT64", DType::kInt64},   {"UINT8", DType::kUInt8},
                           {"UINT16", DType::kUInt16}, {"UINT32", DType::kUInt32}, {"UINT64", DType::kUInt64},
                           {"BOOL", DType::kBool}};

// One random value: its JSON text, and its bytes as the tensor stores them.
std::string random_value(std::mt19937_64& rng, DType t, std::string* bytes) {
  auto put = [&](const auto& v) { bytes->append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  auto pick_int = [&](int64_t lo, int64_t hi) {
    // The extremes often, so the range checks are exercised at their edges.
    switch (rng() % 4) {
      case 0:
        return lo;
      case 1:
        return hi;
      default:
        return lo + static_cast<int64_t>(rng() % (static_cast<uint64_t>(hi - lo) + 1));
    }
  };
  char buf[64];
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16: {
      const double x = std::ldexp(static_cast<double>(static_cast<int64_t>(rng())) / 9.2e18, int(rng() % 40) - 20);
      const int kind = static_cast<int>(rng() % 3);
      if (kind == 0) std::snprintf(buf, sizeof(buf), "%.17g", x);  // a fraction or an exponent
      if (kind == 1) std::snprintf(buf, sizeof(buf), "%" PRId64, static_cast<int64_t>(x * 1e6));  // an integer
      if (kind == 2) std::snprintf(buf, sizeof(buf), "%.3e", x);
      const double parsed = std::strtod(buf, nullptr);
      if (t == DType::kFloat32) put(static_cast<float>(parsed));
      if (t == DType::kFloat64) put(parsed);
      if (t == DType::kFloat16) put(float_to_half(static_cast<float>(parsed)));
      if (t == DType::kBFloat16) put(float_to_bfloat16(static_cast<float>(parsed)));
      return buf;
    }
    case DType::kBool: {
      const bool b = rng() % 2;
      put(static_cast<uint8_t>(b));
      return b ? "true" : "false";
    }
    case DType::kUInt64: {
      const uint64_t v = rng() % 3 == 0 ? UINT64_MAX : rng() >> (rng() % 64);
      put(v);
      return std::to_string(v);
    }
    default:
      break;
  }
  int64_t v = 0;
  switch (t) {
    case DType::kInt8:
      v = pick_int(INT8_MIN, INT8_MAX), put(static_cast<int8_t>(v));
      break;
    case DType::kInt16:
      v = pick_int(INT16_MIN, INT16_MAX), put(static_cast<int16_t>(v));
      break;
    case DType::kInt32:
      v = pick_int(INT32_MIN, INT32_MAX), put(static_cast<int32_t>(v));
      break;
    case DType::kInt64:
      v = rng() % 3 == 0 ? (rng() % 2 ? INT64_MIN : INT64_MAX) : static_cast<int64_t>(rng());
      put(v);
      break;
    case DType::kUInt8:
      v = pick_int(0, UINT8_MAX), put(static_cast<uint8_t>(v));
      break;
    case DType::kUInt16:
      v = pick_int(0, UINT16_MAX), put(static_cast<uint16_t>(v));
      break;
    case DType::kUInt32:
      v = pick_int(0, UINT32_MAX), put(static_cast<uint32_t>(v));
      break;
    default:
      ADD_FAILURE() << "no generator for " << dtype_name(t);
  }
  return std::to_string(v);
}

// `values` written nested as `dims` from dimension `d` on; `*next` walks the flat list.
std::string nested(const std::vector<std::string>& values, const std::vector<int64_t>& dims, size_t d, size_t* next) {
  std::string s = "[";
  for (int64_t i = 0; i < dims[d]; ++i) {
    if (i) s += ",";
    s += d + 1 == dims.size() ? values[(*next)++] : nested(values, dims, d + 1, next);
  }
  return s + "]";
}

TEST(HttpDecodeTest, EveryDatatypeRoundTripsInAnyMemberOrder) {
  std::mt19937_64 rng(20250611);
  int cases = 0;
  for (const TypeCase& tc : kTypes) {
    for (int trial = 0; trial < 40; ++trial, ++cases) {
      const size_t rank = rng() % 4;
      std::vector<int64_t> dims;
      int64_t numel = 1;
      for (size_t r = 0; r < rank; ++r) {
        dims.push_back(static_cast<int64_t>(rng() % 4));  // zeros too: empty tensors
        numel *= dims.back();
      }
      std::vector<std::string> values;
      std::string want;
      for (int64_t i = 0; i < numel; ++i) values.push_back(random_value(rng, tc.dtype, &want));
      std::string data;
      const bool flat = rank <= 1 || numel == 0 || rng() % 2;
      if (flat) {
        data = "[";
        for (size_t i = 0; i < values.size(); ++i) data += (i ? ", " : "") + values[i];
        data += "]";
      } else {
        size_t next = 0;
        data = nested(values, dims, 0, &next);
      }
      std::string shape = "[";
      for (size_t r = 0; r < dims.size(); ++r) shape += (r ? "," : "") + std::to_string(dims[r]);
      shape += "]";
      // The members of the input in a random order, with unknown ones the decoder must skip.
      std::vector<std::string> members = {R"("name": "in")", R"("datatype": ")" + std::string(tc.kserve) + "\"",
                                          "\"shape\": " + shape, "\"data\" :\n " + data,
                                          R"("extra": {"a": [[1, 2], {"b": null}], "data": [1]})"};
      std::shuffle(members.begin(), members.end(), rng);
      std::string input = "{";
      for (size_t m = 0; m < members.size(); ++m) input += (m ? ", " : "") + members[m];
      input += "}";
      const std::string body = R"({"id": "r", "unknown": [1, [2, [3]]], "inputs": [)" + input + "]}";
      auto d = decode(body);
      ASSERT_TRUE(d.ok()) << tc.kserve << " " << body.substr(0, 400) << "\n" << d.status().to_string();
      const Tensor& t = d->request.inputs.at("in");
      EXPECT_EQ(t.dtype(), tc.dtype);
      EXPECT_EQ(t.shape(), Shape(dims)) << body.substr(0, 300);
      ASSERT_EQ(t.nbytes(), want.size());
      EXPECT_EQ(std::memcmp(t.raw(), want.data(), want.size()), 0) << tc.kserve << " " << body.substr(0, 400);
    }
  }
  EXPECT_EQ(cases, 13 * 40);
}

TEST(HttpDecodeTest, ABareValueFillsAOneElementTensor) {
  auto d = decode(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1,1],"data":-7}]})");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->request.inputs.at("x").data<int32_t>()[0], -7);
  expect_invalid(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[2],"data":-7}]})",
                 "input 'x': 1 elements given, shape [2] holds 2");
}

// RapidJSON 1.1's exact conversion read a zero significand with a large exponent as an arbitrary
// value ("0e51" gave 6.5e+296 or -2.5e-265, as the build had it); the fuzzer found it. Every
// value here is the nearest double, whether the data streams (datatype and shape first) or is
// kept and decoded after the pass (data first).
TEST(HttpDecodeTest, RealsAreTheNearestDoubleEvenWithAZeroSignificand) {
  const std::vector<std::pair<std::string, double>> cases = {
      {"0e51", 0.0},
      {"0.0e100", 0.0},
      {"-0.000e300", -0.0},
      {"0E+22", 0.0},
      {"00.0e-30", -1.0},  // not JSON (a leading zero): refused, the value unused
      {"1e23", 1e23},
      {"2.2250738585072011e-308", 2.2250738585072011e-308},
      {"0.1", 0.1},
      {"-9007199254740993.0", -9007199254740992.0},
      {"123456789012345678901234567890", 123456789012345678901234567890.0},
      {"1e-400", 0.0},
      {"-1e-400", -0.0},
      {"10e308", HUGE_VAL},
  };
  for (const auto& [text, want] : cases) {
    for (bool data_first : {false, true}) {
      const std::string body =
          data_first ? R"({"inputs":[{"name":"x","data":[)" + text + R"(],"datatype":"FP64","shape":[1]}]})"
                     : R"({"inputs":[{"name":"x","datatype":"FP64","shape":[1],"data":[)" + text + "]}]}";
      auto d = decode(body);
      if (want == -1.0) {
        EXPECT_FALSE(d.ok()) << body;
        continue;
      }
      ASSERT_TRUE(d.ok()) << body << ": " << d.status().to_string();
      const double got = d->request.inputs.at("x").data<double>()[0];
      EXPECT_EQ(got, want) << body;
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << body;
    }
  }
  // Integers stay integers (exact in INT64 and UINT64), and an exponent makes a real.
  auto d = decode(R"({"inputs":[{"name":"a","datatype":"INT64","shape":[3],"data":[-9223372036854775808,-0,7]},)"
                  R"({"name":"b","datatype":"UINT64","shape":[1],"data":[18446744073709551615]}]})");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->request.inputs.at("a").data<int64_t>()[0], INT64_MIN);
  EXPECT_EQ(d->request.inputs.at("a").data<int64_t>()[1], 0);
  EXPECT_EQ(d->request.inputs.at("b").data<uint64_t>()[0], UINT64_MAX);
  expect_invalid(R"({"inputs":[{"name":"x","datatype":"INT32","shape":[1],"data":[1e2]}]})", "INT32");
}

TEST(HttpDecodeTest, RefusesRaggedOrMisshapenDataEvenWhenTheCountMatches) {
  auto input = [](const std::string& shape, const std::string& data, bool data_first = false) {
    const std::string meta = R"("name":"x","datatype":"FP32","shape":)" + shape;
    return R"({"inputs":[{)" + (data_first ? "\"data\":" + data + "," + meta : meta + ",\"data\":" + data) + "}]}";
  };
  for (bool data_first : {false, true}) {
    SCOPED_TRACE(data_first ? "data before the shape" : "data after the shape");
    // Six values each time: the count alone would pass.
    expect_invalid(input("[2,3]", "[[1,2],[3,4,5,6]]", data_first), "input 'x': \"data\" does not match shape [2,3]");
    expect_invalid(input("[2,3]", "[[1,2,3,4],[5,6]]", data_first), "a list at depth 2 holds more than 3");
    expect_invalid(input("[2,3]", "[[1,2],[3,4],[5,6]]", data_first), "does not match shape [2,3]");
    expect_invalid(input("[2,3]", "[[1,2,3],4,5,6]", data_first), "a value at depth 1 where a list belongs");
    expect_invalid(input("[2,3]", "[1,2,3,[4,5,6]]", data_first), "mixes values and lists");
    expect_invalid(input("[6]", "[[1,2,3],[4,5,6]]", data_first), "nested deeper than its shape [6]");
    expect_invalid(input("[2,3]", "[[[1,2,3]],[[4,5,6]]]", data_first), "nested deeper than its shape [2,3]");
    expect_invalid(input("[1,2,3]", "[[1,2,3],[4,5,6]]", data_first), "does not match shape [1,2,3]");
    expect_invalid(input("[1,6]", "[[1,2,3],[4,5,6]]", data_first), "a list at depth 2 holds 3 entries, not 6");
    expect_invalid(input("[1,3]", "[[1,2,3],[4,5,6]]", data_first), "a list at depth 1 holds more than 1");
    // Short lists are named too.
    expect_invalid(input("[2,3]", "[[1,2,3],[4,5]]", data_first), "a list at depth 2 holds 2 entries, not 3");
    // The two forms the protocol allows still decode.
    for (const char* ok : {"[1,2,3,4,5,6]", "[[1,2,3],[4,5,6]]"}) {
      auto d = decode(input("[2,3]", ok, data_first));
      ASSERT_TRUE(d.ok()) << ok << ": " << d.status().to_string();
      EXPECT_EQ(d->request.inputs.at("x").data<float>()[5], 6.f);
    }
  }
}

TEST(HttpDecodeTest, ErrorsNameTheInputAndTheElementWhereverTheNameComes) {
  expect_invalid(R"({"inputs":[{"data":[1,2,"three"],"shape":[3],"datatype":"INT64","name":"late"}]})",
                 "input 'late': element 2 is not a valid INT64 value");
  expect_invalid(R"({"inputs":[{"name":"early","shape":[3],"datatype":"UINT8","data":[1,256,3]}]})",
                 "input 'early': element 1 is not a valid UINT8 value");
  expect_invalid(R"({"inputs":[{"name":"b","shape":[2],"datatype":"BOOL","data":[true,null]}]})",
                 "input 'b': element 1 is not a valid BOOL value");
  expect_invalid(R"({"inputs":[{"name":"o","shape":[1],"datatype":"FP32","data":[{"x":1}]}]})",
                 "input 'o': element 0 is not a valid FP32 value");
  expect_invalid(R"({"inputs":[{"name":"c","shape":[4],"datatype":"FP32","data":[1,2,3]}]})",
                 "input 'c': 3 elements given, shape [4] holds 4");
  expect_invalid(R"({"inputs":[{"name":"c","shape":[2],"datatype":"FP32","data":[1,2,3]}]})",
                 "input 'c': 3 elements given, shape [2] holds 2");
  // A shape far larger than the body: counted, never allocated.
  expect_invalid(R"({"inputs":[{"name":"h","shape":[1099511627776],"datatype":"INT64","data":[1,2]}]})",
                 "input 'h': 2 elements given, shape [1099511627776] holds 1099511627776");
  expect_invalid(R"({"inputs":[{"data":[1,2],"name":"h","shape":[1099511627776],"datatype":"INT64"}]})",
                 "input 'h': 2 elements given");
  // A long name is echoed in part.
  const std::string name(5000, 'n');
  expect_invalid(R"({"inputs":[{"name":")" + name + R"(","shape":[1],"datatype":"FP32","data":["x"]}]})",
                 "... (4744 more)': element 0");
  // Malformed JSON inside data is a JSON error with its offset, as anywhere else.
  expect_invalid(R"({"inputs":[{"name":"m","shape":[2],"datatype":"FP32","data":[1,]}]})", "malformed JSON at byte");
}

TEST(HttpDecodeTest, ErrorsComeInTheOrderOfTheChecks) {
  // The count before the values, as a whole-document decoder checks them.
  expect_invalid(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,"two",3]}]})",
                 "input 'x': 3 elements given, shape [2] holds 2");
  expect_invalid(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":{"a":[1,2,3]}}]})",
                 "input 'x': 1 elements given, shape [2] holds 2");
  // The members of the input before its data, whatever their order in the text.
  expect_invalid(R"({"inputs":[{"name":"x","shape":[4],"datatype":"FP32","data":[1,"two"],)"
                 R"("parameters":{"binary_data_size":16}}]})",
                 "has both \"data\" and binary_data_size");
  expect_invalid(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":["bad"]},)"
                 R"({"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})",
                 "input 'x': 1 elements given");
  // A malformed document anywhere before any of it.
  expect_invalid(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":["bad", 1]}]} x)",
                 "malformed JSON at byte");
}

TEST(HttpDecodeTest, TheFirstOfDuplicatedMembersCounts) {
  auto d = decode(R"({"inputs":[{"name":"a","datatype":"INT32","shape":[2],"data":[1,2],"data":[3,4],)"
                  R"("shape":[9],"datatype":"BOOL"}],"inputs":[{"name":"b"}],"id":"one","id":"two"})");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(*d->id, "one");
  ASSERT_EQ(d->request.inputs.count("a"), 1u);
  const Tensor& a = d->request.inputs.at("a");
  EXPECT_EQ(a.dtype(), DType::kInt32);
  EXPECT_EQ(a.data<int32_t>()[1], 2);
  EXPECT_EQ(d->request.inputs.count("b"), 0u);
}

TEST(HttpDecodeTest, DataAlongsideBinaryOrParametersStaysRefused) {
  expect_invalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"parameters":{"binary_data_size":4},)"
                 R"("data":[1]}]})",
                 "has both \"data\" and binary_data_size");
  expect_invalid(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],)"
                 R"("parameters":{"binary_data_size":4}}]})",
                 "has both \"data\" and binary_data_size");
  auto d = decode(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[2],"parameters":{},"data":[1,2]}]})");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->request.inputs.at("x").data<float>()[1], 2.f);
}

TEST(HttpDecodeTest, WhatIsNotAnObjectOrTooBigIsRefusedClearly) {
  std::string array = "[";
  for (int i = 0; i < 100000; ++i) array += "[1],";
  expect_invalid(array + "1]", "the request must be a JSON object");
  expect_invalid("\"text\"", "the request must be a JSON object");
  expect_invalid(R"({"inputs":[1, {"name":"x"}]})", "inputs[0] must be an object");
  // The skeleton (everything but data) is bounded.
  std::string many = R"({"outputs":[)";
  for (int i = 0; i < (1 << 20) + 10; ++i) many += i ? ",0" : "0";
  many += R"(],"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})";
  expect_invalid(many, "values outside input data");
  // Unknown members may be as large as they like: they are skipped, not kept.
  std::string junk = R"({"junk":[)";
  for (int i = 0; i < (1 << 20) + 10; ++i) junk += i ? ",[1]" : "[1]";
  junk += R"(],"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})";
  EXPECT_TRUE(decode(junk).ok());
}

TEST(JsonDataSinkTest, CountsWithoutStoringWhenGivenNoTensor) {
  DataSink sink(nullptr, DType::kFloat32, {3});
  ASSERT_TRUE(sink.start_array());
  ASSERT_TRUE(sink.scalar(JsonNumber::real(1)));
  ASSERT_TRUE(sink.scalar(JsonNumber::other()));  // not converted: only counted
  ASSERT_TRUE(sink.end_array());
  const Status s = sink.finish();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("2 elements given, shape [3] holds 3"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace streamline::serve
