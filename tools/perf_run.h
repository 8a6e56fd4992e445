#pragma once
// The measurement loop of `streamline perf`. A step warms up, then measures a window: the
// requests answered inside it (latency, and where it went on the client), and the change of the
// server's statistics over it. Loads, as perf_analyzer makes them:
//
//   concurrency, --sync   C threads, each sends its next request when the last one is answered
//   concurrency, --async  C requests kept in flight from the client's completion threads
//   request rate, --sync  requests sent at scheduled times by a pool of --max-threads threads
//                         (a request is late when all of them are busy)
//   request rate, --async requests sent at scheduled times, each on a free connection (a new one
//                         when none is free), whatever is still in flight
//
//   PerfRun run(client, requests.size(), options);
//   SL_RETURN_IF_ERROR(run.probe());
//   SL_ASSIGN_OR_RETURN(StepResult r, run.concurrency_step(4));

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "perf_client.h"
#include "perf_report.h"

namespace streamline::tools {

struct LoadOptions {
  double warmup_s = 1;           // per step, not measured
  double window_s = 5;           // measured time per step
  bool async = false;            // --async
  int max_threads = 16;          // sync request rate: sending threads; async: HTTP I/O threads
  bool poisson = false;          // request rate: exponential gaps instead of constant ones
  int64_t batch = 1;             // rows per request, for inferences/s
  std::vector<int> percentiles;  // reported, e.g. {50, 90, 95, 99}
  bool server_stats = true;      // read the server's statistics around each window
  std::string model, version;    // whose statistics
};

class PerfRun {
 public:
  // `requests`: how many prepared requests the client holds (sent in turn).
  PerfRun(PerfClient& client, size_t requests, LoadOptions o);
  ~PerfRun();

  // One request on a fresh connection: the model must answer before anything is measured. Also
  // reads the statistics once; when they cannot be read, steps carry no server figures.
  [[nodiscard]] Status probe();
  // Whether steps carry the server's statistics.
  bool server_stats() const { return o_.server_stats; }

  [[nodiscard]] Result<StepResult> concurrency_step(int concurrency);
  [[nodiscard]] Result<StepResult> rate_step(double rate);

 private:
  struct Tally;
  struct Slot;
  struct Window;

  Status ensure_slots(size_t n);
  Slot& slot(size_t i);
  size_t next_request() { return requests_ > 0 ? next_.fetch_add(1) % requests_ : 0; }
  void run_sync_concurrency(int c, Window& w);
  void run_async_concurrency(int c, Window& w);
  void run_sync_rate(double rate, Window& w);
  Status run_async_rate(double rate, Window& w);
  // Reads the statistics at the window's start and stop while the load runs on other threads.
  void watch(Window& w);
  StepResult summarize(const Window& w, size_t slots_used) const;

  PerfClient& client_;
  size_t requests_;
  LoadOptions o_;
  std::atomic<size_t> next_{0};
  std::mutex slots_mu_;  // guards slots_' growth (async request rate adds slots while it runs)
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace streamline::tools
