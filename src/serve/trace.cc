// Trace settings, sampling, and the Chrome trace-event JSON of each traced request (trace.h).

#include "serve/trace.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <random>

#include "core/clock.h"
#include "serve/echo.h"
#include "serve/json_util.h"
#include "serve/model_config.h"

namespace streamline::serve {
namespace {

// Values of TENSORS summaries: the first few elements of each tensor.
constexpr int64_t kSummaryValues = 16;

bool is_hex(const std::string& s, size_t n) {
  return s.size() == n &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string random_hex(size_t n) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(now_ns()));
  static const char* kDigits = "0123456789abcdef";
  std::string s(n, '0');
  for (;;) {
    for (char& c : s) c = kDigits[rng() & 15];
    if (s.find_first_not_of('0') != std::string::npos) return s;  // all zeros is invalid in W3C
  }
}

std::optional<int64_t> to_int(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::string tensor_summary(const std::map<std::string, Tensor>& ts) {
  JsonOut out;
  out.w.StartObject();
  for (const auto& [name, t] : ts) {
    json_key(out.w, name);
    out.w.StartObject();
    json_key_string(out.w, "datatype", dtype_to_kserve(t.dtype()));
    json_key(out.w, "shape");
    const auto dims = t.shape().dims();
    json_int_array(out.w, std::vector<int64_t>(dims.begin(), dims.end()));
    json_key(out.w, "values");
    out.w.StartArray();
    const int64_t n = std::min<int64_t>(t.numel(), kSummaryValues);
    for (int64_t i = 0; i < n && t.raw(); ++i) {
      switch (t.dtype()) {
        case DType::kFloat32:
          out.w.Double(t.data<float>()[i]);
          break;
        case DType::kInt64:
          out.w.Int64(t.data<int64_t>()[i]);
          break;
        case DType::kInt32:
          out.w.Int(t.data<int32_t>()[i]);
          break;
        default:
          i = n;  // other types: shape and datatype only
      }
    }
    out.w.EndArray();
    out.w.EndObject();
  }
  out.w.EndObject();
  return out.str();
}

// A trace's events: complete ("X") slices and track names, pid = the trace's number.
class Events {
 public:
  explicit Events(uint64_t pid) : pid_(pid) {}
  void track(int tid, const std::string& name) {
    JsonOut o;
    o.w.StartObject();
    json_key_string(o.w, "ph", "M");
    json_key_string(o.w, "name", "thread_name");
    json_key_uint(o.w, "pid", pid_);
    json_key_int(o.w, "tid", tid);
    json_key(o.w, "args");
    o.w.StartObject();
    json_key_string(o.w, "name", name);
    o.w.EndObject();
    o.w.EndObject();
    events_.push_back(o.str());
  }
  void process(const std::string& name) {
    JsonOut o;
    o.w.StartObject();
    json_key_string(o.w, "ph", "M");
    json_key_string(o.w, "name", "process_name");
    json_key_uint(o.w, "pid", pid_);
    json_key(o.w, "args");
    o.w.StartObject();
    json_key_string(o.w, "name", name);
    o.w.EndObject();
    o.w.EndObject();
    events_.push_back(o.str());
  }
  // `args` is a JSON object's members written by the callback.
  template <typename Args>
  void slice(int tid, const std::string& name, const char* cat, int64_t begin_ns, int64_t end_ns, Args args) {
    JsonOut o;
    o.w.StartObject();
    json_key_string(o.w, "ph", "X");
    json_key_string(o.w, "name", name);
    json_key_string(o.w, "cat", cat);
    json_key_uint(o.w, "pid", pid_);
    json_key_int(o.w, "tid", tid);
    json_key(o.w, "ts");
    o.w.Double(static_cast<double>(begin_ns) / 1000.0);
    json_key(o.w, "dur");
    o.w.Double(static_cast<double>(std::max<int64_t>(0, end_ns - begin_ns)) / 1000.0);
    json_key(o.w, "args");
    o.w.StartObject();
    args(o.w);
    o.w.EndObject();
    o.w.EndObject();
    events_.push_back(o.str());
  }
  // An instant event of global scope at `ts_ns`, with string arguments.
  void instant(int tid, const std::string& name, const char* cat, int64_t ts_ns,
               const std::map<std::string, std::string>& args) {
    JsonOut o;
    o.w.StartObject();
    json_key_string(o.w, "ph", "i");
    json_key_string(o.w, "s", "g");
    json_key_string(o.w, "name", name);
    json_key_string(o.w, "cat", cat);
    json_key_uint(o.w, "pid", pid_);
    json_key_int(o.w, "tid", tid);
    json_key(o.w, "ts");
    o.w.Double(static_cast<double>(ts_ns) / 1000.0);
    json_key(o.w, "args");
    o.w.StartObject();
    for (const auto& [k, v] : args) json_key_string(o.w, k, v);
    o.w.EndObject();
    o.w.EndObject();
    events_.push_back(o.str());
  }
  void slice(int tid, const std::string& name, const char* cat, int64_t b, int64_t e) {
    slice(tid, name, cat, b, e, [](JsonWriter&) {});
  }
  std::vector<std::string>& list() { return events_; }

 private:
  uint64_t pid_;
  std::vector<std::string> events_;
};

std::string document(const std::vector<std::string>& events) {
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) {
    out += events[i];
    out += i + 1 < events.size() ? ",\n" : "\n";
  }
  return out + "]}\n";
}

constexpr int kRequestTrack = 0;
constexpr int kBatchTrack = 1;
constexpr int kStreamTrack0 = 2;    // stream s is track 2 + s
constexpr uint64_t kServerPid = 0;  // server events (traces are numbered from 1)

}  // namespace

struct TraceManager::Effective {
  bool timestamps = false, tensors = false;
  int64_t rate = 1000, count = -1, log_frequency = 0;
  std::string file;
  TraceSettings* count_owner = nullptr;  // where the count lives (the model's, or the global)
};

void ActiveTrace::note_submit(uint64_t id) {
  request_id = id;
  submit_ns = now_ns();
}

void ActiveTrace::note_inputs(const std::map<std::string, Tensor>& inputs) {
  if (tensors) input_summary = tensor_summary(inputs);
}

std::string ActiveTrace::traceparent() const {
  return "00-" + trace_id + "-" + span_id + "-01";
}

TraceManager::TraceManager() {
  global_.timestamps = false;
  global_.tensors = false;
  global_.rate = 1000;
  global_.count = -1;
  global_.log_frequency = 0;
  global_.file = "";
}

TraceManager::~TraceManager() {
  (void)flush();
}

TraceManager::Effective TraceManager::effective(const std::string& model) const {
  Effective e;
  const TraceSettings* m = nullptr;
  if (auto it = models_.find(model); it != models_.end()) m = &it->second;
  auto pick = [&](auto field, auto fallback) {
    if (m && (m->*field)) return *(m->*field);
    return (global_.*field).value_or(fallback);
  };
  e.timestamps = pick(&TraceSettings::timestamps, false);
  e.tensors = pick(&TraceSettings::tensors, false);
  e.rate = pick(&TraceSettings::rate, int64_t{1000});
  e.count = pick(&TraceSettings::count, int64_t{-1});
  e.log_frequency = pick(&TraceSettings::log_frequency, int64_t{0});
  e.file = pick(&TraceSettings::file, std::string());
  e.count_owner = const_cast<TraceSettings*>(m && m->count ? m : &global_);
  return e;
}

std::map<std::string, std::vector<std::string>> TraceManager::settings(const std::string& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Effective e = effective(model);
  std::vector<std::string> level;
  if (e.timestamps) level.push_back("TIMESTAMPS");
  if (e.tensors) level.push_back("TENSORS");
  if (level.empty()) level.push_back("OFF");
  return {{"trace_level", level},
          {"trace_rate", {std::to_string(e.rate)}},
          {"trace_count", {std::to_string(e.count)}},
          {"log_frequency", {std::to_string(e.log_frequency)}},
          {"trace_file", {e.file}},
          {"trace_mode", {"triton"}}};
}

Status TraceManager::update(const std::string& model,
                            const std::map<std::string, std::optional<std::vector<std::string>>>& changes) {
  std::lock_guard<std::mutex> lock(mu_);
  TraceSettings next = model.empty() ? global_ : models_[model];
  auto one = [](const std::string& key, const std::vector<std::string>& v) -> Result<std::string> {
    if (v.size() != 1) return invalid_argument("trace setting '" + key + "' takes one value");
    return v[0];
  };
  for (const auto& [key, value] : changes) {
    const bool clear = !value.has_value();
    if (clear && model.empty() && key != "trace_file")
      return invalid_argument("trace setting '" + echo(key) + "': the global settings cannot be cleared");
    if (key == "trace_level") {
      if (clear) {
        next.timestamps.reset();
        next.tensors.reset();
        continue;
      }
      bool ts = false, tensors = false;
      for (const std::string& l : *value) {
        if (l == "TIMESTAMPS")
          ts = true;
        else if (l == "TENSORS")
          tensors = true;
        else if (l != "OFF")
          return invalid_argument("trace_level '" + echo(l) + "' is not OFF, TIMESTAMPS or TENSORS");
      }
      next.timestamps = ts;
      next.tensors = tensors;
    } else if (key == "trace_rate" || key == "trace_count" || key == "log_frequency") {
      std::optional<int64_t>& field = key == "trace_rate"    ? next.rate
                                      : key == "trace_count" ? next.count
                                                             : next.log_frequency;
      if (clear) {
        field.reset();
        continue;
      }
      SL_ASSIGN_OR_RETURN(std::string text, one(key, *value));
      const auto v = to_int(text);
      const int64_t lo = key == "trace_rate" ? 1 : key == "trace_count" ? -1 : 0;
      if (!v || *v < lo)
        return invalid_argument("trace setting '" + key + "' must be an integer >= " + std::to_string(lo) + ", got '" +
                                echo(text) + "'");
      field = *v;
    } else if (key == "trace_file") {
      if (clear) {
        next.file.reset();
        continue;
      }
      SL_ASSIGN_OR_RETURN(std::string text, one(key, *value));
      next.file = text;
    } else if (key == "trace_mode") {
      if (!clear && (value->size() != 1 || (*value)[0] != "triton"))
        return invalid_argument("trace_mode must be \"triton\" (OpenTelemetry export is not served)");
    } else {
      return invalid_argument("unknown trace setting '" + echo(key) + "'");
    }
  }
  const std::string old_file = effective("").file;
  if (model.empty())
    global_ = next;
  else
    models_[model] = next;
  // Traces kept for one file go to the file they were taken for.
  if (!pending_.empty() && model.empty() && old_file != global_.file.value_or("") && !old_file.empty()) {
    (void)write_locked(old_file, pending_);
    pending_.clear();
    pending_traces_ = 0;
  }
  return ok_status();
}

std::shared_ptr<ActiveTrace> TraceManager::start(const std::string& model, const std::string& traceparent) {
  const int64_t now = now_ns();
  std::lock_guard<std::mutex> lock(mu_);
  Effective e = effective(model);
  if (!e.timestamps && !e.tensors) return nullptr;
  if (e.count == 0) return nullptr;
  if (seen_[model]++ % static_cast<uint64_t>(std::max<int64_t>(1, e.rate)) != 0) return nullptr;
  if (e.count > 0) e.count_owner->count = e.count - 1;
  auto t = std::make_shared<ActiveTrace>();
  t->sequence = ++sequence_;
  t->model = model;
  t->tensors = e.tensors;
  t->receive_ns = now;
  t->submit_ns = now;
  // traceparent: version 00, trace id, parent id, flags; anything else starts a new trace.
  const bool valid = traceparent.size() == 55 && traceparent.compare(0, 3, "00-") == 0 && traceparent[35] == '-' &&
                     traceparent[52] == '-' && is_hex(traceparent.substr(3, 32), 32) &&
                     is_hex(traceparent.substr(36, 16), 16) && is_hex(traceparent.substr(53, 2), 2) &&
                     traceparent.substr(3, 32) != std::string(32, '0');
  t->trace_id = valid ? traceparent.substr(3, 32) : random_hex(32);
  t->parent_id = valid ? traceparent.substr(36, 16) : "";
  t->span_id = random_hex(16);
  return t;
}

void TraceManager::finish(const ActiveTrace& t, const InferResponse& r, const std::string& version) {
  const int64_t done = now_ns();
  Events ev(t.sequence);
  ev.process("trace " + std::to_string(t.sequence) + " " + t.model + " (" + t.trace_id.substr(0, 8) + ")");
  ev.track(kRequestTrack, "request");
  const RunTrace* run = r.trace.get();
  const std::string output_summary = t.tensors && r.status.ok() ? tensor_summary(r.outputs) : "";
  ev.slice(kRequestTrack, "request " + t.model, "request", t.receive_ns, done, [&](JsonWriter& w) {
    json_key_string(w, "trace_id", t.trace_id);
    json_key_string(w, "span_id", t.span_id);
    if (!t.parent_id.empty()) json_key_string(w, "parent_span_id", t.parent_id);
    json_key_string(w, "model", t.model);
    json_key_string(w, "version", version);
    json_key_uint(w, "request_id", t.request_id);
    json_key_string(w, "status", r.status.ok() ? "OK" : r.status.message());
    if (!t.input_summary.empty()) {
      json_key(w, "inputs");
      w.RawValue(t.input_summary.data(), t.input_summary.size(), rapidjson::kObjectType);
    }
    if (!output_summary.empty()) {
      json_key(w, "outputs");
      w.RawValue(output_summary.data(), output_summary.size(), rapidjson::kObjectType);
    }
  });
  ev.slice(kRequestTrack, "receive", "receive", t.receive_ns, t.submit_ns);
  if (run) {
    ev.slice(kRequestTrack, "queue", "queue", t.submit_ns, run->begin_ns);
    ev.track(kBatchTrack, "batch (instance " + std::to_string(run->instance) + ")");
    ev.slice(kBatchTrack, "batch", "batch", run->begin_ns, run->end_ns, [&](JsonWriter& w) {
      json_key_int(w, "rows", run->rows);
      json_key_int(w, "requests", run->requests);
      json_key_int(w, "instance", run->instance);
    });
    ev.slice(kBatchTrack, "compute input", "compute", run->begin_ns, run->inputs_done_ns);
    ev.slice(kBatchTrack, "compute infer", "compute", run->inputs_done_ns, run->run_done_ns);
    ev.slice(kBatchTrack, "compute output", "compute", run->run_done_ns, run->end_ns);
    int streams = 0;
    for (const StepSpan& s : run->steps) streams = std::max(streams, s.stream + 1);
    for (int s = 0; s < streams; ++s) ev.track(kStreamTrack0 + s, "stream " + std::to_string(s));
    for (const StepSpan& s : run->steps)
      ev.slice(kStreamTrack0 + s.stream, s.name, "step", s.begin_ns, s.end_ns,
               [&](JsonWriter& w) { json_key_string(w, "op", s.op); });
    ev.slice(kRequestTrack, "response", "response", run->end_ns, done);
  } else {
    ev.slice(kRequestTrack, "response", "response", t.submit_ns, done);
  }

  std::lock_guard<std::mutex> lock(mu_);
  last_ = document(ev.list());
  const Effective e = effective(t.model);
  if (e.file.empty()) return;
  for (auto& s : ev.list()) pending_.push_back(std::move(s));
  ++pending_traces_;
  if (e.log_frequency > 0 && pending_traces_ >= e.log_frequency) {
    (void)write_locked(e.file + "." + std::to_string(file_index_++), pending_);
    pending_.clear();
    pending_traces_ = 0;
  }
}

std::string TraceManager::last_trace_json() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_.empty() ? document({}) : last_;
}

uint64_t TraceManager::traces_taken() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sequence_;
}

Status TraceManager::write_locked(const std::string& path, const std::vector<std::string>& events) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return unavailable("cannot write trace file '" + path + "'");
  f << document(events);
  if (!f) return unavailable("short write to trace file '" + path + "'");
  return ok_status();
}

void TraceManager::note_server_event(const std::string& model, const std::string& name,
                                     const std::map<std::string, std::string>& args) {
  Events ev(kServerPid);
  ev.process("server events");
  std::map<std::string, std::string> all = args;
  all["model"] = model;
  ev.instant(0, name, "server", now_ns(), all);
  std::lock_guard<std::mutex> lock(mu_);
  server_events_.push_back(ev.list().back());
  if (server_events_.size() > kServerEventsKept) server_events_.pop_front();
  const Effective e = effective(model);
  if (e.file.empty() || (!e.timestamps && !e.tensors)) return;
  for (auto& s : ev.list()) pending_.push_back(std::move(s));
}

std::string TraceManager::server_events_json() const {
  Events ev(kServerPid);
  ev.process("server events");
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> list = ev.list();
  list.insert(list.end(), server_events_.begin(), server_events_.end());
  return document(list);
}

Status TraceManager::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string file = effective("").file;
  if (pending_.empty() || file.empty()) return ok_status();
  Status s = write_locked(file, pending_);
  pending_.clear();
  pending_traces_ = 0;
  return s;
}

}  // namespace streamline::serve
