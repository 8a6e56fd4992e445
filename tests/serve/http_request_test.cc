// Reading HTTP requests apart from the socket (http_request.h), as a connection reads them: the
// limits answer with their status, pipelined requests come out in order however the stream cuts
// them, paths split into decoded segments, and the binary extension's framing is checked.

#include "serve/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace streamline::serve::http_detail {
namespace {

std::string post(const std::string& target, const std::string& body, const std::string& headers = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\n" + headers + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

std::string chunked(const std::string& body, const std::string& trailer) {
  return "POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
         std::to_string(body.size()) + "\r\n" + body + "\r\n0\r\n" + trailer + "\r\n";
}

std::string error_of(const Response& r) {
  return r.body();
}

TEST(HttpRequestTest, PipelinedRequestsComeOutInOrderHoweverTheStreamCutsThem) {
  const std::string bytes =
      "GET /v2 HTTP/1.1\r\nHost: x\r\n\r\n" + post("/v2/models/m/infer", "{\"a\":1}") + chunked("hello", "X-T: 1\r\n") +
      "GET /v2/health/live HTTP/1.1\r\nConnection: close\r\n\r\n" + "GET /never-read HTTP/1.1\r\n\r\n";
  for (size_t step : {1, 2, 5, 64, 4096}) {
    std::vector<ReadOutcome> out = read_requests(bytes, {}, step);
    ASSERT_EQ(out.size(), 4u) << "step " << step;
    for (const ReadOutcome& o : out) ASSERT_TRUE(o.request.has_value()) << "step " << step;
    EXPECT_EQ(out[0].request->target(), "/v2");
    EXPECT_EQ(out[1].request->body(), "{\"a\":1}");
    EXPECT_EQ(out[2].request->body(), "hello");
    EXPECT_EQ(out[3].request->target(), "/v2/health/live");  // Connection: close ends the reading
  }
}

TEST(HttpRequestTest, LimitsAnswerWithTheirStatus) {
  // A trailer over 64 KiB: 431 naming the trailers (Beast alone would close without a word).
  std::vector<ReadOutcome> t = read_requests(chunked("hi", "X-T: " + std::string(70'000, 'a') + "\r\n"), {});
  ASSERT_EQ(t.size(), 1u);
  ASSERT_TRUE(t[0].refusal.has_value());
  EXPECT_EQ(t[0].refusal->result_int(), 431u);
  EXPECT_NE(error_of(*t[0].refusal).find("trailers"), std::string::npos) << error_of(*t[0].refusal);
  // Headers over 64 KiB.
  auto h = read_requests("GET /v2 HTTP/1.1\r\nX: " + std::string(70'000, 'h') + "\r\n\r\n", {});
  ASSERT_TRUE(h.at(0).refusal.has_value());
  EXPECT_EQ(h[0].refusal->result_int(), 431u);
  // A JSON body declared over the JSON limit: 413 before its body is read.
  auto j =
      read_requests("POST /v2/models/m/infer HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{", {.body = 4096, .json = 100});
  ASSERT_TRUE(j.at(0).refusal.has_value());
  EXPECT_EQ(j[0].refusal->result_int(), 413u);
  EXPECT_NE(error_of(*j[0].refusal).find("--max-json-body-mb"), std::string::npos);
  // With the binary extension the body limit applies instead.
  auto b = read_requests(post("/v2/models/m/infer", std::string(1000, 'b'), "Inference-Header-Content-Length: 2\r\n"),
                         {.body = 4096, .json = 100});
  ASSERT_TRUE(b.at(0).request.has_value());
  auto over =
      read_requests(post("/v2/models/m/infer", std::string(5000, 'b'), "Inference-Header-Content-Length: 2\r\n"),
                    {.body = 4096, .json = 100});
  ASSERT_TRUE(over.at(0).refusal.has_value());
  EXPECT_EQ(over[0].refusal->result_int(), 413u);
  // A chunked JSON body is counted as it arrives.
  auto c = read_requests(chunked(std::string(200, 'c'), ""), {.body = 4096, .json = 100});
  ASSERT_TRUE(c.at(0).refusal.has_value());
  EXPECT_EQ(c[0].refusal->result_int(), 413u);
}

TEST(HttpRequestTest, MalformedRequestsGet400AndEndTheStream) {
  for (const std::string bad : {"GARBAGE\r\n\r\n", "GET /v2 HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                                "POST /v2 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    auto out = read_requests(bad + "GET /v2 HTTP/1.1\r\n\r\n", {});
    ASSERT_EQ(out.size(), 1u) << bad;
    ASSERT_TRUE(out[0].refusal.has_value()) << bad;
    EXPECT_EQ(out[0].refusal->result_int(), 400u) << bad;
    EXPECT_NE(error_of(*out[0].refusal).find("malformed HTTP request"), std::string::npos);
  }
  // The stream ends inside a request: partial, answered 400; before any byte: nothing.
  auto partial = read_requests(post("/v2/models/m/infer", "{\"a\":1}").substr(0, 60), {});
  ASSERT_EQ(partial.size(), 1u);
  ASSERT_TRUE(partial[0].refusal.has_value());
  EXPECT_EQ(partial[0].refusal->result_int(), 400u);
  EXPECT_TRUE(read_requests("", {}).empty());
}

TEST(HttpRequestTest, SplitsTargetsIntoDecodedSegments) {
  auto s = split_target("/v2/models/a%2Fb%20c/versions/1/infer?x=1");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (std::vector<std::string>{"v2", "models", "a/b c", "versions", "1", "infer"}));
  EXPECT_EQ(*split_target("/v2/"), (std::vector<std::string>{"v2"}));
  EXPECT_EQ(split_target("v2").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(split_target("").status().code(), StatusCode::kInvalidArgument);
  for (const char* bad : {"/v2/%zz", "/v2/%2", "/v2/%"})
    EXPECT_EQ(split_target(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  EXPECT_EQ(split_target("/v2//models").status().code(), StatusCode::kNotFound);
}

Request infer_request(const std::string& body, const std::vector<std::pair<std::string, std::string>>& headers) {
  Request r{http::verb::post, "/v2/models/m/infer", 11};
  for (const auto& [k, v] : headers) r.insert(k, v);
  r.body() = body;
  return r;
}

TEST(HttpRequestTest, ChecksTheBinaryFraming) {
  EXPECT_FALSE(infer_framing(infer_request("{}", {}), 100).header_length.has_value());
  InferFraming ok = infer_framing(infer_request("{}raw", {{"Inference-Header-Content-Length", "2"}}), 100);
  ASSERT_FALSE(ok.refusal.has_value());
  EXPECT_EQ(ok.header_length, 2u);
  // The same value twice is one value; two values are refused.
  EXPECT_FALSE(infer_framing(infer_request("{}raw", {{"Inference-Header-Content-Length", "2"},
                                                     {"Inference-Header-Content-Length", "2"}}),
                             100)
                   .refusal.has_value());
  InferFraming two = infer_framing(
      infer_request("{}raw", {{"Inference-Header-Content-Length", "2"}, {"Inference-Header-Content-Length", "3"}}),
      100);
  ASSERT_TRUE(two.refusal.has_value());
  EXPECT_EQ(two.refusal->result_int(), 400u);
  for (const char* bad : {"9", "-1", "x", "1.5"}) {
    InferFraming f = infer_framing(infer_request("{}raw", {{"Inference-Header-Content-Length", bad}}), 100);
    ASSERT_TRUE(f.refusal.has_value()) << bad;
    EXPECT_EQ(f.refusal->result_int(), 400u) << bad;
  }
  InferFraming big =
      infer_framing(infer_request(std::string(300, ' '), {{"Inference-Header-Content-Length", "200"}}), 100);
  ASSERT_TRUE(big.refusal.has_value());
  EXPECT_EQ(big.refusal->result_int(), 413u);
  // An empty Inference-Header-Content-Length makes the whole body JSON: the JSON limit holds.
  InferFraming empty =
      infer_framing(infer_request(std::string(300, ' '), {{"Inference-Header-Content-Length", ""}}), 100);
  ASSERT_TRUE(empty.refusal.has_value());
  EXPECT_EQ(empty.refusal->result_int(), 413u);
  EXPECT_FALSE(infer_framing(infer_request("{}", {{"Inference-Header-Content-Length", ""}}), 100).refusal.has_value());
  InferFraming gz = infer_framing(infer_request("{}", {{"Content-Encoding", "gzip"}}), 100);
  ASSERT_TRUE(gz.refusal.has_value());
  EXPECT_EQ(gz.refusal->result_int(), 400u);
  EXPECT_FALSE(infer_framing(infer_request("{}", {{"Content-Encoding", "identity"}}), 100).refusal.has_value());
}

}  // namespace
}  // namespace streamline::serve::http_detail
