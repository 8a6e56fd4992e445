#pragma once
// Injectable clocks: the runtime asks a Clock for the time so tests can drive it by hand.
//
//   SteadyClock clock;              // real time
//   FakeClock fake;                 // starts at 0
//   fake.advance_us(500);           // now_us() == 500

#include <atomic>
#include <chrono>
#include <cstdint>

namespace streamline {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since an arbitrary, fixed epoch; monotonic. Thread-safe.
  virtual int64_t now_us() const = 0;
};

class SteadyClock final : public Clock {
 public:
  int64_t now_us() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  static const SteadyClock& instance() {
    static const SteadyClock c;
    return c;
  }
};

// A clock that moves only when told. Thread-safe.
class FakeClock final : public Clock {
 public:
  int64_t now_us() const override { return now_.load(); }
  void advance_us(int64_t d) { now_.fetch_add(d); }
  void set_us(int64_t t) { now_.store(t); }

 private:
  std::atomic<int64_t> now_{0};
};

// Nanosecond wall time for tracing and benchmarks.
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace streamline
