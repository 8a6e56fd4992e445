#include "exec/trace.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/clock.h"

namespace streamline::exec {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') { o += '\\'; o += c; }
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o;
}

std::string shapes_of(const plan::ExecutionPlan& p, const std::vector<int>& slots) {
  std::string s;
  for (int i : slots) {
    if (i < 0) continue;
    const auto& t = p.slots[static_cast<size_t>(i)];
    if (!s.empty()) s += ' ';
    s += t.shape.to_string();
  }
  return s;
}

}  // namespace

void TraceRecorder::on_run_begin(const plan::ExecutionPlan& plan) {
  std::lock_guard<std::mutex> lock(mu_);
  if (streams_.size() < static_cast<size_t>(plan.num_streams)) streams_.resize(static_cast<size_t>(plan.num_streams));
  if (origin_ns_ == 0) origin_ns_ = now_ns();
  ++runs_;
}

void TraceRecorder::on_step_begin(const plan::ExecutionPlan& plan, int step, int stream) {
  streams_[static_cast<size_t>(stream)].pending_begin = now_ns();
}

void TraceRecorder::on_step_end(const plan::ExecutionPlan& plan, int step, int stream) {
  if (count_.fetch_add(1) >= max_slices_) return;
  StreamBuffer& b = streams_[static_cast<size_t>(stream)];
  b.slices.push_back({&plan, step, stream, runs_, b.pending_begin, now_ns()});
}

void TraceRecorder::on_run_end(const plan::ExecutionPlan& plan) {}

void TraceRecorder::on_step_timed(const plan::ExecutionPlan& plan, int step, int stream, int64_t begin_ns,
                                  int64_t end_ns) {
  if (count_.fetch_add(1) >= max_slices_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (streams_.size() <= static_cast<size_t>(stream)) streams_.resize(static_cast<size_t>(stream) + 1);
  streams_[static_cast<size_t>(stream)].slices.push_back({&plan, step, stream, runs_, begin_ns, end_ns});
}

size_t TraceRecorder::slices() const {
  size_t n = 0;
  for (const auto& s : streams_) n += s.slices.size();
  return n;
}

std::string TraceRecorder::to_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream o;
  o << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  auto sep = [&] {
    if (!first) o << ",\n";
    first = false;
  };
  for (size_t s = 0; s < streams_.size(); ++s) {
    sep();
    o << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 1, \"tid\": " << s << ", \"args\": {\"name\": \"stream "
      << s << "\"}}";
  }
  // Where each (run, plan, event) was recorded, for flow arrows.
  std::map<std::tuple<int, const plan::ExecutionPlan*, int>, const Slice*> recorded;
  for (const auto& sb : streams_)
    for (const auto& sl : sb.slices)
      for (int e : sl.plan->steps[static_cast<size_t>(sl.step)].record_events)
        recorded[{sl.run, sl.plan, e}] = &sl;
  int flow_id = 0;
  char buf[64];
  for (const auto& sb : streams_)
    for (const auto& sl : sb.slices) {
      const plan::Step& st = sl.plan->steps[static_cast<size_t>(sl.step)];
      const double ts = static_cast<double>(sl.begin_ns - origin_ns_) / 1000.0;
      const double dur = static_cast<double>(sl.end_ns - sl.begin_ns) / 1000.0;
      sep();
      std::snprintf(buf, sizeof buf, "%.3f", ts);
      o << "{\"ph\": \"X\", \"pid\": 1, \"tid\": " << sl.stream << ", \"ts\": " << buf;
      std::snprintf(buf, sizeof buf, "%.3f", dur);
      o << ", \"dur\": " << buf << ", \"name\": \"" << esc(st.name) << "\", \"cat\": \"" << esc(st.op)
        << "\", \"args\": {\"op\": \"" << esc(st.op) << "\", \"provider\": \"" << esc(st.provider)
        << "\", \"inputs\": \"" << shapes_of(*sl.plan, st.inputs) << "\", \"outputs\": \""
        << shapes_of(*sl.plan, st.outputs) << "\", \"run\": " << sl.run << "}}";
      for (int e : st.wait_events) {
        auto it = recorded.find({sl.run, sl.plan, e});
        if (it == recorded.end()) continue;
        const Slice& from = *it->second;
        const int id = ++flow_id;
        sep();
        std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(from.end_ns - origin_ns_) / 1000.0 - 0.001);
        o << "{\"ph\": \"s\", \"id\": " << id << ", \"pid\": 1, \"tid\": " << from.stream << ", \"ts\": " << buf
          << ", \"name\": \"event " << e << "\", \"cat\": \"event\"}";
        sep();
        std::snprintf(buf, sizeof buf, "%.3f", ts);
        o << "{\"ph\": \"f\", \"bp\": \"e\", \"id\": " << id << ", \"pid\": 1, \"tid\": " << sl.stream
          << ", \"ts\": " << buf << ", \"name\": \"event " << e << "\", \"cat\": \"event\"}";
      }
    }
  o << "\n]}\n";
  return o.str();
}

Status TraceRecorder::write(const std::string& path) const {
  std::ofstream f(path);
  if (!f) return unavailable("cannot write trace file '" + path + "'");
  f << to_json();
  if (!f) return unavailable("short write to trace file '" + path + "'");
  return ok_status();
}

}  // namespace streamline::exec
