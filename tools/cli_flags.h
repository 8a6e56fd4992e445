#pragma once
// Range checks for the CLI's numeric flags, as CLI11 validators whose messages name the allowed
// range in plain numbers:
//
//   c->add_option("--streams", f.streams, "Streams per run")->check(int_range(1, 64));
//   c->add_option("--threads", f.threads, "Total threads")->check(int_range(0, kMaxThreads, "0: all cores"));
//   c->add_option("--seconds", f.seconds, "Measured time")->check(seconds_range(false));
//
// A refused value is a usage error: run_command_line() prints
//   error: --streams: 0 is out of range: expected an integer from 1 to 64
// and exits with kUsageError. The limits below are generous sanity bounds (a typo, a negative
// count, a day-long run), not tuning advice.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace streamline::tools {

// Exit codes of every command.
constexpr int kExitOk = 0;
constexpr int kRunFailed = 1;   // the work itself failed (a run, a request, a write)
constexpr int kUsageError = 2;  // bad flags, a missing file, a model that does not load

constexpr int64_t kMaxThreads = 1024;       // --threads and the like
constexpr int64_t kMaxBatch = 65536;        // --batch, --max-batch
constexpr int64_t kMaxCount = 4096;         // clients, workers (instances: runtime::kMaxInstances)
constexpr double kMaxSeconds = 86400;       // durations and timeouts: a day
constexpr double kMaxRate = 1e6;            // requests per second
constexpr int64_t kMaxMicros = 3600000000;  // microsecond budgets: an hour

// Integers from `lo` to `hi`; `note` (optional) says what special values mean ("0: all cores").
CLI::Validator int_range(int64_t lo, int64_t hi, const std::string& note = "");
// Numbers above `lo` (lo_open) or from `lo`, up to `hi`. NaN and infinities are refused.
CLI::Validator number_range(double lo, double hi, bool lo_open, const std::string& note = "");
// Seconds: above 0 (allow_zero false) or from 0, up to kMaxSeconds.
CLI::Validator seconds_range(bool allow_zero);

// start[:end[:step]] -> the counts start, start+step, ... up to end, each from lo to hi.
// InvalidArgument naming `flag` and the form expected.
Result<std::vector<int>> parse_count_range(const std::string& flag, const std::string& text, int64_t lo, int64_t hi);
// A validator running parse_count_range at parse time.
CLI::Validator count_range(int64_t lo, int64_t hi);

}  // namespace streamline::tools
