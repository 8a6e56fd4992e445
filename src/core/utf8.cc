#include "core/utf8.h"

namespace streamline {

std::u32string utf8_decode(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t extra = 0;
    char32_t cp = c;
    if (c >= 0xC2 && c < 0xE0) {
      extra = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c < 0xF0) {
      extra = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c < 0xF5) {
      extra = 3;
      cp = c & 0x07;
    }
    bool ok = c < 0x80 || (extra > 0 && i + extra < s.size());
    for (size_t k = 1; ok && k <= extra; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(kEscapedByte + c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += extra + 1;
  }
  return out;
}

std::string utf8_encode(const std::u32string& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) {
    if (cp >= kEscapedByte + 0x80 && cp <= kEscapedByte + 0xFF) {
      out += static_cast<char>(cp - kEscapedByte);
    } else if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

}  // namespace streamline
