#include "serve/bytes_wire.h"

#include <cstdint>
#include <cstring>

namespace streamline::serve {

size_t wire_bytes(const Tensor& t) {
  if (t.dtype() != DType::kString) return t.nbytes();
  size_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += 4 + t.strings()[i].size();
  return n;
}

void append_wire(const Tensor& t, std::string* out) {
  if (t.dtype() != DType::kString) {
    if (t.nbytes()) out->append(static_cast<const char*>(t.raw()), t.nbytes());
    return;
  }
  out->reserve(out->size() + wire_bytes(t));
  for (int64_t i = 0; i < t.numel(); ++i) {
    const std::string& s = t.strings()[i];
    const auto len = static_cast<uint32_t>(s.size());
    const char prefix[4] = {static_cast<char>(len & 0xFF), static_cast<char>((len >> 8) & 0xFF),
                            static_cast<char>((len >> 16) & 0xFF), static_cast<char>((len >> 24) & 0xFF)};
    out->append(prefix, 4);
    out->append(s);
  }
}

Status unpack_bytes(std::string_view raw, Tensor* t) {
  if (t->dtype() != DType::kString) return internal_error("unpack_bytes into a " + t->describe());
  size_t at = 0;
  for (int64_t i = 0; i < t->numel(); ++i) {
    if (raw.size() - at < 4)
      return invalid_argument("BYTES element " + std::to_string(i) + " of " + std::to_string(t->numel()) +
                              ": the data ends inside its 4-byte length (" + std::to_string(raw.size()) + " bytes)");
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data() + at);
    const uint32_t len = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
    at += 4;
    if (len > raw.size() - at)
      return invalid_argument("BYTES element " + std::to_string(i) + " has length " + std::to_string(len) + " but " +
                              std::to_string(raw.size() - at) + " bytes are left");
    t->strings()[i].assign(raw.data() + at, len);
    at += len;
  }
  if (at != raw.size())
    return invalid_argument("BYTES data holds " + std::to_string(raw.size() - at) + " bytes after its " +
                            std::to_string(t->numel()) + " elements");
  return ok_status();
}

}  // namespace streamline::serve
