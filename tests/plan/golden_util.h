#pragma once
// Golden plan dumps: ExecutionPlan::to_json() compared with a file checked in under
// tests/plan/golden/, with a line diff on a mismatch; SL_UPDATE_GOLDEN=1 rewrites the file instead
// (scripts/update_golden_plans.sh). Used by tests/plan/golden_plan_test.cc and the model tests.
//
//   expect_golden(*plan, "wide3x2_streams1");   // tests/plan/golden/wide3x2_streams1.json

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "plan/execution_plan.h"

namespace streamline::testing {

inline std::string golden_path(const std::string& name) {
  return std::string(SL_SOURCE_DIR) + "/tests/plan/golden/" + name + ".json";
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A line diff of `want` (the golden file) and `got` (the plan now): "-" golden only, "+" new only,
// with two lines of context around each change, from a longest common subsequence (dumps are tens
// of lines).
inline std::string line_diff(const std::string& want, const std::string& got) {
  const std::vector<std::string> a = lines_of(want), b = lines_of(got);
  std::vector<std::vector<int>> lcs(a.size() + 1, std::vector<int>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;)
    for (size_t j = b.size(); j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  struct Line {
    char mark;
    size_t line;  // in the golden file for ' ' and '-', in the new dump for '+'
    std::string text;
  };
  std::vector<Line> all;
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      all.push_back({' ', i + 1, a[i]});
      ++i, ++j;
    } else if (i < a.size() && (j == b.size() || lcs[i + 1][j] >= lcs[i][j + 1])) {
      all.push_back({'-', i + 1, a[i]});
      ++i;
    } else {
      all.push_back({'+', j + 1, b[j]});
      ++j;
    }
  }
  constexpr size_t kContext = 2;
  std::ostringstream o;
  size_t last_printed = SIZE_MAX;
  for (size_t k = 0; k < all.size(); ++k) {
    bool near_change = false;
    for (size_t d = (k >= kContext ? k - kContext : 0); d <= std::min(all.size() - 1, k + kContext); ++d)
      near_change = near_change || all[d].mark != ' ';
    if (!near_change) continue;
    if (last_printed != SIZE_MAX && k != last_printed + 1) o << "  ...\n";
    o << all[k].mark << ' ' << all[k].line << ": " << all[k].text << "\n";
    last_printed = k;
  }
  return o.str();
}

// Compares `plan`'s dump with the golden file `name`; with SL_UPDATE_GOLDEN=1 rewrites it instead.
inline void expect_golden(const plan::ExecutionPlan& plan, const std::string& name) {
  const std::string dump = plan.to_json();
  const std::string path = golden_path(name);
  if (const char* update = std::getenv("SL_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    std::ofstream out(path);
    ASSERT_TRUE(out) << "cannot write " << path;
    out << dump;
    return;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << path << " is missing; make it with scripts/update_golden_plans.sh";
  std::stringstream want;
  want << in.rdbuf();
  if (dump == want.str()) return;
  ADD_FAILURE() << "the plan for '" << name << "' differs from " << path
                << " (- golden, + now; line numbers of each side):\n"
                << line_diff(want.str(), dump)
                << "if the change is intended, run scripts/update_golden_plans.sh and commit the dumps";
}

}  // namespace streamline::testing
