#pragma once
// Load on a ServingModel from inside the process, and the figures it produced: the measuring
// part of `streamline bench`'s serving path, shared with `streamline tune`.
//
//   LoadSpec load;  load.concurrency = 8;  load.warmup_s = 0.5;  load.seconds = 2;
//   Result<LoadFigures> f = run_load(served, request, /*rows=*/1, load);
//   std::cout << f->throughput << " rows/s, p99 " << f->p99_ms << " ms\n";
//
// Closed loop (request_rate 0): `concurrency` clients each send their next request when the last
// one is answered; a refused client pauses 1 ms before it retries. Open loop: Poisson arrivals at
// request_rate per second, latency counted from the intended arrival. Only responses that complete
// inside the measured window [warm-up end, window end) count. run_load shuts the model down
// (cancelling what is still queued) before it returns, so a ServingModel serves one load.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "progress.h"
#include "streamline/serving.h"

namespace streamline::tools {

struct LoadSpec {
  // Closed-loop clients (used when request_rate is 0).
  int concurrency = 1;
  // Open loop: arrivals per second (Poisson); 0 = closed loop.
  double request_rate = 0;
  // Seconds of load before the measured window opens.
  double warmup_s = 1;
  // Length of the measured window in seconds.
  double seconds = 5;
  // Stop after this many measured responses (0: no limit).
  int max_runs = 0;
  // Seeds the open-loop arrival times.
  uint32_t seed = 0;
  // Counts responses and shows the phase when set; not owned.
  Progress* progress = nullptr;
};

struct LoadFigures {
  uint64_t requests = 0;  // answered inside the window, ok or not
  uint64_t ok = 0;
  uint64_t rejected = 0;  // answered with an error
  std::map<StatusCode, uint64_t> failures;
  std::string first_error;  // of the first rejected request, "" when none
  double elapsed_s = 0;     // the measured window (shorter when max_runs ended it)
  double throughput = 0;    // rows answered ok per second
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, mean_ms = 0, min_ms = 0;
  std::map<int, uint64_t> batch_size_hist;  // rows per run -> runs, inside the window
  double mean_batch = 0;
  ServingStats stats;  // the model's counters at the end of the window
};

// Runs `load` on `model` with copies of `request` (`rows` rows each) and measures it. Errors:
// Unavailable when no request completed in the window (with the first error seen).
[[nodiscard]] Result<LoadFigures> run_load(ServingModel& model, const InferRequest& request, int64_t rows,
                                           const LoadSpec& load);

// "{1: 20, 4: 7}" as JSON ({"1": 20, "4": 7}) and as text ("1:20 4:7", "-" when empty).
std::string batch_hist_json(const std::map<int, uint64_t>& hist);
std::string batch_hist_text(const std::map<int, uint64_t>& hist);

}  // namespace streamline::tools
