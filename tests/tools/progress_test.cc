// The CLI's progress line: its text, and that it is drawn on a terminal only, erased at the end,
// and never written to a pipe or when disabled.

#include "tools/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace streamline::tools {
namespace {

TEST(ProgressLine, CountTotalNoteAndTimes) {
  ProgressState s;
  s.title = "perf";
  s.unit = "steps";
  s.done = 2;
  s.total = 8;
  s.note = "concurrency 3";
  s.elapsed_s = 12.44;
  s.left_s = 36;
  EXPECT_EQ(progress_line(s, 0), "perf: 2/8 steps, concurrency 3 | 12.4 s elapsed, about 36.0 s left");
}

TEST(ProgressLine, UnknownTotalAndTimeLeftAreLeftOut) {
  ProgressState s;
  s.title = "bench";
  s.unit = "runs";
  s.done = 17;
  s.elapsed_s = 0.25;
  EXPECT_EQ(progress_line(s, 0), "bench: 17 runs | 0.2 s elapsed");
}

TEST(ProgressLine, CutToTheWidth) {
  ProgressState s;
  s.title = "conformance";
  s.unit = "cases";
  s.done = 100;
  s.total = 932;
  s.note = std::string(200, 'x');
  EXPECT_EQ(progress_line(s, 40).size(), 40u);
  EXPECT_EQ(progress_line(s, 40).rfind("conformance: 100/932 cases, ", 0), 0u);
}

TEST(ProgressLine, Durations) {
  EXPECT_EQ(format_duration(0), "0.0 s");
  EXPECT_EQ(format_duration(59.9), "59.9 s");
  EXPECT_EQ(format_duration(60), "1m00s");
  EXPECT_EQ(format_duration(245), "4m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(-3), "0.0 s");
}

// Everything readable on `fd` now, without blocking.
std::string read_available(int fd) {
  std::string out;
  char buf[4096];
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, 50) > 0 && (p.revents & POLLIN)) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// A pseudo-terminal: the progress line writes to `terminal`, the test reads `screen`.
struct Pty {
  int screen = -1, terminal = -1;
  Pty() {
    screen = ::posix_openpt(O_RDWR | O_NOCTTY);
    if (screen < 0 || ::grantpt(screen) != 0 || ::unlockpt(screen) != 0) return;
    terminal = ::open(::ptsname(screen), O_RDWR | O_NOCTTY);
  }
  ~Pty() {
    if (terminal >= 0) ::close(terminal);
    if (screen >= 0) ::close(screen);
  }
};

TEST(Progress, DrawsOnATerminalAndErasesItsLine) {
  Pty pty;
  ASSERT_GE(pty.terminal, 0) << "no pseudo-terminal";
  ProgressOptions o;
  o.title = "test";
  o.unit = "cases";
  o.total = 3;
  o.fd = pty.terminal;
  o.interval_s = 60;  // only the first draw and the explicit ones below
  Progress p(o);
  EXPECT_TRUE(p.active());
  p.advance(2);
  p.message("warning: one case failed");
  p.finish();
  EXPECT_FALSE(p.active());
  const std::string screen = read_available(pty.screen);
  // First draw in the constructor, then the message on a line of its own and a redraw with the
  // new count, then the erase: spaces over the line and the cursor back at its start.
  const size_t first = screen.find("\rtest: 0/3 cases | ");
  const size_t msg = screen.find("warning: one case failed");
  const size_t redraw = screen.find("\rtest: 2/3 cases | ");
  ASSERT_NE(first, std::string::npos) << screen;
  ASSERT_NE(msg, std::string::npos) << screen;
  ASSERT_NE(redraw, std::string::npos) << screen;
  EXPECT_LT(first, msg);
  EXPECT_LT(msg, redraw);
  const size_t last_cr = screen.find_last_of('\r');
  ASSERT_EQ(last_cr, screen.size() - 1) << screen;
  const size_t erase_start = screen.find_last_of('\r', last_cr - 1);
  const std::string erased = screen.substr(erase_start + 1, last_cr - erase_start - 1);
  EXPECT_FALSE(erased.empty());
  EXPECT_EQ(erased.find_first_not_of(' '), std::string::npos) << "last line not erased: '" << erased << "'";
}

TEST(Progress, DisabledDrawsNothingOnATerminal) {
  Pty pty;
  ASSERT_GE(pty.terminal, 0) << "no pseudo-terminal";
  ProgressOptions o;
  o.title = "test";
  o.fd = pty.terminal;
  o.enabled = false;  // --json
  Progress p(o);
  EXPECT_FALSE(p.active());
  p.advance();
  p.finish();
  EXPECT_EQ(read_available(pty.screen), "");
}

TEST(Progress, APipeGetsNoLineButMessagesStill) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    ProgressOptions o;
    o.title = "test";
    o.fd = fds[1];
    o.interval_s = 0.01;
    Progress p(o);
    EXPECT_FALSE(p.active());
    p.advance();
    p.message("warning: plain");
  }
  ::close(fds[1]);
  std::string got;
  char buf[256];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  EXPECT_EQ(got, "warning: plain\n");
}

}  // namespace
}  // namespace streamline::tools
