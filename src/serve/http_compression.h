#pragma once
// HTTP body compression (Content-Encoding / Accept-Encoding) with zlib: gzip and deflate, as
// Triton's HTTP front end and tritonclient's request_compression_algorithm /
// response_compression_algorithm use them.
//
//   SL_ASSIGN_OR_RETURN(std::string body, decompress_body(req.body(), "gzip", limit));
//   if (auto enc = pick_encoding(req[http::field::accept_encoding])) res.body() = compress_body(b, *enc);
//
// Pure functions; thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace streamline::serve {

enum class BodyEncoding { kGzip, kDeflate };
const char* body_encoding_name(BodyEncoding e);  // "gzip", "deflate"

// The Content-Encoding value as an encoding: nullopt for "" and "identity"; Unsupported for any
// other (the message names the value).
[[nodiscard]] Result<std::optional<BodyEncoding>> parse_content_encoding(std::string_view value);
// The first of gzip and deflate that an Accept-Encoding value accepts (q > 0); nullopt otherwise.
std::optional<BodyEncoding> pick_encoding(std::string_view accept_encoding);

// Inflates `body`; InvalidArgument for corrupt or truncated data, ResourceExhausted when the
// result would exceed `max_bytes` (a small body must not inflate without bound).
[[nodiscard]] Result<std::string> decompress_body(std::string_view body, BodyEncoding encoding, uint64_t max_bytes);
std::string compress_body(std::string_view body, BodyEncoding encoding);

}  // namespace streamline::serve
