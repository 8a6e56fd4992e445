// The range validators' messages, and that the command line turns CLI11's usage errors into
// exit code 2.

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
