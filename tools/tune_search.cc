#include "tune_search.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/cpu_set.h"

namespace streamline::tools {
namespace {

int cores_used(const TuneConfig& c) {
  return c.device == "cpu" ? c.instances * c.threads : c.instances;
}

std::vector<std::pair<int, int64_t>> batching_choices(const TuneSpace& s) {
  std::vector<std::pair<int, int64_t>> out;
  auto add = [&](int b, int64_t d) {
    if (std::find(out.begin(), out.end(), std::make_pair(b, d)) == out.end()) out.emplace_back(b, d);
  };
  if (!s.batchable || s.max_batch_sizes.empty()) {
    add(1, 0);
    return out;
  }
  for (int b : s.max_batch_sizes) {
    if (b <= 1) {
      add(1, 0);
      continue;
    }
    if (s.queue_delays_us.empty()) add(b, 0);
    for (int64_t d : s.queue_delays_us) add(b, std::max<int64_t>(0, d));
  }
  return out;
}

std::string num(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `ticks` steps up to `max`.
double tick_step(double max, int ticks) {
  const double raw = max / std::max(1, ticks);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace

std::string TuneConfig::label() const {
  std::string s = std::to_string(instances) + "x" + std::to_string(threads) + " s" + std::to_string(streams) + " b" +
                  std::to_string(max_batch);
  if (max_batch > 1) s += " d" + std::to_string(queue_delay_us) + "us";
  if (elastic) s += " elastic";
  if (device != "cpu") s += " " + device + " " + precision;
  return s;
}

std::vector<TuneConfig> candidate_configs(const TuneSpace& space) {
  const int cores = std::max(1, space.cores);
  const int limit = space.oversubscribe ? 2 * cores : cores;
  const int max_instances = std::max(1, std::min(space.max_instances, limit));
  std::vector<int> counts;
  for (int i = 1; i <= max_instances; i *= 2) counts.push_back(i);
  if (std::find(counts.begin(), counts.end(), std::min(cores, max_instances)) == counts.end())
    counts.push_back(std::min(cores, max_instances));
  std::sort(counts.begin(), counts.end());
  const auto batching = batching_choices(space);
  std::vector<TuneConfig> out;
  auto add = [&](TuneConfig c) {
    for (const auto& [b, d] : batching) {
      c.max_batch = b;
      c.queue_delay_us = d;
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  };
  for (const std::string& device : space.devices) {
    if (device == "cpu") {
      for (int i : counts) {
        const int share = core::share_threads(0, limit, i);
        std::vector<int> thread_counts = {share};
        if (share / 2 >= 1) thread_counts.push_back(share / 2);
        for (int t : thread_counts) {
          for (int s : space.streams) {
            if (s < 1 || s > t) continue;
            for (bool elastic : {false, true}) {
              if (elastic && s < 2) continue;
              TuneConfig c;
              c.instances = i;
              c.threads = t;
              c.streams = s;
              c.elastic = elastic;
              add(c);
            }
          }
        }
      }
    } else {
      for (int i : {1, 2}) {
        for (const std::string& p : space.cuda_precisions) {
          TuneConfig c;
          c.instances = i;
          c.device = device;
          c.precision = p;
          add(c);
        }
      }
    }
  }
  return out;
}

bool meets_objective(const Trial& t, const Objective& goal) {
  if (!t.ok || t.rejected > 0) return false;
  if (goal.latency_budget_ms > 0 && t.p99_ms > goal.latency_budget_ms) return false;
  if (goal.offered_rows_per_s > 0 && t.throughput < 0.95 * goal.offered_rows_per_s) return false;
  return true;
}

bool rank_before(const Trial& a, const Trial& b, const Objective& goal) {
  if (a.ok != b.ok) return a.ok;
  const bool ma = meets_objective(a, goal), mb = meets_objective(b, goal);
  if (ma != mb) return ma;
  if (a.ok) {
    if (ma && goal.offered_rows_per_s <= 0) {
      if (a.throughput != b.throughput) return a.throughput > b.throughput;
    } else if (!ma && a.rejected != b.rejected) {
      return a.rejected < b.rejected;
    }
    if (a.p99_ms != b.p99_ms) return a.p99_ms < b.p99_ms;
    if (a.throughput != b.throughput) return a.throughput > b.throughput;
  }
  if (cores_used(a.config) != cores_used(b.config)) return cores_used(a.config) < cores_used(b.config);
  return a.config.label() < b.config.label();
}

const Trial* best_trial(const std::vector<Trial>& trials, const Objective& goal) {
  const Trial* best = nullptr;
  for (const Trial& t : trials)
    if (!best || rank_before(t, *best, goal)) best = &t;
  return best;
}

std::vector<Trial> latest_trials(const std::vector<Trial>& trials) {
  std::vector<Trial> out;
  for (const Trial& t : trials) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Trial& o) { return o.config == t.config; });
    if (it == out.end())
      out.push_back(t);
    else if (t.round >= it->round)
      *it = t;
  }
  return out;
}

std::vector<Trial> frontier(const std::vector<Trial>& trials) {
  std::vector<Trial> ok;
  for (const Trial& t : trials)
    if (t.ok) ok.push_back(t);
  std::sort(ok.begin(), ok.end(), [](const Trial& a, const Trial& b) {
    return a.throughput != b.throughput ? a.throughput > b.throughput : a.p99_ms < b.p99_ms;
  });
  std::vector<Trial> out;
  double best_p99 = INFINITY;
  for (const Trial& t : ok) {
    if (t.p99_ms < best_p99) {
      out.push_back(t);
      best_p99 = t.p99_ms;
    }
  }
  std::reverse(out.begin(), out.end());
  return out;
}

HalvingSearch::HalvingSearch(std::vector<TuneConfig> candidates, double first_seconds, int eta)
    : current_(std::move(candidates)), first_seconds_(first_seconds), eta_(std::max(2, eta)) {}

double HalvingSearch::round_seconds() const {
  return first_seconds_ * std::pow(eta_, round_);
}

void HalvingSearch::report(const std::vector<Trial>& trials, const Objective& goal) {
  std::vector<Trial> round;
  for (Trial t : trials) {
    if (std::find(current_.begin(), current_.end(), t.config) == current_.end()) continue;
    t.round = round_;
    trials_.push_back(t);
    round.push_back(t);
  }
  const size_t keep = (current_.size() + static_cast<size_t>(eta_) - 1) / static_cast<size_t>(eta_);
  std::sort(round.begin(), round.end(), [&](const Trial& a, const Trial& b) { return rank_before(a, b, goal); });
  current_.clear();
  ++round_;
  if (keep <= 1) return;
  for (size_t i = 0; i < std::min(keep, round.size()); ++i)
    if (round[i].ok) current_.push_back(round[i].config);
  if (current_.size() <= 1) current_.clear();  // a single survivor is the answer already
}

int HalvingSearch::planned_rounds(int n, int eta) {
  eta = std::max(2, eta);
  if (n <= 0) return 0;
  int rounds = 1;
  for (int m = n; (m + eta - 1) / eta > 1; m = (m + eta - 1) / eta) ++rounds;
  return rounds;
}

int HalvingSearch::planned_trials(int n, int eta) {
  eta = std::max(2, eta);
  int total = 0, m = n;
  for (int r = 0; r < planned_rounds(n, eta); ++r, m = (m + eta - 1) / eta) total += m;
  return total;
}

double HalvingSearch::planned_seconds(int n, double first_seconds, int eta) {
  eta = std::max(2, eta);
  double total = 0;
  int m = n;
  for (int r = 0; r < planned_rounds(n, eta); ++r, m = (m + eta - 1) / eta)
    total += m * first_seconds * std::pow(eta, r);
  return total;
}

std::string frontier_svg(const std::vector<Trial>& all, const Trial* chosen, const Objective& goal,
                         const std::string& title) {
  const double w = 760, h = 460, left = 70, right = 20, top = 40, bottom = 50;
  const double pw = w - left - right, ph = h - top - bottom;
  std::vector<Trial> trials;
  for (const Trial& t : all)
    if (t.ok) trials.push_back(t);
  double max_x = goal.latency_budget_ms > 0 ? goal.latency_budget_ms * 1.1 : 0, max_y = 0;
  for (const Trial& t : trials) max_x = std::max(max_x, t.p99_ms * 1.05), max_y = std::max(max_y, t.throughput * 1.1);
  if (max_x <= 0) max_x = 1;
  if (max_y <= 0) max_y = 1;
  const double sx = tick_step(max_x, 6), sy = tick_step(max_y, 5);
  max_x = std::ceil(max_x / sx) * sx;
  max_y = std::ceil(max_y / sy) * sy;
  auto X = [&](double v) { return left + v / max_x * pw; };
  auto Y = [&](double v) { return top + ph - v / max_y * ph; };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" viewBox=\"0 0 " << w
    << " " << h << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << left << "\" y=\"22\" font-size=\"14\">" << xml_escape(title) << "</text>\n";
  for (double v = 0; v <= max_x + 1e-9; v += sx) {
    o << "<line x1=\"" << num(X(v), 1) << "\" y1=\"" << top << "\" x2=\"" << num(X(v), 1) << "\" y2=\"" << top + ph
      << "\" stroke=\"#eee\"/>\n<text x=\"" << num(X(v), 1) << "\" y=\"" << top + ph + 16
      << "\" text-anchor=\"middle\">" << num(v, sx < 1 ? 2 : 0) << "</text>\n";
  }
  for (double v = 0; v <= max_y + 1e-9; v += sy) {
    o << "<line x1=\"" << left << "\" y1=\"" << num(Y(v), 1) << "\" x2=\"" << left + pw << "\" y2=\"" << num(Y(v), 1)
      << "\" stroke=\"#eee\"/>\n<text x=\"" << left - 6 << "\" y=\"" << num(Y(v) + 4, 1) << "\" text-anchor=\"end\">"
      << num(v, sy < 1 ? 2 : 0) << "</text>\n";
  }
  o << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << left + pw / 2 << "\" y=\"" << h - 12 << "\" text-anchor=\"middle\">p99 latency (ms)</text>\n";
  o << "<text x=\"16\" y=\"" << top + ph / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << top + ph / 2
    << ")\">throughput (rows/s)</text>\n";
  if (goal.latency_budget_ms > 0) {
    o << "<line x1=\"" << num(X(goal.latency_budget_ms), 1) << "\" y1=\"" << top << "\" x2=\""
      << num(X(goal.latency_budget_ms), 1) << "\" y2=\"" << top + ph
      << "\" stroke=\"#c00\" stroke-dasharray=\"6 4\"/>\n<text x=\"" << num(X(goal.latency_budget_ms) + 4, 1)
      << "\" y=\"" << top + 14 << "\" fill=\"#c00\">budget " << num(goal.latency_budget_ms, 1) << " ms</text>\n";
  }
  for (const Trial& t : trials)
    o << "<circle cx=\"" << num(X(t.p99_ms), 1) << "\" cy=\"" << num(Y(t.throughput), 1)
      << "\" r=\"3\" fill=\"#999\"><title>" << xml_escape(t.config.label()) << "</title></circle>\n";
  const std::vector<Trial> front = frontier(trials);
  if (!front.empty()) {
    o << "<polyline fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"2\" points=\"";
    for (const Trial& t : front) o << num(X(t.p99_ms), 1) << "," << num(Y(t.throughput), 1) << " ";
    o << "\"/>\n";
    for (const Trial& t : front)
      o << "<circle cx=\"" << num(X(t.p99_ms), 1) << "\" cy=\"" << num(Y(t.throughput), 1)
        << "\" r=\"4\" fill=\"#1f5fbf\"/>\n<text x=\"" << num(X(t.p99_ms) + 6, 1) << "\" y=\""
        << num(Y(t.throughput) - 6, 1) << "\" font-size=\"10\" fill=\"#1f5fbf\">" << xml_escape(t.config.label())
        << "</text>\n";
  }
  if (chosen && chosen->ok)
    o << "<circle cx=\"" << num(X(chosen->p99_ms), 1) << "\" cy=\"" << num(Y(chosen->throughput), 1)
      << "\" r=\"8\" fill=\"none\" stroke=\"#c00\" stroke-width=\"2\"/>\n";
  o << "</svg>\n";
  return o.str();
}

std::string tuned_config_pbtxt(const std::string& name, const TuneConfig& c, bool batchable,
                               const std::vector<std::string>& comment_lines) {
  std::ostringstream o;
  for (const std::string& line : comment_lines) o << "# " << line << "\n";
  o << "name: \"" << name << "\"\n";
  o << "platform: \"onnxruntime_onnx\"\n";
  o << "max_batch_size: " << (batchable ? std::max(1, c.max_batch) : 0) << "\n";
  o << "instance_group [ { count: " << c.instances << " kind: " << (c.device == "cpu" ? "KIND_CPU" : "KIND_GPU")
    << " } ]\n";
  if (batchable && c.max_batch > 1)
    o << "dynamic_batching {\n  preferred_batch_size: [ " << c.max_batch
      << " ]\n  max_queue_delay_microseconds: " << c.queue_delay_us << "\n}\n";
  auto param = [&](const std::string& key, const std::string& value) {
    o << "parameters { key: \"" << key << "\" value: { string_value: \"" << value << "\" } }\n";
  };
  if (c.device == "cpu") param("threads", std::to_string(c.threads));
  param("streams", std::to_string(c.streams));
  if (c.elastic) param("elastic_threads", "true");
  if (c.device != "cpu") param("precision", c.precision);
  return o.str();
}

}  // namespace streamline::tools
