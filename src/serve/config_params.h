#pragma once
// Values of config.pbtxt's `parameters` (strings): how model_config.cc checks them and
// model_config_use.cc reads them. Pure functions.
//
//   parse_config_int("8")    -> 8;     parse_config_int("8x") -> nullopt
//   parse_config_bool("on")  -> true;  parse_config_bool("maybe") -> nullopt
//   parse_config_ms("12.5")  -> 12.5;  parse_config_ms("0") -> nullopt

#include <cstdint>
#include <optional>
#include <string>

namespace streamline::serve {

// A whole decimal integer (no sign but '-', nothing after it).
std::optional<int64_t> parse_config_int(const std::string& s);
// true, 1, on, yes / false, 0, off, no.
std::optional<bool> parse_config_bool(const std::string& s);
// Milliseconds above 0 and at most kMaxConfigMs, decimals allowed (latency_slo_ms).
inline constexpr double kMaxConfigMs = 3600e3;
std::optional<double> parse_config_ms(const std::string& s);
// The latency objective admission holds every request of the model to, and the controller steers by.
inline constexpr const char* kLatencySloParam = "latency_slo_ms";
// The online controller: on by default when latency_slo_ms is set; "false" turns it off.
inline constexpr const char* kControllerParam = "controller";
// Length of the controller's window in milliseconds (default 1000).
inline constexpr const char* kControlWindowParam = "control_window_ms";

}  // namespace streamline::serve
