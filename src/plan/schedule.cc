#include "plan/schedule.h"

#include <algorithm>
#include <fstream>
#include <queue>
#include <regex>
#include <sstream>

namespace streamline::plan {

std::vector<std::vector<int>> step_predecessors(const ExecutionPlan& plan) {
  std::vector<int> producer(plan.slots.size(), -1);
  for (size_t s = 0; s < plan.steps.size(); ++s)
    for (int o : plan.steps[s].outputs)
      if (o >= 0) producer[static_cast<size_t>(o)] = static_cast<int>(s);
  std::vector<std::vector<int>> preds(plan.steps.size());
  for (size_t s = 0; s < plan.steps.size(); ++s)
    for (int i : plan.steps[s].inputs) {
      if (i < 0) continue;
      const int p = producer[static_cast<size_t>(i)];
      if (p >= 0 && std::find(preds[s].begin(), preds[s].end(), p) == preds[s].end()) preds[s].push_back(p);
    }
  return preds;
}

Status assign_streams(ExecutionPlan& plan, const ScheduleOptions& options, std::vector<int>* order_out) {
  const int n = static_cast<int>(plan.steps.size());
  const int streams = std::max(1, options.num_streams);
  const auto preds = step_predecessors(plan);
  std::vector<std::vector<int>> succs(static_cast<size_t>(n));
  for (int s = 0; s < n; ++s)
    for (int p : preds[static_cast<size_t>(s)]) succs[static_cast<size_t>(p)].push_back(s);

  // Pass 1: upward rank (longest cost path from the step to the end) and the critical path.
  std::vector<double> rank(static_cast<size_t>(n), 0);
  plan.total_cost = 0;
  for (int s = n - 1; s >= 0; --s) {
    double best = 0;
    for (int c : succs[static_cast<size_t>(s)]) best = std::max(best, rank[static_cast<size_t>(c)]);
    rank[static_cast<size_t>(s)] = plan.steps[static_cast<size_t>(s)].cost + best;
    plan.total_cost += plan.steps[static_cast<size_t>(s)].cost;
  }
  plan.critical_path_cost = 0;
  for (int s = 0; s < n; ++s)
    if (preds[static_cast<size_t>(s)].empty())
      plan.critical_path_cost = std::max(plan.critical_path_cost, rank[static_cast<size_t>(s)]);

  // Pass 2: list scheduling by decreasing rank; each step to the stream where it finishes first.
  std::vector<int> pending(static_cast<size_t>(n));
  for (int s = 0; s < n; ++s) pending[static_cast<size_t>(s)] = static_cast<int>(preds[static_cast<size_t>(s)].size());
  auto cmp = [&](int a, int b) {
    if (rank[static_cast<size_t>(a)] != rank[static_cast<size_t>(b)])
      return rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)];
    return a > b;  // earlier step first on ties
  };
  std::priority_queue<int, std::vector<int>, decltype(cmp)> ready(cmp);
  for (int s = 0; s < n; ++s)
    if (pending[static_cast<size_t>(s)] == 0) ready.push(s);
  std::vector<double> stream_free(static_cast<size_t>(streams), 0), finish(static_cast<size_t>(n), 0);
  std::vector<int> stream_of(static_cast<size_t>(n), 0), order;
  order.reserve(static_cast<size_t>(n));
  while (!ready.empty()) {
    const int s = ready.top();
    ready.pop();
    const Step& st = plan.steps[static_cast<size_t>(s)];
    int pinned = -1;
    auto pin = options.pinned_streams.find(st.name);
    if (pin != options.pinned_streams.end()) {
      if (pin->second < 0 || pin->second >= streams)
        return invalid_argument("node '" + st.name + "' is pinned to stream " + std::to_string(pin->second) +
                                " but the plan has " + std::to_string(streams) + " streams");
      pinned = pin->second;
    }
    // Earliest finish; ties go to the lowest stream index.
    int choice = -1;
    double best_finish = 0;
    for (int c = 0; c < streams; ++c) {
      if (pinned >= 0 && c != pinned) continue;
      double start = stream_free[static_cast<size_t>(c)];
      for (int p : preds[static_cast<size_t>(s)])
        start = std::max(start, finish[static_cast<size_t>(p)] +
                                    (stream_of[static_cast<size_t>(p)] != c ? options.event_cost : 0.0));
      const double f = start + st.cost;
      if (choice < 0 || f < best_finish - 1e-9) {
        best_finish = f;
        choice = c;
      }
    }
    stream_of[static_cast<size_t>(s)] = choice;
    finish[static_cast<size_t>(s)] = best_finish;
    stream_free[static_cast<size_t>(choice)] = best_finish;
    order.push_back(s);
    for (int c : succs[static_cast<size_t>(s)])
      if (--pending[static_cast<size_t>(c)] == 0) ready.push(c);
  }
  if (static_cast<int>(order.size()) != n) return internal_error("step graph has a cycle");

  // Pass 3: reorder steps into scheduling order (a topological order) and fill stream tables.
  std::vector<int> new_index(static_cast<size_t>(n));
  std::vector<Step> steps;
  steps.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    new_index[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
    steps.push_back(std::move(plan.steps[static_cast<size_t>(order[static_cast<size_t>(i)])]));
  }
  plan.steps = std::move(steps);
  if (order_out) *order_out = order;
  int used = 0;
  for (int i = 0; i < n; ++i) used = std::max(used, stream_of[static_cast<size_t>(order[static_cast<size_t>(i)])] + 1);
  plan.num_streams = std::max(1, used);
  plan.stream_steps.assign(static_cast<size_t>(plan.num_streams), {});
  for (int i = 0; i < n; ++i) {
    Step& st = plan.steps[static_cast<size_t>(i)];
    st.stream = stream_of[static_cast<size_t>(order[static_cast<size_t>(i)])];
    st.position = static_cast<int>(plan.stream_steps[static_cast<size_t>(st.stream)].size());
    plan.stream_steps[static_cast<size_t>(st.stream)].push_back(i);
  }
  return ok_status();
}

Status insert_events(ExecutionPlan& plan) {
  const int n = static_cast<int>(plan.steps.size());
  const int streams = plan.num_streams;
  if (plan.stream_steps.empty()) {
    plan.stream_steps.assign(1, {});
    for (int i = 0; i < n; ++i) {
      plan.steps[static_cast<size_t>(i)].stream = 0;
      plan.steps[static_cast<size_t>(i)].position = i;
      plan.stream_steps[0].push_back(i);
    }
  }
  const auto preds = step_predecessors(plan);
  for (auto& st : plan.steps) {
    st.wait_events.clear();
    st.record_events.clear();
  }
  // Vector clocks: at the end of each step, and the running clock of each stream.
  std::vector<std::vector<int>> end_clock(static_cast<size_t>(n));
  std::vector<std::vector<int>> stream_clock(static_cast<size_t>(streams),
                                             std::vector<int>(static_cast<size_t>(streams), -1));
  std::vector<int> event_of(static_cast<size_t>(n), -1);  // the event a step records, if any
  int inserted = 0, kept = 0;
  for (int s = 0; s < n; ++s) {
    Step& st = plan.steps[static_cast<size_t>(s)];
    std::vector<int>& clock = stream_clock[static_cast<size_t>(st.stream)];
    // Cross-stream predecessors, latest position first per stream so one wait covers the others.
    std::vector<int> cross;
    for (int p : preds[static_cast<size_t>(s)])
      if (plan.steps[static_cast<size_t>(p)].stream != st.stream) cross.push_back(p);
    inserted += static_cast<int>(cross.size());
    std::sort(cross.begin(), cross.end(), [&](int a, int b) {
      return plan.steps[static_cast<size_t>(a)].position > plan.steps[static_cast<size_t>(b)].position;
    });
    for (int p : cross) {
      const Step& ps = plan.steps[static_cast<size_t>(p)];
      if (p > s) return internal_error("step '" + st.name + "' is ordered before its producer '" + ps.name + "'");
      if (clock[static_cast<size_t>(ps.stream)] >= ps.position) continue;  // already implied
      if (event_of[static_cast<size_t>(p)] < 0) {
        event_of[static_cast<size_t>(p)] = kept++;
        plan.steps[static_cast<size_t>(p)].record_events.push_back(event_of[static_cast<size_t>(p)]);
      }
      st.wait_events.push_back(event_of[static_cast<size_t>(p)]);
      const std::vector<int>& pc = end_clock[static_cast<size_t>(p)];
      for (int t = 0; t < streams; ++t)
        clock[static_cast<size_t>(t)] = std::max(clock[static_cast<size_t>(t)], pc[static_cast<size_t>(t)]);
    }
    clock[static_cast<size_t>(st.stream)] = st.position;
    end_clock[static_cast<size_t>(s)] = clock;
  }
  plan.events_inserted = inserted;
  plan.num_events = kept;
  return ok_status();
}

HappensBefore::HappensBefore(const ExecutionPlan& plan) : plan_(plan) {
  const size_t n = plan.steps.size();
  const size_t streams = static_cast<size_t>(std::max(1, plan.num_streams));
  start_.assign(n, std::vector<int>(streams, -1));
  std::vector<std::vector<int>> stream_clock(streams, std::vector<int>(streams, -1));
  std::vector<std::vector<int>> event_clock(static_cast<size_t>(plan.num_events));
  std::vector<char> recorded(static_cast<size_t>(plan.num_events), 0);
  // Replays each stream in position order, interleaved in plan order; a wait on an event not yet
  // recorded in that order contributes nothing (the verifier then reports the missing order).
  for (size_t s = 0; s < n; ++s) {
    const Step& st = plan.steps[s];
    std::vector<int>& clock = stream_clock[static_cast<size_t>(st.stream)];
    for (int e : st.wait_events) {
      if (e < 0 || e >= plan.num_events || !recorded[static_cast<size_t>(e)]) continue;
      for (size_t t = 0; t < streams; ++t) clock[t] = std::max(clock[t], event_clock[static_cast<size_t>(e)][t]);
    }
    start_[s] = clock;
    clock[static_cast<size_t>(st.stream)] = st.position;
    for (int e : st.record_events)
      if (e >= 0 && e < plan.num_events) {
        event_clock[static_cast<size_t>(e)] = clock;
        recorded[static_cast<size_t>(e)] = 1;
      }
  }
}

bool HappensBefore::before(int a, int b) const {
  if (a == b) return false;
  const Step& sa = plan_.steps[static_cast<size_t>(a)];
  const Step& sb = plan_.steps[static_cast<size_t>(b)];
  if (sa.stream == sb.stream) return sa.position < sb.position;
  return start_[static_cast<size_t>(b)][static_cast<size_t>(sa.stream)] >= sa.position;
}

Result<std::map<std::string, int>> parse_pin_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return not_found("cannot open stream pin file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  std::map<std::string, int> pins;
  const std::regex entry("\"((?:[^\"\\\\]|\\\\.)*)\"\\s*:\\s*(-?[0-9]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), entry); it != std::sregex_iterator(); ++it)
    pins[(*it)[1].str()] = std::stoi((*it)[2].str());
  std::string stripped;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) stripped += c;
  if (stripped.empty() || stripped.front() != '{' || stripped.back() != '}' || (pins.empty() && stripped != "{}"))
    return invalid_argument("stream pin file '" + path + "' must be a JSON object {\"node name\": stream, ...}");
  return pins;
}

}  // namespace streamline::plan
