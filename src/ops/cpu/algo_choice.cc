#include "ops/cpu/algo_choice.h"

#include <chrono>
#include <limits>
#include <map>
#include <mutex>

namespace streamline::ops::cpu {

int choose_by_time(const std::string& key, const std::vector<std::function<void()>>& candidates) {
  static std::mutex mu;
  static std::map<std::string, int>* chosen = new std::map<std::string, int>();
  if (candidates.size() < 2) return 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = chosen->find(key);
    if (it != chosen->end()) return it->second;
  }
  constexpr int kRounds = 3;
  std::vector<double> best(candidates.size(), std::numeric_limits<double>::infinity());
  for (const auto& c : candidates) c();
  for (int r = 0; r < kRounds; ++r)
    for (size_t i = 0; i < candidates.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      candidates[i]();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s < best[i]) best[i] = s;
    }
  int pick = 0;
  for (size_t i = 1; i < best.size(); ++i)
    if (best[i] < best[static_cast<size_t>(pick)]) pick = static_cast<int>(i);
  std::lock_guard<std::mutex> lock(mu);
  chosen->emplace(key, pick);
  return pick;
}

}  // namespace streamline::ops::cpu
