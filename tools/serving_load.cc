#include "serving_load.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "cli_common.h"

namespace streamline::tools {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration secs(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Responses that complete inside the measured window [start, stop), from client threads or
// response callbacks. Counting completions (not starts) keeps throughput right when latency is
// longer than the window.
struct Samples {
  Clock::time_point start, stop;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<double> lat_ms;
  uint64_t ok = 0, rejected = 0;
  std::map<StatusCode, uint64_t> failures;
  std::string first_error;
  bool done = false;             // max_runs reached
  Progress* progress = nullptr;  // counts the responses, when set

  void add(const InferResponse& r, double ms, Clock::time_point at, int max_runs) {
    if (at < start || at >= stop) return;
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    if (progress) progress->advance();
    if (r.status.ok()) {
      ++ok;
      lat_ms.push_back(ms);
    } else {
      ++rejected;
      ++failures[r.status.code()];
      if (first_error.empty()) first_error = r.status.to_string();
    }
    if (max_runs > 0 && ok + rejected >= static_cast<uint64_t>(max_runs)) {
      done = true;
      cv.notify_all();
    }
  }
  // Waits until the window closes or max_runs is reached; returns when that was.
  Clock::time_point wait_end() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_until(lock, stop, [&] { return done; });
    done = true;
    return std::min(stop, Clock::now());
  }
};

std::map<int, uint64_t> hist_diff(const std::map<int, uint64_t>& after, const std::map<int, uint64_t>& before) {
  std::map<int, uint64_t> d;
  for (const auto& [size, n] : after) {
    auto it = before.find(size);
    const uint64_t delta = n - (it == before.end() ? 0 : it->second);
    if (delta) d[size] = delta;
  }
  return d;
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Result<LoadFigures> run_load(ServingModel& m, const InferRequest& proto, int64_t rows, const LoadSpec& load) {
  const auto t_begin = Clock::now();
  Samples samples;
  samples.start = t_begin + secs(load.warmup_s);
  samples.stop = samples.start + secs(load.seconds);
  samples.progress = load.progress;
  if (load.progress) load.progress->set_expected_end(samples.stop);
  const bool open_loop = load.request_rate > 0;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  std::atomic<int64_t> outstanding{0};
  std::mutex done_mu;
  std::condition_variable done_cv;
  if (open_loop) {
    // Open loop: Poisson arrivals at the given rate, whatever the runtime's pace. Latency counts
    // from the intended arrival, so a late generator cannot hide queueing.
    workers.emplace_back([&] {
      std::mt19937_64 rng(load.seed + 17);
      std::exponential_distribution<double> gap(load.request_rate);
      for (auto t = t_begin + secs(gap(rng)); !stop.load(); t += secs(gap(rng))) {
        std::this_thread::sleep_until(t);
        if (stop.load()) break;
        outstanding.fetch_add(1);
        m.submit(proto, [&, t](InferResponse r) {
          const auto now = Clock::now();
          samples.add(r, ms_between(t, now), now, load.max_runs);
          if (outstanding.fetch_sub(1) == 1) {
            std::lock_guard<std::mutex> lock(done_mu);
            done_cv.notify_all();
          }
        });
      }
    });
  } else {
    // Closed loop: each client sends its next request when its last one is answered.
    for (int c = 0; c < std::max(1, load.concurrency); ++c)
      workers.emplace_back([&] {
        while (!stop.load()) {
          const auto a = Clock::now();
          InferResponse r = m.infer(proto);
          const auto b = Clock::now();
          samples.add(r, ms_between(a, b), b, load.max_runs);
          // A refused client pauses before it retries, so refusals cannot spin and starve the instances.
          if (!r.status.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
  }
  std::this_thread::sleep_until(samples.start);
  if (load.progress) load.progress->set_note("measuring");
  const ServingStats before = m.stats();
  const auto t_end = samples.wait_end();
  if (load.progress) load.progress->set_note("stopping");
  LoadFigures f;
  f.stats = m.stats();
  // Requests still queued after the window are cancelled (and not counted); the clients and the
  // generator then stop.
  stop = true;
  m.shutdown(ShutdownMode::kCancel);
  for (auto& w : workers) w.join();
  {
    std::unique_lock<std::mutex> lock(done_mu);
    done_cv.wait(lock, [&] { return outstanding.load() == 0; });
  }
  samples.progress = nullptr;
  if (samples.ok == 0)
    return unavailable("no request completed in the measured window" +
                       (samples.first_error.empty() ? std::string() : ": " + samples.first_error));
  f.requests = samples.ok + samples.rejected;
  f.ok = samples.ok;
  f.rejected = samples.rejected;
  f.failures = samples.failures;
  f.first_error = samples.first_error;
  f.elapsed_s = std::max(1e-9, std::chrono::duration<double>(t_end - samples.start).count());
  const std::vector<double>& lat = samples.lat_ms;
  f.throughput = static_cast<double>(samples.ok) * static_cast<double>(rows) / f.elapsed_s;
  f.p50_ms = percentile(lat, 50);
  f.p90_ms = percentile(lat, 90);
  f.p99_ms = percentile(lat, 99);
  f.min_ms = percentile(lat, 0);
  for (double x : lat) f.mean_ms += x;
  f.mean_ms /= static_cast<double>(lat.size());
  f.batch_size_hist = hist_diff(f.stats.batch_size_hist, before.batch_size_hist);
  uint64_t runs = 0, total_rows = 0;
  for (const auto& [size, c] : f.batch_size_hist) runs += c, total_rows += static_cast<uint64_t>(size) * c;
  f.mean_batch = runs ? static_cast<double>(total_rows) / static_cast<double>(runs) : 0.0;
  return f;
}

std::string batch_hist_json(const std::map<int, uint64_t>& h) {
  std::string o = "{";
  for (const auto& [size, n] : h)
    o += (o.size() > 1 ? ", " : "") + ("\"" + std::to_string(size) + "\": ") + std::to_string(n);
  return o + "}";
}

std::string batch_hist_text(const std::map<int, uint64_t>& h) {
  std::string o;
  for (const auto& [size, n] : h) o += (o.empty() ? "" : " ") + std::to_string(size) + ":" + std::to_string(n);
  return o.empty() ? "-" : o;
}

}  // namespace streamline::tools
