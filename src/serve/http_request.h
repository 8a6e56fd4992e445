#pragma once
// Reading one HTTP request, apart from the socket: the parser's limits, the JSON limit once the
// header is in, the answer to a malformed or oversized request, the path's segments and the
// binary extension's framing. HttpSession runs these steps on its connection; read_requests()
// runs the same steps over bytes in memory (the fuzzer and the tests use it).
//
//   RequestReader reader({.body = max_request_bytes, .json = max_json_bytes});
//   http::async_read_header(stream, buffer, reader.parser(), ...);
//   if (std::optional<Response> refusal = reader.check_header()) send(*refusal);  // 413, then close
//   http::async_read(stream, buffer, reader.parser(), ...);
//   if (ec) if (std::optional<Response> answer = reader.refusal_for(ec)) send(*answer);
//   Result<std::vector<std::string>> seg = split_target(target);     // /v2/models/m%20x -> v2,models,m x
//   InferFraming f = infer_framing(request, max_json_bytes);         // binary header length or refusal
//
// Nothing here throws on client input: every malformed request gets a response with its status
// (400, 413, 431) or is a stream that ended. Not thread-safe; one reader per request.

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace streamline::serve::http_detail {

namespace beast = boost::beast;
namespace http = beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using Parser = http::request_parser<http::string_body>;

// Request line and headers together. Also the most bytes read ahead of the parser, which bounds
// chunk-size lines and trailers (Beast bounds neither, and throws on a field over 64 KB).
constexpr uint32_t kHeaderLimit = 64 * 1024;
constexpr const char* kJson = "application/json";

struct RequestLimits {
  // Largest body (ServerOptions::max_request_bytes); 0 or less: no body at all.
  int64_t body = int64_t{256} << 20;
  // Largest JSON text (HttpOptions::max_json_bytes): the whole body without the binary
  // extension, else its Inference-Header-Content-Length part.
  int64_t json = int64_t{64} << 20;
};

// One request being read: a parser with the header limit and the body limit, narrowed to the
// JSON limit once the header shows that the whole body is JSON.
class RequestReader {
 public:
  explicit RequestReader(RequestLimits limits);

  Parser& parser() { return parser_; }
  const Parser& parser() const { return parser_; }
  // The limit the body is read against now.
  uint64_t body_limit() const { return body_limit_; }

  // After the header: nullopt to go on with the body; else the 413 to send, after which the
  // connection closes (a JSON body declared larger than the JSON limit).
  [[nodiscard]] std::optional<Response> check_header();
  // The answer to a read that failed: 400 for a malformed request, 413 for a body over the
  // limit, 431 for headers, trailers or a chunk-size line over kHeaderLimit. nullopt when the
  // stream ended or failed (end of stream, a socket error): close without an answer.
  [[nodiscard]] std::optional<Response> refusal_for(beast::error_code ec) const;

 private:
  Parser parser_;
  uint64_t body_limit_;
  uint64_t json_limit_;
};

// The path of a request target (before any '?') as decoded segments: "/v2/models/a%2Fb/infer" ->
// {"v2", "models", "a/b", "infer"}; a trailing slash is dropped. InvalidArgument when the target
// is not a path or has a malformed %-escape; NotFound when a segment is empty ("/v2//models").
[[nodiscard]] Result<std::vector<std::string>> split_target(std::string_view target);

// How an inference request's body is framed: the binary extension's JSON header length
// (nullopt: the whole body is JSON), or the answer refusing its headers: an unsupported
// Content-Encoding, Inference-Header-Content-Length repeated with different values or not a
// length within the body (400), or a JSON header over `json_limit` (413).
struct InferFraming {
  std::optional<size_t> header_length;
  std::optional<Response> refusal;
};
[[nodiscard]] InferFraming infer_framing(const Request& req, int64_t json_limit);

// What read_requests() found for one request: the request, or the answer to a malformed one
// (the last of the stream), or neither when the stream ended inside or before a request.
struct ReadOutcome {
  std::optional<Request> request;
  std::optional<Response> refusal;
};

// Reads the requests pipelined in `bytes` as a connection reads them (one buffer of kHeaderLimit
// across requests, a 100-continue answered at once), the stream giving at most `read_size`
// bytes per read. Stops after a refusal, a request that does not keep the connection alive, or
// the end of the bytes.
[[nodiscard]] std::vector<ReadOutcome> read_requests(std::string_view bytes, RequestLimits limits,
                                                     size_t read_size = 4096);

// Responses with the Server header; error bodies are {"error": "..."} with the message capped.
Response make_response(unsigned status, std::string body, const char* content_type);
Response error_response(unsigned status, std::string_view message);
Response status_response(const Status& s);

}  // namespace streamline::serve::http_detail
