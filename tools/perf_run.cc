#include "perf_run.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "cli_common.h"
#include "cli_flags.h"

namespace streamline::tools {
namespace {

using Clock = std::chrono::steady_clock;

// A server that is gone or draining answers at once: a loop that met this waits before the next
// request rather than spinning on it.
constexpr auto kUnavailableBackoff = std::chrono::milliseconds(10);

Clock::duration to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Send times of an open-loop step, shared by the threads that send: constant gaps of 1/rate, or
// exponential ones (Poisson arrivals) of that mean.
class ArrivalSchedule {
 public:
  ArrivalSchedule(double rate, bool poisson, Clock::time_point first)
      : rate_(rate), poisson_(poisson), gap_s_(rate), next_(first) {}
  Clock::time_point take() {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point t = next_;
    next_ += to_duration(poisson_ ? gap_s_(rng_) : 1.0 / rate_);
    return t;
  }

 private:
  std::mutex mu_;
  double rate_;
  bool poisson_;
  std::mt19937_64 rng_{7};
  std::exponential_distribution<double> gap_s_;
  Clock::time_point next_;
};

}  // namespace

// What one slot saw inside the window.
struct PerfRun::Tally {
  std::vector<double> latency_us, send_us, recv_us;  // successful requests
  uint64_t errors = 0;
  std::string first_error;

  void clear() { *this = Tally(); }
  void record(const Status& s, const RequestTiming& t) {
    if (s.ok()) {
      latency_us.push_back(static_cast<double>(t.latency_ns) / 1000.0);
      send_us.push_back(static_cast<double>(t.send_ns) / 1000.0);
      recv_us.push_back(static_cast<double>(t.recv_ns) / 1000.0);
    } else {
      ++errors;
      if (first_error.empty()) first_error = s.to_string();
    }
  }
};

// A connection and what it measured; one request at a time.
struct PerfRun::Slot {
  std::unique_ptr<PerfConnection> conn;
  Tally tally;
};

struct PerfRun::Window {
  Clock::time_point begin, start, stop;
  std::optional<ServerStats> before, after;
  bool inside(Clock::time_point t) const { return t >= start && t < stop; }
};

PerfRun::PerfRun(PerfClient& client, size_t requests, LoadOptions o)
    : client_(client), requests_(requests), o_(std::move(o)) {}

PerfRun::~PerfRun() = default;

Status PerfRun::ensure_slots(size_t n) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(slots_mu_);
      if (slots_.size() >= n) return ok_status();
    }
    SL_ASSIGN_OR_RETURN(auto c, client_.connect());
    auto s = std::make_unique<Slot>();
    s->conn = std::move(c);
    std::lock_guard<std::mutex> lock(slots_mu_);
    slots_.push_back(std::move(s));
  }
}

PerfRun::Slot& PerfRun::slot(size_t i) {
  std::lock_guard<std::mutex> lock(slots_mu_);
  return *slots_[i];
}

Status PerfRun::probe() {
  SL_RETURN_IF_ERROR(ensure_slots(1));
  RequestTiming t;
  SL_RETURN_IF_ERROR(slot(0).conn->infer(0, &t));
  if (o_.server_stats) {
    auto s = client_.statistics(o_.model, o_.version);
    if (!s.ok()) {
      std::cerr << "note: the server's statistics cannot be read (" << s.status().message()
                << "); the reports leave its columns out" << std::endl;
      o_.server_stats = false;
    }
  }
  return ok_status();
}

void PerfRun::watch(Window& w) {
  std::this_thread::sleep_until(w.start);
  if (o_.server_stats) {
    auto s = client_.statistics(o_.model, o_.version);
    if (s.ok()) w.before = *s;
  }
  std::this_thread::sleep_until(w.stop);
  if (o_.server_stats && w.before) {
    auto s = client_.statistics(o_.model, o_.version);
    if (s.ok()) w.after = *s;
  }
}

void PerfRun::run_sync_concurrency(int c, Window& w) {
  auto worker = [&](size_t i) {
    Slot& s = slot(i);
    for (;;) {
      RequestTiming t;
      const Status st = s.conn->infer(next_request(), &t);
      if (w.inside(t.end)) s.tally.record(st, t);
      if (t.end >= w.stop) return;
      if (st.code() == StatusCode::kUnavailable) std::this_thread::sleep_for(kUnavailableBackoff);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < c; ++i) threads.emplace_back(worker, static_cast<size_t>(i));
  watch(w);
  for (auto& t : threads) t.join();
}

void PerfRun::run_async_concurrency(int c, Window& w) {
  client_.run_async(o_.max_threads);
  std::mutex mu;
  std::condition_variable cv;
  int active = c;
  std::function<void(size_t)> issue = [&](size_t i) {
    Slot& s = slot(i);
    s.conn->start(next_request(), [&, i](const Status& st, const RequestTiming& t) {
      Slot& me = slot(i);
      if (w.inside(t.end)) me.tally.record(st, t);
      if (t.end < w.stop) {
        if (st.code() == StatusCode::kUnavailable) std::this_thread::sleep_for(kUnavailableBackoff);
        issue(i);
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (--active == 0) cv.notify_all();
    });
  };
  for (int i = 0; i < c; ++i) issue(static_cast<size_t>(i));
  watch(w);
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return active == 0; });
}

void PerfRun::run_sync_rate(double rate, Window& w) {
  ArrivalSchedule schedule(rate, o_.poisson, w.begin);
  auto worker = [&](size_t i) {
    Slot& s = slot(i);
    for (;;) {
      const Clock::time_point at = schedule.take();
      if (at >= w.stop) return;
      std::this_thread::sleep_until(at);
      RequestTiming t;
      const Status st = s.conn->infer(next_request(), &t);
      if (w.inside(t.end)) s.tally.record(st, t);
      if (st.code() == StatusCode::kUnavailable) std::this_thread::sleep_for(kUnavailableBackoff);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < o_.max_threads; ++i) threads.emplace_back(worker, static_cast<size_t>(i));
  watch(w);
  for (auto& t : threads) t.join();
}

Status PerfRun::run_async_rate(double rate, Window& w) {
  client_.run_async(o_.max_threads);
  ArrivalSchedule schedule(rate, o_.poisson, w.begin);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> idle;
  size_t in_flight = 0;
  {
    std::lock_guard<std::mutex> lock(slots_mu_);
    for (size_t i = 0; i < slots_.size(); ++i) idle.push_back(i);
  }
  Status failed;
  std::thread dispatcher([&] {
    for (;;) {
      const Clock::time_point at = schedule.take();
      if (at >= w.stop) return;
      std::this_thread::sleep_until(at);
      std::optional<size_t> i;
      {
        std::unique_lock<std::mutex> lock(mu);
        if (idle.empty() && in_flight >= static_cast<size_t>(kMaxCount)) cv.wait(lock, [&] { return !idle.empty(); });
        if (!idle.empty()) {
          i = idle.back();
          idle.pop_back();
        }
      }
      if (!i) {  // every connection is busy: open one more
        size_t n = 0;
        {
          std::lock_guard<std::mutex> lock(slots_mu_);
          n = slots_.size();
        }
        if (Status s = ensure_slots(n + 1); !s.ok()) {
          failed = s;
          return;
        }
        i = n;
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        ++in_flight;
      }
      const size_t k = *i;
      slot(k).conn->start(next_request(), [&, k](const Status& st, const RequestTiming& t) {
        Slot& me = slot(k);
        if (w.inside(t.end)) me.tally.record(st, t);
        std::lock_guard<std::mutex> lock(mu);
        idle.push_back(k);
        --in_flight;
        cv.notify_all();
      });
    }
  });
  watch(w);
  dispatcher.join();
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return in_flight == 0; });
  return failed;
}

StepResult PerfRun::summarize(const Window& w, size_t slots_used) const {
  StepResult r;
  r.workers = static_cast<int>(slots_used);
  r.window_s = std::chrono::duration<double>(w.stop - w.start).count();
  std::vector<double> lat;
  double send = 0, recv = 0;
  for (const auto& s : slots_) {
    lat.insert(lat.end(), s->tally.latency_us.begin(), s->tally.latency_us.end());
    send = std::accumulate(s->tally.send_us.begin(), s->tally.send_us.end(), send);
    recv = std::accumulate(s->tally.recv_us.begin(), s->tally.recv_us.end(), recv);
    r.errors += s->tally.errors;
    if (r.first_error.empty()) r.first_error = s->tally.first_error;
  }
  const double n = static_cast<double>(lat.size());
  r.requests = lat.size() + r.errors;
  r.throughput = n * static_cast<double>(o_.batch) / std::max(1e-9, r.window_s);
  if (!lat.empty()) {
    r.avg_latency_us = std::accumulate(lat.begin(), lat.end(), 0.0) / n;
    r.avg_send_us = send / n;
    r.avg_recv_us = recv / n;
  }
  std::sort(lat.begin(), lat.end());
  for (int p : o_.percentiles) r.percentile_us[p] = percentile(lat, p);
  if (w.before && w.after) r.server = stats_delta(*w.after, *w.before);
  return r;
}

Result<StepResult> PerfRun::concurrency_step(int concurrency) {
  SL_RETURN_IF_ERROR(ensure_slots(static_cast<size_t>(concurrency)));
  for (auto& s : slots_) s->tally.clear();
  Window w;
  w.begin = Clock::now();
  w.start = w.begin + to_duration(o_.warmup_s);
  w.stop = w.start + to_duration(o_.window_s);
  if (o_.async)
    run_async_concurrency(concurrency, w);
  else
    run_sync_concurrency(concurrency, w);
  StepResult r = summarize(w, static_cast<size_t>(concurrency));
  r.concurrency = concurrency;
  return r;
}

Result<StepResult> PerfRun::rate_step(double rate) {
  if (!o_.async) SL_RETURN_IF_ERROR(ensure_slots(static_cast<size_t>(o_.max_threads)));
  for (auto& s : slots_) s->tally.clear();
  Window w;
  w.begin = Clock::now();
  w.start = w.begin + to_duration(o_.warmup_s);
  w.stop = w.start + to_duration(o_.window_s);
  if (o_.async) {
    SL_RETURN_IF_ERROR(run_async_rate(rate, w));
  } else {
    run_sync_rate(rate, w);
  }
  StepResult r = summarize(w, o_.async ? slots_.size() : static_cast<size_t>(o_.max_threads));
  r.request_rate = rate;
  r.concurrency = r.workers;
  return r;
}

}  // namespace streamline::tools
