#pragma once
// UTF-8 <-> code points, for string kernels (case mapping) and .npy unicode arrays.
//
//   std::u32string cps = utf8_decode("caf\xc3\xa9");   // {'c', 'a', 'f', U'\u00e9'}
//   std::string s = utf8_encode(cps);                   // the same bytes back
//
// Bytes that are not valid UTF-8 decode to kEscapedByte + byte (as Python's "surrogateescape"
// does) and encode back to the same byte, so a round trip never changes a string.

#include <string>

namespace streamline {

inline constexpr char32_t kEscapedByte = 0xDC00;

std::u32string utf8_decode(const std::string& s);
std::string utf8_encode(const std::u32string& cps);

}  // namespace streamline
