// `streamline conformance`: runs ONNX backend-test data (model.onnx + test_data_set_N/ folders)
// and tallies the results per op. Each case runs in its own child process (conformance_runner.h),
// so a crash or a hang in one case is counted, never fatal.

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>

#include "cli_common.h"
#include "cli_flags.h"
#include "commands.h"
#include "conformance_case.h"
#include "conformance_runner.h"
#include "preflight.h"
#include "progress.h"

namespace streamline::tools {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kDefaultMemoryLimitMb = 0;  // ASan reserves terabytes of address space
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr int64_t kDefaultMemoryLimitMb = 0;
#else
constexpr int64_t kDefaultMemoryLimitMb = 8192;
#endif
#else
constexpr int64_t kDefaultMemoryLimitMb = 8192;
#endif

struct ConformanceFlags {
  std::string dir;
  bool json = false;
  double timeout_s = 20;
  std::string filter;
  int threads = 1;
  int jobs = 2;
  int64_t memory_limit_mb = kDefaultMemoryLimitMb;
  std::string list_passing;
  bool verbose = false;
  bool case_child = false;  // internal: run DIR as one case in this process and print the result line
};

struct OpCounts {
  int passed = 0, failed = 0, unsupported = 0, crashed = 0;
  void add(CaseStatus s) {
    switch (s) {
      case CaseStatus::kPassed:
        ++passed;
        break;
      case CaseStatus::kUnsupported:
        ++unsupported;
        break;
      case CaseStatus::kCrashed:
        ++crashed;
        break;
      case CaseStatus::kFailed:
      case CaseStatus::kError:
        ++failed;
        break;
    }
  }
};

int run_child(const ConformanceFlags& f) {
  CaseOutcome o;
  try {
    o = run_case_in_process(f.dir, f.threads);
  } catch (const std::exception& e) {
    o = {CaseStatus::kCrashed, std::string("exception: ") + e.what()};
  } catch (...) {
    o = {CaseStatus::kCrashed, "unknown exception"};
  }
  std::cout << format_case_line(o) << std::endl;
  return 0;
}

void print_json(const std::vector<CaseReport>& reports, const std::vector<std::string>& ops, const OpCounts& total) {
  std::cout << "{\"passed\": " << total.passed << ", \"failed\": " << total.failed
            << ", \"unsupported\": " << total.unsupported << ", \"crashed\": " << total.crashed << ", \"cases\": [";
  for (size_t i = 0; i < reports.size(); ++i) {
    const auto& r = reports[i];
    std::cout << (i ? ",\n  " : "\n  ") << "{\"name\": \"" << json_escape(r.info.name) << "\", \"op\": \""
              << json_escape(ops[i]) << "\", \"status\": \"" << case_status_name(r.outcome.status)
              << "\", \"detail\": \"" << json_escape(r.outcome.detail) << "\"}";
  }
  std::cout << (reports.empty() ? "]}" : "\n]}") << std::endl;
}

void print_summary(const std::vector<CaseReport>& reports, const std::vector<std::string>& ops, const OpCounts& total) {
  std::map<std::string, OpCounts> by_op;
  for (size_t i = 0; i < reports.size(); ++i) by_op[ops[i]].add(reports[i].outcome.status);
  std::vector<std::vector<std::string>> rows{{"op", "passed", "failed", "unsupported", "crashed"}};
  for (const auto& [op, c] : by_op)
    rows.push_back({op, std::to_string(c.passed), std::to_string(c.failed), std::to_string(c.unsupported),
                    std::to_string(c.crashed)});
  print_table(rows);
  std::cout << "total: " << reports.size() << " cases, " << total.passed << " passed, " << total.failed << " failed, "
            << total.unsupported << " unsupported, " << total.crashed << " crashed" << std::endl;
}

int run_conformance(const ConformanceFlags& f) {
  if (f.case_child) return run_child(f);
  if (!f.list_passing.empty()) {
    if (Status s = check_output_file("--list-passing", f.list_passing); !s.ok()) {
      std::cerr << "error: " << s.to_string() << std::endl;
      return kUsageError;
    }
  }
  auto found = find_cases(f.dir);
  if (!found.ok()) {
    std::cerr << "error: " << found.status().to_string() << std::endl;
    return 2;
  }
  std::vector<CaseInfo> cases;
  if (f.filter.empty()) {
    cases = std::move(found).value();
  } else {
    std::regex re;
    try {
      re = std::regex(f.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      std::cerr << "error: --filter '" << f.filter << "' is not a valid regular expression: " << e.what() << std::endl;
      return 2;
    }
    for (auto& c : *found)
      if (std::regex_search(c.name, re)) cases.push_back(std::move(c));
  }

  RunnerOptions ro;
  ro.threads = f.threads;
  ro.jobs = f.jobs;
  ro.timeout_s = f.timeout_s;
  ro.memory_limit_mb = f.memory_limit_mb;
  ProgressOptions po;
  po.title = "conformance";
  po.unit = "cases";
  po.total = static_cast<int64_t>(cases.size());
  po.enabled = !f.json;
  Progress progress(po);
  int not_passed = 0;
  ro.on_done = [&](const CaseInfo& c, const CaseOutcome& o) {
    if (f.verbose)
      progress.message(std::string(case_status_name(o.status)) + "  " + c.name + (o.detail.empty() ? "" : "  ") +
                       o.detail);
    if (o.status != CaseStatus::kPassed) progress.set_note(std::to_string(++not_passed) + " not passed");
    progress.advance();
  };
  const std::vector<CaseReport> reports = run_cases(cases, ro);
  progress.finish();

  std::vector<std::string> ops;
  OpCounts total;
  std::vector<std::string> passing;
  for (const auto& r : reports) {
    ops.push_back(case_op(r.info.dir));
    total.add(r.outcome.status);
    if (r.outcome.status == CaseStatus::kPassed) passing.push_back(r.info.name);
  }
  if (f.json)
    print_json(reports, ops, total);
  else
    print_summary(reports, ops, total);

  if (!f.list_passing.empty()) {
    std::sort(passing.begin(), passing.end());
    std::ofstream out(f.list_passing, std::ios::trunc);
    for (const auto& n : passing) out << n << "\n";
    out.close();
    if (!out) {
      std::cerr << "error: cannot write '" << f.list_passing << "': " << std::strerror(errno) << std::endl;
      return 1;
    }
  }
  return 0;
}

}  // namespace

Runner add_conformance_command(CLI::App& app) {
  auto f = std::make_shared<ConformanceFlags>();
  CLI::App* c = app.add_subcommand("conformance", "Run ONNX backend test data and tally results per op");
  c->add_option("dir", f->dir, "A test case folder (model.onnx + test_data_set_N/) or a folder searched for them")
      ->required();
  c->add_flag("--json", f->json, "Print one JSON object instead of the table");
  c->add_option("--timeout", f->timeout_s, "Seconds per case before it is killed and counted as crashed")
      ->check(seconds_range(false));
  c->add_option("--filter", f->filter, "Run only cases whose name matches this regular expression");
  c->add_option("--threads", f->threads, "Intra-op threads per case")->check(int_range(1, kMaxThreads));
  c->add_option("--jobs", f->jobs, "Cases run at once, each in its own process")->check(int_range(1, 256));
  c->add_option("--memory-limit", f->memory_limit_mb, "Address-space limit per case process in MiB (0 = none)")
      ->check(int_range(0, int64_t{1} << 30, "MiB; 0: none"));
  c->add_option("--list-passing", f->list_passing, "Write the sorted names of passing cases to FILE, one per line");
  c->add_flag("-v,--verbose", f->verbose, "Print each case's result to stderr as it finishes");
  c->add_flag("--case-child", f->case_child, "Run DIR as one case in this process (internal)")->group("");
  return [f] { return run_conformance(*f); };
}

}  // namespace streamline::tools
