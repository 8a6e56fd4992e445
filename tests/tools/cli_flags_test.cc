// Every numeric flag of every command refuses an out-of-range value at parse time, before any
// model or server is touched: exit code 2 and a message naming the flag and the allowed range.

#include "tools/cli_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/cli_app.h"

namespace streamline::tools {
namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
};

// Runs the command line in this process, capturing what it prints.
CliRun run_cli(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"streamline"};
  for (const auto& a : args) argv.push_back(a.c_str());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  CliRun r;
  r.code = run_command_line(static_cast<int>(argv.size()), argv.data());
  r.err = testing::internal::GetCapturedStderr();
  r.out = testing::internal::GetCapturedStdout();
  return r;
}

struct BadFlag {
  std::vector<std::string> args;  // the command, its positionals and the bad flag
  std::string expected;           // in the message after "error: <flag>: "
};

// The model / folder / server the commands name never exist: the parse must fail first.
const std::vector<BadFlag> kBadFlags = {
    {{"run", "m.onnx", "--threads", "-1"}, "expected an integer from 0 to 1024 (0: all cores)"},
    {{"run", "m.onnx", "--threads", "100000"}, "expected an integer from 0 to 1024"},
    {{"run", "m.onnx", "--streams", "0"}, "expected an integer from 1 to 64"},
    {{"run", "m.onnx", "--threads-per-stream", "-2"}, "expected an integer from 0 to 1024"},
    {{"run", "m.onnx", "--split-convs", "65"}, "expected an integer from 0 to 64 (0: off)"},
    {{"run", "m.onnx", "--batch", "0"}, "expected an integer from 1 to 65536"},
    {{"run", "m.onnx", "--seed", "-1"}, "expected an integer from 0 to 4294967295"},
    {{"bench", "m.onnx", "--seconds", "0"}, "expected a number above 0 and at most 86400 (seconds)"},
    {{"bench", "m.onnx", "--seconds", "nan"}, "is not a number"},
    {{"bench", "m.onnx", "--warmup", "-1"}, "expected a number from 0 to 86400"},
    {{"bench", "m.onnx", "--max-runs", "-3"}, "(0: no limit)"},
    {{"bench", "m.onnx", "--concurrency", "0"}, "expected an integer from 1 to 4096"},
    {{"bench", "m.onnx", "--instances", "0"}, "expected an integer from 1 to 1024"},
    {{"bench", "m.onnx", "--max-batch", "0"}, "expected an integer from 1 to 65536"},
    {{"bench", "m.onnx", "--max-queue-delay-us", "-1"}, "expected an integer from 0 to 3600000000"},
    {{"bench", "m.onnx", "--request-rate", "0"}, "expected a number above 0 and at most 1e+06"},
    {{"bench", "m.onnx", "--threads-per-instance", "-1"}, "expected an integer from 0 to 1024"},
    {{"bench", "m.onnx", "--max-queue-size", "-1"}, "(0: no bound)"},
    {{"bench", "m.onnx", "--timeout-us", "-5"}, "expected an integer from 0 to 3600000000"},
    {{"bench", "m.onnx", "--threads", "two"}, "'two' is not an integer"},
    {{"plan", "m.onnx", "--streams", "65"}, "expected an integer from 1 to 64"},
    {{"plan", "m.onnx", "--batch", "70000"}, "expected an integer from 1 to 65536"},
    {{"conformance", "cases", "--timeout", "0"}, "expected a number above 0"},
    {{"conformance", "cases", "--threads", "0"}, "expected an integer from 1 to 1024"},
    {{"conformance", "cases", "--jobs", "0"}, "expected an integer from 1 to 256"},
    {{"conformance", "cases", "--memory-limit", "-1"}, "(MiB; 0: none)"},
    {{"perf", "-m", "m", "--concurrency-range", "0:4"}, "expected start[:end[:step]] with integers from 1 to 4096"},
    {{"perf", "-m", "m", "--concurrency-range", "4:2"}, "end 2 is below start 4"},
    {{"perf", "-m", "m", "--concurrency-range", "1:8:0"}, "0 is out of range"},
    {{"perf", "-m", "m", "--concurrency-range", "1:x"}, "'x' is not an integer"},
    {{"perf", "-m", "m", "--concurrency-range", "1:2:3:4"}, "expected start[:end[:step]]"},
    {{"perf", "-m", "m", "--request-rate", "-1"}, "expected a number above 0"},
    {{"perf", "-m", "m", "--max-threads", "0"}, "expected an integer from 1 to 4096"},
    {{"perf", "-m", "m", "--seconds", "0"}, "expected a number above 0 and at most 86400"},
    {{"perf", "-m", "m", "--warmup-s", "-1"}, "expected a number from 0 to 86400"},
    {{"perf", "-m", "m", "--batch", "0"}, "expected an integer from 1 to 65536"},
    {{"perf", "-m", "m", "--measurement-interval", "0"}, "expected an integer from 1 to 86400000 (milliseconds)"},
    {{"perf", "-m", "m", "--percentile", "100"}, "expected an integer from 1 to 99"},
    {{"perf", "-m", "m", "--request-rate-range", "0:5"}, "0 is out of range; expected start[:end[:step]] with rates"},
    {{"perf", "-m", "m", "--request-rate-range", "5:2"}, "end 2.000 is below start 5.000"},
    {{"serve", "--model-repository", "r", "--http-port", "70000"}, "from -1 to 65535 (-1: off, 0: any free port)"},
    {{"serve", "--model-repository", "r", "--grpc-port", "-2"}, "from -1 to 65535"},
    {{"serve", "--model-repository", "r", "--metrics-port", "65536"}, "from -1 to 65535"},
    {{"serve", "--model-repository", "r", "--drain-timeout-s", "-1"}, "expected a number from 0 to 86400"},
    {{"serve", "--model-repository", "r", "--instances", "0"}, "expected an integer from 1 to 1024"},
    {{"serve", "--model-repository", "r", "--threads", "-1"}, "expected an integer from 0 to 1024"},
    {{"serve", "--model-repository", "r", "--http-threads", "0"}, "expected an integer from 1 to 64"},
    {{"classify", "m.onnx", "a.png", "--top-k", "0"}, "expected an integer from 1 to 1000000"},
    {{"classify", "m.onnx", "a.png", "--size", "0"}, "expected an integer from 1 to 65536 (pixels)"},
    {{"classify", "m.onnx", "a.png", "--resize", "0"}, "expected an integer from 1 to 65536"},
    {{"classify", "m.onnx", "a.png", "--max-batch", "0"}, "expected an integer from 1 to 1024"},
};

TEST(CliFlags, EveryNumericFlagIsRangeChecked) {
  for (const BadFlag& b : kBadFlags) {
    std::string cmd;
    for (const auto& a : b.args) cmd += " " + a;
    SCOPED_TRACE("streamline" + cmd);
    const std::string flag = b.args[b.args.size() - 2];
    const CliRun r = run_cli(b.args);
    EXPECT_EQ(r.code, kUsageError) << r.err;
    EXPECT_EQ(r.err.rfind("error: " + flag + ": ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(b.expected), std::string::npos) << r.err;
    // A range reads as numbers a person can check, not the 309 digits of a double's maximum.
    EXPECT_LT(r.err.size(), 300u) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(CliFlags, UsageErrorsFromCli11AreExitCode2) {
  const CliRun unknown = run_cli({"bench", "m.onnx", "--no-such-flag"});
  EXPECT_EQ(unknown.code, kUsageError);
  EXPECT_NE(unknown.err.find("--no-such-flag"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("streamline bench --help"), std::string::npos) << unknown.err;
  EXPECT_EQ(run_cli({"bench"}).code, kUsageError);  // the model is required
}

TEST(CliFlags, HelpIsNotAnError) {
  const CliRun r = run_cli({"bench", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("--seconds"), std::string::npos);
}

TEST(CliFlags, RangeValidatorsAcceptTheirBounds) {
  std::string v = "1";
  EXPECT_EQ(int_range(1, 64)(v), "");
  v = "64";
  EXPECT_EQ(int_range(1, 64)(v), "");
  v = "65";
  EXPECT_EQ(int_range(1, 64)(v), "65 is out of range: expected an integer from 1 to 64");
  v = "0";
  EXPECT_EQ(seconds_range(true)(v), "");
  EXPECT_EQ(seconds_range(false)(v), "0 is out of range: expected a number above 0 and at most 86400 (seconds)");
  v = "0.001";
  EXPECT_EQ(seconds_range(false)(v), "");
  v = "inf";
  EXPECT_NE(seconds_range(false)(v), "");
}

TEST(CliFlags, CountRanges) {
  auto steps = parse_count_range("--concurrency-range", "1:8:3", 1, 4096);
  ASSERT_TRUE(steps.ok()) << steps.status().to_string();
  EXPECT_EQ(*steps, (std::vector<int>{1, 4, 7}));
  EXPECT_EQ(*parse_count_range("--concurrency-range", "5", 1, 4096), std::vector<int>{5});
  EXPECT_EQ(*parse_count_range("--concurrency-range", "2:3", 1, 4096), (std::vector<int>{2, 3}));
  for (const char* bad : {"", ":", "1:", "0", "4097", "3:2", "1:4:0", "a", "1:2:3:4", "-1:2"})
    EXPECT_FALSE(parse_count_range("--concurrency-range", bad, 1, 4096).ok()) << bad;
  const Status s = parse_count_range("--concurrency-range", "0:4", 1, 4096).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--concurrency-range '0:4'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace streamline::tools
