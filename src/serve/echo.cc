#include "serve/echo.h"

#include <cstdint>

namespace streamline::serve {

std::string echo(std::string_view s, size_t limit) {
  if (s.size() <= limit) return std::string(s);
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // a continuation byte
  return std::string(s.substr(0, cut)) + "... (" + std::to_string(s.size() - cut) + " more)";
}

std::string dims_text(const std::vector<int64_t>& dims, size_t limit) {
  std::string out = "[";
  const size_t shown = dims.size() <= limit ? dims.size() : limit;
  for (size_t i = 0; i < shown; ++i) {
    if (i) out += ',';
    out += std::to_string(dims[i]);
  }
  if (shown < dims.size()) out += ",... (" + std::to_string(dims.size() - shown) + " more)";
  return out + "]";
}

std::string cap_message(std::string_view message) {
  return valid_utf8(echo(message, kMaxErrorMessage));
}

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0)
    n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0)
    n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0)
    n = 4, cp = c & 0x07;
  else
    return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += '?';
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace streamline::serve
