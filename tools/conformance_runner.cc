#include "conformance_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <set>

extern char** environ;

namespace streamline::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxStdout = 64 * 1024;  // the result line is short; anything past this is noise
constexpr size_t kStderrTail = 2048;      // kept for crash details

struct Child {
  size_t index = 0;
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::string out, err;
  Clock::time_point deadline;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Reads what is available on `fd` (non-blocking); closes it at end of file or on an error.
void drain(int& fd, std::string& buf, bool keep_tail, size_t cap) {
  char chunk[4096];
  while (fd >= 0) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buf.append(chunk, static_cast<size_t>(n));
      if (buf.size() > cap) {
        if (keep_tail)
          buf.erase(0, buf.size() - cap);
        else
          buf.resize(cap);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close_fd(fd);
  }
}

// Starts the child for `c`; on failure returns the reason and leaves `child` without a process.
std::string spawn(const CaseInfo& c, const RunnerOptions& o, Child& child) {
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> args{o.exe,          "conformance", c.dir,
                                "--case-child", "--threads",   std::to_string(std::max(1, o.threads))};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) != 0) env.emplace_back(*e);
  env.push_back("OMP_NUM_THREADS=" + std::to_string(std::max(1, o.threads)));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const std::string why = std::string("pipe: ") + std::strerror(errno);
    ::close(out[0]);
    ::close(out[1]);
    return why;
  }
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const rlim_t limit = static_cast<rlim_t>(std::max<int64_t>(0, o.memory_limit_mb)) << 20;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    // A case must not outlive the runner (killed, or interrupted with ^C while a case hangs).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (limit > 0) {
      struct rlimit rl {
        limit, limit
      };
      ::setrlimit(RLIMIT_AS, &rl);
    }
    ::execve(o.exe.c_str(), argv.data(), envp.data());
    static const char msg[] = "exec failed\n";
    [[maybe_unused]] ssize_t w = ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  const int fork_errno = errno;
  if (devnull >= 0) ::close(devnull);
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    return std::string("fork: ") + std::strerror(fork_errno);
  }
  ::setpgid(pid, pid);  // also here, so a kill of the group cannot race the child's own call
  ::fcntl(out[0], F_SETFL, ::fcntl(out[0], F_GETFL) | O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, ::fcntl(err[0], F_GETFL) | O_NONBLOCK);
  child.pid = pid;
  child.out_fd = out[0];
  child.err_fd = err[0];
  child.deadline = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(o.timeout_s * 1e6));
  return "";
}

std::string last_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

std::string timeout_text(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", s);
  return std::string("timeout after ") + b + "s";
}

CaseOutcome judge(const Child& c, int wstatus) {
  const std::string tail = last_line(c.err);
  const std::string stderr_note = tail.empty() ? "" : "; stderr: " + tail;
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    const char* name = ::strsignal(sig);
    return {CaseStatus::kCrashed,
            "killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")" + stderr_note};
  }
  if (auto o = parse_case_line(c.out)) return *o;
  const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  return {CaseStatus::kCrashed, "exited with code " + std::to_string(code) + " without a result" + stderr_note};
}

}  // namespace

Result<std::vector<CaseInfo>> find_cases(const std::string& root) {
  std::error_code ec;
  const fs::path r(root);
  if (!fs::exists(r, ec)) return not_found("'" + root + "' does not exist");
  if (!fs::is_directory(r, ec)) return invalid_argument("'" + root + "' is not a folder");
  std::vector<CaseInfo> cases;
  if (fs::is_regular_file(r / "model.onnx", ec)) {
    fs::path name = r.filename().empty() ? r.parent_path().filename() : r.filename();
    cases.push_back({name.string(), r.string()});
    return cases;
  }
  // Links are followed (suites are often linked into one folder); link cycles end at folders
  // already seen, and the depth cap bounds anything else.
  constexpr int kMaxDepth = 8;
  fs::recursive_directory_iterator it(
      r, fs::directory_options::skip_permission_denied | fs::directory_options::follow_directory_symlink, ec);
  const fs::recursive_directory_iterator end;
  std::set<std::string> seen{fs::canonical(r, ec).string()};
  if (ec) return invalid_argument("cannot list '" + root + "': " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    std::error_code e2;
    if (!it->is_directory(e2)) continue;
    // A folder reached twice (through a link) is searched and counted once.
    const fs::path real = fs::canonical(it->path(), e2);
    if (e2 || !seen.insert(real.string()).second) {
      it.disable_recursion_pending();
      continue;
    }
    if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
    if (fs::is_regular_file(it->path() / "model.onnx", e2)) {
      cases.push_back({it->path().lexically_relative(r).generic_string(), it->path().string()});
      it.disable_recursion_pending();
    }
  }
  if (ec) return invalid_argument("cannot list '" + root + "': " + ec.message());
  if (cases.empty()) return not_found("no test cases (folders holding model.onnx) under '" + root + "'");
  std::sort(cases.begin(), cases.end(), [](const CaseInfo& a, const CaseInfo& b) { return a.name < b.name; });
  return cases;
}

std::vector<CaseReport> run_cases(const std::vector<CaseInfo>& cases, const RunnerOptions& options) {
  std::vector<CaseReport> reports(cases.size());
  std::vector<Child> running;
  size_t next = 0;
  const size_t jobs = static_cast<size_t>(std::max(1, options.jobs));
  auto finish = [&](size_t index, CaseOutcome o) {
    reports[index] = {cases[index], std::move(o)};
    if (options.on_done) options.on_done(cases[index], reports[index].outcome);
  };

  while (next < cases.size() || !running.empty()) {
    // 1. Start children up to the job limit.
    while (running.size() < jobs && next < cases.size()) {
      Child c;
      c.index = next++;
      const std::string why = spawn(cases[c.index], options, c);
      if (!why.empty())
        finish(c.index, {CaseStatus::kCrashed, "cannot start the case process: " + why});
      else
        running.push_back(std::move(c));
    }
    if (running.empty()) continue;

    // 2. Wait for output, an exit, or the nearest deadline.
    std::vector<pollfd> fds;
    auto now = Clock::now();
    int64_t wait_ms = 1000;
    for (const Child& c : running) {
      if (c.out_fd >= 0) fds.push_back({c.out_fd, POLLIN, 0});
      if (c.err_fd >= 0) fds.push_back({c.err_fd, POLLIN, 0});
      if (c.out_fd < 0 && c.err_fd < 0) wait_ms = std::min<int64_t>(wait_ms, 10);
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count();
      wait_ms = std::min<int64_t>(wait_ms, std::max<int64_t>(0, left + 1));
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(wait_ms)) < 0 && errno != EINTR) {
      // poll itself failing leaves nothing to wait on; fall through to the exit and deadline checks.
    }

    // 3. Collect output, reap exited children, kill those past their deadline.
    now = Clock::now();
    for (size_t i = 0; i < running.size();) {
      Child& c = running[i];
      drain(c.out_fd, c.out, false, kMaxStdout);
      drain(c.err_fd, c.err, true, kStderrTail);
      int wstatus = 0;
      pid_t r = ::waitpid(c.pid, &wstatus, WNOHANG);
      std::optional<CaseOutcome> done;
      if (r == c.pid) {
        // The child is gone; what it wrote is still in the pipes (a full pipe would have blocked it).
        drain(c.out_fd, c.out, false, kMaxStdout);
        drain(c.err_fd, c.err, true, kStderrTail);
        done = judge(c, wstatus);
      } else if (r < 0 && errno != EINTR) {
        done = CaseOutcome{CaseStatus::kCrashed, std::string("lost the case process: ") + std::strerror(errno)};
      } else if (now >= c.deadline) {
        ::kill(-c.pid, SIGKILL);
        ::kill(c.pid, SIGKILL);
        while (::waitpid(c.pid, &wstatus, 0) < 0 && errno == EINTR) {
        }
        done = CaseOutcome{CaseStatus::kCrashed, timeout_text(options.timeout_s)};
      }
      if (!done) {
        ++i;
        continue;
      }
      close_fd(c.out_fd);
      close_fd(c.err_fd);
      const size_t index = c.index;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      finish(index, std::move(*done));
    }
  }
  return reports;
}

}  // namespace streamline::tools
