#include "cli_flags.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace streamline::tools {
namespace {

// "86400", "0.5", "1e+06": short forms, never the 300 digits of a double's maximum.
std::string number_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *out = v;
  return true;
}

bool parse_number(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || errno == ERANGE || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

std::string with_note(std::string text, const std::string& note) {
  return note.empty() ? text : text + " (" + note + ")";
}

}  // namespace

CLI::Validator int_range(int64_t lo, int64_t hi, const std::string& note) {
  const std::string expected =
      with_note("expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi), note);
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        int64_t v = 0;
        if (!parse_int(value, &v)) return "'" + value + "' is not an integer: " + expected;
        if (v < lo || v > hi) return value + " is out of range: " + expected;
        return {};
      },
      "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator number_range(double lo, double hi, bool lo_open, const std::string& note) {
  const std::string expected =
      with_note(lo_open ? "expected a number above " + number_text(lo) + " and at most " + number_text(hi)
                        : "expected a number from " + number_text(lo) + " to " + number_text(hi),
                note);
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        double v = 0;
        if (!parse_number(value, &v)) return "'" + value + "' is not a number: " + expected;
        if ((lo_open ? v <= lo : v < lo) || v > hi) return value + " is out of range: " + expected;
        return {};
      },
      std::string(lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + "]");
}

CLI::Validator seconds_range(bool allow_zero) {
  return number_range(0, kMaxSeconds, !allow_zero, "seconds");
}

Result<std::vector<int>> parse_count_range(const std::string& flag, const std::string& text, int64_t lo, int64_t hi) {
  const std::string form = "expected start[:end[:step]] with integers from " + std::to_string(lo) + " to " +
                           std::to_string(hi) + " and end >= start";
  std::vector<int64_t> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ':')) {
    int64_t x = 0;
    if (!parse_int(item, &x))
      return invalid_argument(flag + " '" + text + "': '" + item + "' is not an integer; " + form);
    if (x < lo || x > hi) return invalid_argument(flag + " '" + text + "': " + item + " is out of range; " + form);
    v.push_back(x);
  }
  if (v.empty() || v.size() > 3 || (!text.empty() && text.back() == ':'))
    return invalid_argument(flag + " '" + text + "': " + form);
  const int64_t start = v[0], end = v.size() > 1 ? v[1] : v[0], step = v.size() > 2 ? v[2] : 1;
  if (end < start)
    return invalid_argument(flag + " '" + text + "': end " + std::to_string(end) + " is below start " +
                            std::to_string(start) + "; " + form);
  std::vector<int> steps;
  for (int64_t c = start; c <= end; c += step) steps.push_back(static_cast<int>(c));
  return steps;
}

CLI::Validator count_range(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        // CLI11 prefixes the flag's name; the message repeats only the value and the form.
        auto r = parse_count_range("", value, lo, hi);
        return r.ok() ? std::string() : r.status().message().substr(1);
      },
      "START[:END[:STEP]]");
}

}  // namespace streamline::tools
