// Reading one HTTP request apart from the socket (http_request.h): the limits, the refusals, the
// path, the binary framing, and a memory stream that runs Beast's own read loop over bytes.

#include "serve/http_request.h"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <set>

#include "serve/echo.h"
#include "serve/http_codec.h"
#include "serve/server_core.h"

namespace streamline::serve::http_detail {
namespace {

uint64_t non_negative(int64_t v) {
  return static_cast<uint64_t>(std::max<int64_t>(0, v));
}

// Decodes %XX escapes of a path segment; false on a malformed escape.
bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

// A SyncReadStream over bytes in memory that gives at most `step` bytes per read, so that the
// request boundaries fall where a socket could put them.
class MemoryStream {
 public:
  MemoryStream(std::string_view bytes, size_t step) : bytes_(bytes), step_(std::max<size_t>(1, step)) {}

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, beast::error_code& ec) {
    if (pos_ == bytes_.size()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    const size_t n = boost::asio::buffer_copy(
        buffers, boost::asio::buffer(bytes_.data() + pos_, std::min(step_, bytes_.size() - pos_)));
    pos_ += n;
    return n;
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    beast::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw beast::system_error(ec);
    return n;
  }

 private:
  std::string_view bytes_;
  size_t step_;
  size_t pos_ = 0;
};

}  // namespace

RequestReader::RequestReader(RequestLimits limits)
    : body_limit_(non_negative(limits.body)), json_limit_(non_negative(limits.json)) {
  parser_.header_limit(kHeaderLimit);
  parser_.body_limit(body_limit_);
}

std::optional<Response> RequestReader::check_header() {
  const auto& header = parser_.get();
  // Without the binary extension the whole body is JSON: the JSON limit applies, before the body
  // is read when its length is declared.
  if (header.count("Inference-Header-Content-Length") != 0 || json_limit_ >= body_limit_) return std::nullopt;
  body_limit_ = json_limit_;
  const auto length = parser_.content_length();
  if (length && *length > body_limit_)
    return error_response(413, "JSON request body of " + std::to_string(*length) +
                                   " bytes is larger than the JSON limit of " + std::to_string(body_limit_) +
                                   " bytes (--max-json-body-mb); send large tensors with the binary tensor extension");
  parser_.body_limit(body_limit_);  // a chunked body: counted as it arrives
  return std::nullopt;
}

std::optional<Response> RequestReader::refusal_for(beast::error_code ec) const {
  const auto& http_category = http::make_error_code(http::error::end_of_stream).category();
  if (ec == http::error::end_of_stream || ec.category() != http_category) return std::nullopt;
  if (ec == http::error::body_limit)
    return error_response(413, "request body larger than " + std::to_string(body_limit_) + " bytes");
  if (ec == http::error::header_limit) return error_response(431, "request headers too large");
  if (ec == http::error::buffer_overflow)
    return error_response(431, parser_.is_header_done() ? "request trailers (or a chunk-size line) larger than " +
                                                              std::to_string(kHeaderLimit) + " bytes"
                                                        : "request headers too large");
  return error_response(400, "malformed HTTP request: " + ec.message());
}

Result<std::vector<std::string>> split_target(std::string_view target) {
  target = target.substr(0, target.find('?'));
  if (target.empty() || target[0] != '/') return invalid_argument("the request target must be a path");
  std::vector<std::string> seg;
  for (size_t pos = 1; pos <= target.size();) {
    const size_t end = std::min(target.find('/', pos), target.size());
    std::string s;
    if (!percent_decode(target.substr(pos, end - pos), &s)) return invalid_argument("malformed %-escape in the path");
    seg.push_back(std::move(s));
    pos = end + 1;
  }
  if (!seg.empty() && seg.back().empty() && seg.size() > 1) seg.pop_back();  // a trailing slash
  for (const std::string& s : seg)
    if (s.empty()) return not_found("no such route");
  return seg;
}

InferFraming infer_framing(const Request& req, int64_t json_limit) {
  InferFraming f;
  auto encoding = req[http::field::content_encoding];
  if (!encoding.empty() && encoding != "identity") {
    f.refusal = error_response(
        400, "Content-Encoding '" + echo(std::string_view(encoding.data(), encoding.size())) + "' is not supported");
    return f;
  }
  // One Inference-Header-Content-Length: repeated with different values, which one is meant?
  std::set<std::string> lengths;
  for (auto [it, end] = req.equal_range("Inference-Header-Content-Length"); it != end; ++it)
    lengths.emplace(it->value().data(), it->value().size());
  if (lengths.size() > 1) {
    f.refusal = error_response(400, "Inference-Header-Content-Length is given " + std::to_string(lengths.size()) +
                                        " times with different values");
    return f;
  }
  const std::string header = lengths.empty() ? std::string() : *lengths.begin();
  Result<std::optional<size_t>> header_length = parse_header_length(header, req.body().size());
  if (!header_length.ok()) {
    f.refusal = status_response(header_length.status());
    return f;
  }
  if (header_length->has_value() && **header_length > non_negative(json_limit)) {
    f.refusal = error_response(413, "the JSON header of " + std::to_string(**header_length) +
                                        " bytes is larger than the JSON limit of " +
                                        std::to_string(non_negative(json_limit)) + " bytes (--max-json-body-mb)");
    return f;
  }
  f.header_length = *header_length;
  // An empty Inference-Header-Content-Length lets the body past the reader's JSON limit (the
  // header is there) while the body is still all JSON: the limit applies here, to what is decoded
  // (a decompressed body included).
  if (!f.header_length && req.body().size() > non_negative(json_limit))
    f.refusal = error_response(413, "JSON request body of " + std::to_string(req.body().size()) +
                                        " bytes is larger than the JSON limit of " +
                                        std::to_string(non_negative(json_limit)) +
                                        " bytes (--max-json-body-mb); send large tensors with the binary tensor "
                                        "extension");
  return f;
}

std::vector<ReadOutcome> read_requests(std::string_view bytes, RequestLimits limits, size_t read_size) {
  std::vector<ReadOutcome> out;
  MemoryStream stream(bytes, read_size);
  beast::flat_buffer buffer(kHeaderLimit);
  for (;;) {
    RequestReader reader(limits);
    beast::error_code ec;
    http::read_header(stream, buffer, reader.parser(), ec);
    if (!ec) {
      if (std::optional<Response> refusal = reader.check_header()) {
        out.push_back({std::nullopt, std::move(refusal)});
        return out;
      }
      if (!reader.parser().is_done()) http::read(stream, buffer, reader.parser(), ec);
    }
    if (ec) {
      std::optional<Response> answer = reader.refusal_for(ec);
      if (answer || reader.parser().got_some()) out.push_back({std::nullopt, std::move(answer)});
      return out;
    }
    Request req = reader.parser().release();
    const bool keep = req.keep_alive();
    out.push_back({std::move(req), std::nullopt});
    if (!keep) return out;
  }
}

Response make_response(unsigned status, std::string body, const char* content_type) {
  Response res;
  res.result(status);
  res.set(http::field::server, "streamline");
  if (*content_type != '\0') res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  return res;
}

Response error_response(unsigned status, std::string_view message) {
  return make_response(status, error_json(cap_message(message)), kJson);
}

Response status_response(const Status& s) {
  return error_response(static_cast<unsigned>(http_status(s)), s.message());
}

}  // namespace streamline::serve::http_detail
