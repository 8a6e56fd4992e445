#include "exec/cpu_stream.h"

#include <chrono>
#include <thread>

#include "core/cpu_set.h"

namespace streamline::exec {
namespace {

// How long a stream polls an event before it sleeps on it, and after how long it starts yielding
// its core between polls (elastic steps' OpenMP workers may share the cores with the waiter).
constexpr std::chrono::microseconds kEventSpin{2000};
constexpr std::chrono::microseconds kEventYieldAfter{50};

// Stream threads of every context in the process that are running steps (not sleeping on an
// event). Polling only pays while each of them has a core: with more than there are cores, a
// poller takes time from the very producer it waits for, so waiters then sleep at once.
std::atomic<int> g_running_streams{0};

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

void CpuStream::begin_run(uint64_t generation) {
  generation_ = generation;
  g_running_streams.fetch_add(1, std::memory_order_relaxed);
}

void CpuStream::end_run() {
  g_running_streams.fetch_sub(1, std::memory_order_relaxed);
}

void CpuStream::record(CpuEvent& event) const {
  event.stamp_.store(generation_, std::memory_order_release);
  event.stamp_.notify_all();
}

// A futex wake-up costs tens of microseconds (about 45 us median between a record and the waiting
// step's start, GoogLeNet on two streams), and most waits there end within a millisecond (median
// 0.4 to 0.5 ms), so while every running stream thread has a core the waiter polls for up to
// kEventSpin before it sleeps, yielding its core between polls once kEventYieldAfter has passed.
void CpuStream::wait(const CpuEvent& event) const {
  const std::atomic<uint64_t>& ev = event.stamp_;
  uint64_t v = ev.load(std::memory_order_acquire);
  if (v >= generation_) return;
  const auto start = std::chrono::steady_clock::now();
  bool yielding = false;
  const bool poll = g_running_streams.load(std::memory_order_relaxed) <= core::usable_cores();
  for (int i = 1; poll && v < generation_; ++i) {
    if (yielding)
      std::this_thread::yield();
    else
      cpu_relax();
    v = ev.load(std::memory_order_acquire);
    if (i % 64 == 0 || yielding) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited > kEventSpin) break;
      yielding = waited > kEventYieldAfter;
    }
  }
  if (v >= generation_) return;
  g_running_streams.fetch_sub(1, std::memory_order_relaxed);
  while (v < generation_) {
    ev.wait(v, std::memory_order_acquire);
    v = ev.load(std::memory_order_acquire);
  }
  g_running_streams.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace streamline::exec
