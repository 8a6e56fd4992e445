#include "exec/thread_choice.h"

#include <gtest/gtest.h>

#include <functional>

namespace streamline::exec {
namespace {

// Runs `runs` runs through `choice`, each taking time(threads, run index) ms; returns the runs
// that used one thread.
int drive(ThreadChoice& choice, int requested, int runs, const std::function<double(int, int)>& time) {
  int serial = 0;
  for (int i = 0; i < runs; ++i) {
    const int t = choice.next(requested);
    EXPECT_TRUE(t == requested || t == 1) << t;
    serial += t == 1;
    choice.record(time(t, i));
  }
  return serial;
}

TEST(ThreadChoiceTest, KeepsTheRequestedCountWhileItIsFaster) {
  ThreadChoice choice;
  const int serial = drive(choice, 2, 2000, [](int t, int) { return t == 2 ? 5.0 : 8.0; });
  EXPECT_EQ(choice.current(), 2);
  // Probes back off: a few runs in a thousand on one thread, not one in kSettleRuns.
  EXPECT_LT(choice.probes(), 12);
  EXPECT_LE(serial, ThreadChoice::kProbeRuns * choice.probes());
}

TEST(ThreadChoiceTest, AProbeFarSlowerEndsAfterItsFirstCountedRun) {
  // A large model on a quiet machine: one thread takes twice as long. The first probe costs its
  // uncounted run (one-thread kernels are built then) and one counted run; later probes one run.
  // So the runs of a short measurement stay on two threads (their median is the two-thread time).
  ThreadChoice choice;
  const int serial = drive(choice, 2, 40, [](int t, int) { return t == 2 ? 110.0 : 210.0; });
  EXPECT_EQ(choice.current(), 2);
  EXPECT_EQ(choice.probes(), 2);
  EXPECT_EQ(serial, choice.probes() + 1);
}

TEST(ThreadChoiceTest, RunsThatAgreeWaitLongerForTheFirstProbe) {
  // Steady times say the machine is quiet: no probe within the first kSettleRuns runs.
  ThreadChoice steady;
  for (int i = 0; i < ThreadChoice::kSettleRuns; ++i) {
    ASSERT_EQ(steady.next(2), 2) << "run " << i;
    steady.record(100.0 + (i % 2));
  }
  EXPECT_EQ(steady.next(2), 1);
  // Times that scatter (a parked worker delays some runs) probe after kFirstSettle runs.
  ThreadChoice scattered;
  for (int i = 0; i < ThreadChoice::kFirstSettle; ++i) {
    ASSERT_EQ(scattered.next(2), 2) << "run " << i;
    scattered.record(i % 2 ? 180.0 : 100.0);
  }
  EXPECT_EQ(scattered.next(2), 1);
}

TEST(ThreadChoiceTest, RunsOnOneThreadWhenTheRequestedCountIsSlower) {
  // A loaded machine: every parallel region waits for a parked worker.
  ThreadChoice choice;
  const int serial = drive(choice, 2, 1000, [](int t, int) { return t == 2 ? 140.0 : 8.0; });
  EXPECT_EQ(choice.current(), 1);
  EXPECT_GT(serial, 950);
}

TEST(ThreadChoiceTest, DecidesWithinTheFirstFewRuns) {
  // A slow model measured for a few seconds runs only a handful of times: the first probe comes
  // early enough that most of them run on the faster count.
  ThreadChoice choice;
  // Two threads on a loaded machine scatter: a region waits for a parked worker or does not.
  drive(choice, 2, 7, [](int t, int i) { return t == 2 ? (i % 2 ? 380.0 : 240.0) : 55.0; });
  EXPECT_EQ(choice.current(), 1);
}

TEST(ThreadChoiceTest, FollowsTheLoadWhenItChanges) {
  ThreadChoice choice;
  auto loaded_until = [](int until) {
    return [until](int t, int i) { return i < until ? (t == 2 ? 100.0 : 10.0) : (t == 2 ? 5.0 : 10.0); };
  };
  drive(choice, 2, 300, loaded_until(300));
  EXPECT_EQ(choice.current(), 1);
  // The machine goes quiet: two threads win the next probe (within kMaxPeriod runs).
  for (int i = 300; i < 300 + 2 * ThreadChoice::kMaxPeriod && choice.current() == 1; ++i) {
    const int t = choice.next(2);
    choice.record(loaded_until(300)(t, i));
  }
  EXPECT_EQ(choice.current(), 2);
}

TEST(ThreadChoiceTest, OneRequestedThreadNeverProbes) {
  ThreadChoice choice;
  EXPECT_EQ(drive(choice, 1, 100, [](int, int) { return 1.0; }), 100);
  EXPECT_EQ(choice.probes(), 0);
}

TEST(ThreadChoiceTest, ANewRequestedCountStartsOver) {
  ThreadChoice choice;
  drive(choice, 2, 200, [](int t, int) { return t == 2 ? 50.0 : 5.0; });
  ASSERT_EQ(choice.current(), 1);
  EXPECT_EQ(choice.next(4), 4);
  EXPECT_EQ(choice.current(), 4);
}

}  // namespace
}  // namespace streamline::exec
