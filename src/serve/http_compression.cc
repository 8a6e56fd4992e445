// gzip and deflate bodies through zlib's streaming API (http_compression.h).

#include "serve/http_compression.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "serve/echo.h"

namespace streamline::serve {
namespace {

// zlib's window bits: 15 for deflate's zlib format, +16 for gzip's.
int window_bits(BodyEncoding e) { return e == BodyEncoding::kGzip ? 15 + 16 : 15; }

std::string lower_trim(std::string_view v) {
  std::string s;
  for (char c : v)
    if (!std::isspace(static_cast<unsigned char>(c))) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const char* body_encoding_name(BodyEncoding e) { return e == BodyEncoding::kGzip ? "gzip" : "deflate"; }

Result<std::optional<BodyEncoding>> parse_content_encoding(std::string_view value) {
  const std::string v = lower_trim(value);
  if (v.empty() || v == "identity") return std::optional<BodyEncoding>();
  if (v == "gzip" || v == "x-gzip") return std::optional<BodyEncoding>(BodyEncoding::kGzip);
  if (v == "deflate") return std::optional<BodyEncoding>(BodyEncoding::kDeflate);
  return unsupported("Content-Encoding '" + echo(value) + "' is not supported (gzip, deflate or identity)");
}

std::optional<BodyEncoding> pick_encoding(std::string_view accept_encoding) {
  bool gzip = false, deflate = false;
  const std::string v = lower_trim(accept_encoding);
  size_t pos = 0;
  while (pos <= v.size()) {
    const size_t end = std::min(v.find(',', pos), v.size());
    const std::string item = v.substr(pos, end - pos);
    const size_t semi = item.find(';');
    const std::string coding = item.substr(0, semi);
    double q = 1;
    if (semi != std::string::npos && item.compare(semi + 1, 2, "q=") == 0) q = std::strtod(item.c_str() + semi + 3, nullptr);
    if (q > 0 && (coding == "gzip" || coding == "x-gzip")) gzip = true;
    if (q > 0 && coding == "deflate") deflate = true;
    pos = end + 1;
  }
  if (gzip) return BodyEncoding::kGzip;
  if (deflate) return BodyEncoding::kDeflate;
  return std::nullopt;
}

Result<std::string> decompress_body(std::string_view body, BodyEncoding encoding, uint64_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, window_bits(encoding)) != Z_OK) return internal_error("zlib: inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  std::string out;
  char buf[64 * 1024];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      const std::string why = z.msg ? z.msg : (rc == Z_BUF_ERROR ? "truncated data" : "corrupt data");
      inflateEnd(&z);
      return invalid_argument(std::string("the ") + body_encoding_name(encoding) + " body cannot be decompressed: " + why);
    }
    out.append(buf, sizeof buf - z.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&z);
      return resource_exhausted("the decompressed body is larger than " + std::to_string(max_bytes) + " bytes");
    }
    if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      return invalid_argument(std::string("the ") + body_encoding_name(encoding) + " body is truncated");
    }
  }
  inflateEnd(&z);
  return out;
}

std::string compress_body(std::string_view body, BodyEncoding encoding) {
  z_stream z{};
  deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits(encoding), 8, Z_DEFAULT_STRATEGY);
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(body.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  z.avail_in = static_cast<uInt>(body.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace streamline::serve
