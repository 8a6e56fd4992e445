#pragma once
// Finding ONNX backend-test cases under a folder and running each in its own child process.
//
//   auto cases = find_cases("/usr/share/libonnx-testdata/data/node");   // Result<std::vector<CaseInfo>>
//   RunnerOptions ro;
//   ro.exe = "/proc/self/exe";
//   std::vector<CaseReport> reports = run_cases(*cases, ro);
//
// Each case runs as `EXE conformance CASE_DIR --case-child --threads N` started with fork+exec (a
// fresh process, so OpenMP and oneDNN state never crosses a fork). The child prints one result line
// (conformance_case.h); a child killed by a signal, exiting without that line, or running past the
// timeout is reported as crashed. At most `jobs` children run at once. Not thread-safe: call from
// one thread, and do not reap children of this process elsewhere while it runs.

#include <functional>
#include <string>
#include <vector>

#include "conformance_case.h"
#include "core/status.h"

namespace streamline::tools {

struct CaseInfo {
  std::string name;  // path relative to the searched folder ("test_abs"); the folder name when it is the case
  std::string dir;   // the case folder
};

// Case folders (holding model.onnx) under `root`, searched recursively (links followed, at most 8
// levels deep), sorted by name; `root` itself when it is a case. NotFound / InvalidArgument for a bad `root`.
Result<std::vector<CaseInfo>> find_cases(const std::string& root);

struct RunnerOptions {
  std::string exe = "/proc/self/exe";  // the binary run for each case
  int threads = 1;                     // intra-op threads per case (also OMP_NUM_THREADS of the child)
  int jobs = 2;                        // children at once
  double timeout_s = 20;               // per case; then the child is killed
  int64_t memory_limit_mb = 0;         // address-space limit of a child (RLIMIT_AS); 0 = none
  // Called as each case finishes (progress output); may be empty.
  std::function<void(const CaseInfo&, const CaseOutcome&)> on_done;
};

struct CaseReport {
  CaseInfo info;
  CaseOutcome outcome;
};

// Runs every case; reports are in the order of `cases`. Never fails as a whole: a case that cannot
// be started is reported as crashed with the reason.
std::vector<CaseReport> run_cases(const std::vector<CaseInfo>& cases, const RunnerOptions& options);

}  // namespace streamline::tools
