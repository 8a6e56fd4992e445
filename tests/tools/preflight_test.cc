// Checks made before a command's slow work: missing files and busy ports fail at once, naming
// the flag, and `serve` looks at its ports before it loads a single model.

#include "tools/preflight.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tools/cli_app.h"
#include "tools/cli_flags.h"

namespace streamline::tools {
namespace {

namespace fs = std::filesystem;

struct CliRun {
  int code = -1;
  std::string out, err;
};

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

// A folder of its own under the test's temporary directory, removed at the end.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::path(testing::TempDir()) / ("sl_preflight_" + std::to_string(::getpid()) + "_" +
                                           testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A listening socket on 127.0.0.1 and a port the system picked: busy until destroyed.
struct BusyPort {
  int fd = -1;
  int port = 0;
  BusyPort() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 4) != 0) return;
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~BusyPort() { ::close(fd); }
};

TEST(Preflight, InputFiles) {
  TempDir dir;
  const std::string file = (dir.path / "labels.txt").string();
  std::ofstream(file) << "cat\n";
  EXPECT_TRUE(check_input_file("--labels", file).ok());
  const Status missing = check_input_file("--labels", (dir.path / "missing.txt").string());
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(),
            "--labels: cannot open '" + (dir.path / "missing.txt").string() + "': No such file or directory");
  const Status folder = check_input_file("--labels", dir.path.string());
  EXPECT_EQ(folder.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(folder.message().find("is not a regular file"), std::string::npos) << folder.message();
}

TEST(Preflight, OutputFiles) {
  TempDir dir;
  EXPECT_TRUE(check_output_file("--trace", (dir.path / "t.json").string()).ok());
  EXPECT_TRUE(check_output_file("--trace", "t.json").ok());  // the current folder
  const Status no_dir = check_output_file("--trace", (dir.path / "nope" / "t.json").string());
  EXPECT_EQ(no_dir.code(), StatusCode::kNotFound);
  EXPECT_NE(no_dir.message().find("--trace: cannot write"), std::string::npos) << no_dir.message();
  EXPECT_NE(no_dir.message().find("No such file or directory"), std::string::npos) << no_dir.message();
  EXPECT_FALSE(check_output_file("--trace", dir.path.string()).ok());  // a folder
}

TEST(Preflight, Ports) {
  BusyPort busy;
  ASSERT_GT(busy.port, 0);
  const Status s = check_port_free("--grpc-port", "127.0.0.1", busy.port);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "--grpc-port: 127.0.0.1:" + std::to_string(busy.port) +
                             " is already in use (choose another port, 0 for any free one, -1 for none)");
  // A wildcard listener would collide with the loopback one too.
  EXPECT_FALSE(check_port_free("--grpc-port", "0.0.0.0", busy.port).ok());
  EXPECT_TRUE(check_port_free("--http-port", "127.0.0.1", 0).ok());   // any free port
  EXPECT_TRUE(check_port_free("--http-port", "127.0.0.1", -1).ok());  // endpoint off
  const int free_port = [] {
    BusyPort p;
    return p.port;  // free again once closed
  }();
  EXPECT_TRUE(check_port_free("--http-port", "127.0.0.1", free_port).ok());
  EXPECT_FALSE(check_port_free("--http-port", "no-such-host.invalid", 8000).ok());
}

TEST(Preflight, MissingFilesFailBeforeTheModelLoads) {
  TempDir dir;
  const std::string missing = (dir.path / "missing.txt").string();
  // None of these models exist either: the file flag must be looked at first.
  const struct {
    std::vector<std::string> args;
    std::string expected;
  } cases[] = {
      {{"classify", "m.onnx", "a.png", "--labels", missing},
       "error: NotFound: --labels: cannot open '" + missing + "': No such file or directory"},
      {{"run", "m.onnx", "--input", "x=" + missing},
       "error: NotFound: --input x: cannot open '" + missing + "': No such file or directory"},
      {{"run", "m.onnx", "--pin-streams", missing},
       "error: NotFound: --pin-streams: cannot open '" + missing + "': No such file or directory"},
      {{"bench", "m.onnx", "--trace", (dir.path / "nope" / "t.json").string()},
       "error: NotFound: --trace: cannot write"},
      {{"run", "m.onnx", "--trace", (dir.path / "nope" / "t.json").string()}, "error: NotFound: --trace: cannot write"},
      {{"conformance", dir.path.string(), "--list-passing", (dir.path / "nope" / "p.txt").string()},
       "error: NotFound: --list-passing: cannot write"},
      {{"run", missing}, "does not exist"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args[0] + " " + c.args.back());
    const CliRun r = run_cli(c.args);
    EXPECT_EQ(r.code, kUsageError) << r.err;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
  }
}

TEST(Preflight, ServeChecksItsPortsBeforeLoadingModels) {
  TempDir repo;
  // A model that cannot load: were it loaded first, the error would be about it.
  fs::create_directories(repo.path / "junk" / "1");
  std::ofstream(repo.path / "junk" / "1" / "model.onnx") << "not a protobuf";
  BusyPort busy;
  ASSERT_GT(busy.port, 0);
  const CliRun r = run_cli({"serve", "--model-repository", repo.path.string(), "--http-port", std::to_string(busy.port),
                            "--grpc-port", "0", "--metrics-port", "0"});
  EXPECT_EQ(r.code, kRunFailed) << r.err;
  EXPECT_EQ(r.err, "error: Unavailable: --http-port: 127.0.0.1:" + std::to_string(busy.port) +
                       " is already in use (choose another port, 0 for any free one, -1 for none)\n");
  EXPECT_EQ(r.out.find("junk"), std::string::npos) << r.out;

  const CliRun same = run_cli({"serve", "--model-repository", repo.path.string(), "--http-port", "8100", "--grpc-port",
                               "8100", "--metrics-port", "-1"});
  EXPECT_EQ(same.code, kUsageError) << same.err;
  EXPECT_NE(same.err.find("--grpc-port 8100 is also the --http-port"), std::string::npos) << same.err;
}

}  // namespace
}  // namespace streamline::tools
