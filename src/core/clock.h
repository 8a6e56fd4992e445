#pragma once
// Injectable clocks: the runtime asks a Clock for the time so tests can drive it by hand.
//
//   SteadyClock clock;              // real time
//   FakeClock fake;                 // starts at 0
//   fake.advance_us(500);           // now_us() == 500
//   int64_t deadline = add_saturating_us(clock.now_us(), timeout_us);   // never wraps

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace streamline {

// a + b on microsecond counts, clamped to the int64 range instead of wrapping: a time point
// computed from a caller's timeout or delay (up to INT64_MAX) stays in the future.
constexpr int64_t add_saturating_us(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  if (b > 0 && a > kMax - b) return kMax;
  if (b < 0 && a < kMin - b) return kMin;
  return a + b;
}
// a - b, clamped the same way.
constexpr int64_t sub_saturating_us(int64_t a, int64_t b) {
  if (b == std::numeric_limits<int64_t>::min()) return a >= 0 ? std::numeric_limits<int64_t>::max() : a - b;
  return add_saturating_us(a, -b);
}

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since an arbitrary, fixed epoch; monotonic. Thread-safe.
  virtual int64_t now_us() const = 0;
};

class SteadyClock final : public Clock {
 public:
  int64_t now_us() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
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
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace streamline
