// BYTES tensors (string tensors) in both KServe front ends' codecs: JSON strings flat or nested and
// in any member order, the length-prefixed binary form in HTTP binary parts and gRPC
// raw_input_contents, gRPC bytes_contents, and the same forms out; every malformed length is
// refused naming the input and the element.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/bytes_wire.h"
#include "serve/grpc_codec.h"
#include "serve/http_codec.h"

namespace streamline::serve {
namespace {

namespace pb = ::inference;

std::vector<std::string> strings_of(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kString);
  return {t.strings(), t.strings() + t.numel()};
}

// Elements with what the wire form must keep: empty, UTF-8, a NUL, a long one.
const std::vector<std::string> kWords = {"", "caf\xc3\xa9", std::string("a\0b", 3), std::string(70000, 'z')};

TEST(BytesWire, PacksAndUnpacksLengthPrefixedElements) {
  const Tensor t = Tensor::from_strings(Shape{2, 2}, kWords);
  const std::string raw = pack_bytes(t);
  EXPECT_EQ(raw.size(), wire_bytes(t));
  EXPECT_EQ(raw.size(), 16u + 0 + 5 + 3 + 70000);
  EXPECT_EQ(raw.substr(0, 4), std::string(4, '\0'));
  EXPECT_EQ(raw.substr(4, 4), std::string("\x05\0\0\0", 4));
  Tensor back = Tensor::empty(DType::kString, Shape{2, 2});
  ASSERT_TRUE(unpack_bytes(raw, &back).ok());
  EXPECT_EQ(strings_of(back), kWords);

  Tensor three = Tensor::empty(DType::kString, Shape{3});
  const Status fewer = unpack_bytes(raw.substr(0, 15), &three);  // two elements and half a length
  EXPECT_EQ(fewer.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fewer.message().find("element 2"), std::string::npos) << fewer.message();
  Tensor one = Tensor::empty(DType::kString, Shape{1});
  EXPECT_NE(unpack_bytes(std::string("\x09\0\0\0abc", 7), &one).message().find("length 9"), std::string::npos);
  EXPECT_NE(unpack_bytes(std::string("\x01\0\0\0ab", 6), &one).message().find("1 bytes after"), std::string::npos);
}

TEST(BytesHttp, JsonStringsDecodeFlatNestedAndInAnyOrder) {
  for (const std::string body :
       {R"({"inputs":[{"name":"w","datatype":"BYTES","shape":[2,2],"data":["", "caf\u00e9", "x", "\"q\""]}]})",
        R"({"inputs":[{"name":"w","data":[["", "caf\u00e9"], ["x", "\"q\""]],"shape":[2,2],"datatype":"BYTES"}]})"}) {
    auto d = decode_infer_request(body, std::nullopt);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    const Tensor& t = d->request.inputs.at("w");
    EXPECT_EQ(t.shape(), (Shape{2, 2}));
    EXPECT_EQ(strings_of(t), (std::vector<std::string>{"", "caf\xc3\xa9", "x", "\"q\""}));
  }
  auto count =
      decode_infer_request(R"({"inputs":[{"name":"w","datatype":"BYTES","shape":[3],"data":["a"]}]})", std::nullopt);
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("input 'w'"), std::string::npos) << count.status().message();
}

TEST(BytesHttp, BinaryPartsCarryLengthPrefixedElements) {
  const Tensor words = Tensor::from_strings(Shape{4}, kWords);
  const std::string raw = pack_bytes(words);
  const std::string header =
      R"({"inputs":[{"name":"w","datatype":"BYTES","shape":[4],"parameters":{"binary_data_size":)" +
      std::to_string(raw.size()) + R"(}},{"name":"n","datatype":"INT32","shape":[1],"data":[3]}]})";
  auto d = decode_infer_request(header + raw, header.size());
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(strings_of(d->request.inputs.at("w")), kWords);
  EXPECT_EQ(d->request.inputs.at("n").data<int32_t>()[0], 3);

  // A size that cuts the last element, and a count the bytes cannot hold.
  const std::string cut = R"({"inputs":[{"name":"w","datatype":"BYTES","shape":[4],"parameters":{"binary_data_size":)" +
                          std::to_string(raw.size() - 1) + "}}]}";
  auto c = decode_infer_request(cut + raw.substr(0, raw.size() - 1), cut.size());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("input 'w': BYTES element 3"), std::string::npos) << c.status().message();
  const std::string many =
      R"({"inputs":[{"name":"w","datatype":"BYTES","shape":[1000000000],"parameters":{"binary_data_size":8}}]})";
  auto m = decode_infer_request(many + std::string(8, '\0'), many.size());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("cannot hold 1000000000 BYTES elements"), std::string::npos)
      << m.status().message();
}

TEST(BytesHttp, OutputsAsJsonStringsOrBinary) {
  InferResponse r;
  r.outputs["label"] = Tensor::from_strings(Shape{2}, {"sports", "caf\xc3\xa9"});
  DecodedInfer json_req;
  auto j = encode_infer_response(json_req, "m", "1", r);
  ASSERT_TRUE(j.ok()) << j.status().to_string();
  EXPECT_EQ(j->body,
            "{\"model_name\":\"m\",\"model_version\":\"1\",\"outputs\":[{\"name\":\"label\",\"datatype\":"
            "\"BYTES\",\"shape\":[2],\"data\":[\"sports\",\"caf\xc3\xa9\"]}]}");
  DecodedInfer bin_req;
  bin_req.outputs = {{"label", true}};
  auto b = encode_infer_response(bin_req, "m", "1", r);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  ASSERT_TRUE(b->header_length.has_value());
  const std::string json = b->body.substr(0, *b->header_length);
  EXPECT_NE(json.find("\"binary_data_size\":19"), std::string::npos) << json;
  EXPECT_EQ(b->body.substr(*b->header_length), pack_bytes(r.outputs["label"]));
}

pb::ModelInferRequest bytes_request(const std::vector<int64_t>& shape) {
  pb::ModelInferRequest req;
  auto* in = req.add_inputs();
  in->set_name("w");
  in->set_datatype("BYTES");
  for (int64_t d : shape) in->add_shape(d);
  return req;
}

TEST(BytesGrpc, RawAndBytesContentsDecode) {
  pb::ModelInferRequest raw = bytes_request({2, 2});
  raw.add_raw_input_contents(pack_bytes(Tensor::from_strings(Shape{4}, kWords)));
  InferRequest a;
  Status s = decode_infer_request(raw, &a);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(a.inputs.at("w").shape(), (Shape{2, 2}));
  EXPECT_EQ(strings_of(a.inputs.at("w")), kWords);

  pb::ModelInferRequest typed = bytes_request({4});
  for (const std::string& w : kWords) typed.mutable_inputs(0)->mutable_contents()->add_bytes_contents(w);
  InferRequest b;
  s = decode_infer_request(typed, &b);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(strings_of(b.inputs.at("w")), kWords);

  pb::ModelInferRequest short_typed = bytes_request({5});
  *short_typed.mutable_inputs(0)->mutable_contents() = typed.inputs(0).contents();
  InferRequest c;
  s = decode_infer_request(short_typed, &c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("4 elements in bytes_contents, expected 5"), std::string::npos) << s.message();

  pb::ModelInferRequest bad_raw = bytes_request({1});
  bad_raw.add_raw_input_contents(std::string("\x10\0\0\0abc", 7));
  InferRequest d;
  s = decode_infer_request(bad_raw, &d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input 'w': BYTES element 0 has length 16"), std::string::npos) << s.message();
}

TEST(BytesGrpc, OutputsAreLengthPrefixed) {
  InferResponse r;
  r.outputs["label"] = Tensor::from_strings(Shape{1, 2}, {"x", ""});
  pb::ModelInferResponse out;
  ASSERT_TRUE(encode_infer_response(r, {}, &out).ok());
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).datatype(), "BYTES");
  EXPECT_EQ(out.raw_output_contents(0), std::string("\x01\0\0\0x\0\0\0\0", 9));
}

}  // namespace
}  // namespace streamline::serve
