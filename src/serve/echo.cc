#include "serve/echo.h"

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
  return echo(message, kMaxErrorMessage);
}

}  // namespace streamline::serve
