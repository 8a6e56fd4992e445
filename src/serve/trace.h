#pragma once
// Triton's trace extension: which requests are traced (trace_level, trace_rate, trace_count, per
// model or global), and the traces themselves, written as Chrome trace-event JSON (Perfetto,
// chrome://tracing) that spans each request: receive (read and decode), queue, batch (compute
// input, infer, output), every plan step on its stream, and the response (encode).
//
//   TraceManager& traces = core.traces();
//   std::shared_ptr<ActiveTrace> t = traces.start("resnet50", traceparent_header);  // null: not traced
//   if (t) { request.trace = true; t->note_inputs(request.inputs); }
//   ... InferResponse r (r.trace holds the batch's run) ...
//   if (t) traces.finish(*t, r, version);             // recorded; written per log_frequency
//   std::string header = t->traceparent();            // W3C traceparent for the response
//
// W3C trace context: a valid `traceparent` header (00-<32 hex trace id>-<16 hex parent id>-<flags>)
// gives the trace its trace id (the output carries it, with the parent id); without one a trace id
// is made. Files: with log_frequency N > 0 every N traces go to "<trace_file>.<k>" (k = 0, 1, ...);
// with 0 they are kept and written to <trace_file> by flush() (at shutdown) or when trace_file
// changes. Thread-safe.
//
// Server events (the online controller's decisions) are instant events on a "server events"
// track (pid 0): written beside a model's traces while that model is traced to a file, and the
// latest kServerEventsKept of them are kept for server_events_json().

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "streamline/serving.h"

namespace streamline::serve {

// One level of settings; unset fields of a model's settings follow the global ones.
struct TraceSettings {
  std::optional<bool> timestamps, tensors;  // trace_level: TIMESTAMPS, TENSORS (neither = OFF)
  std::optional<int64_t> rate;              // trace one request in every `rate` (>= 1)
  std::optional<int64_t> count;             // traces still to take; -1 = no limit
  std::optional<int64_t> log_frequency;     // traces per file; 0 = one file, at flush()
  std::optional<std::string> file;          // trace_file
};

// A request being traced.
struct ActiveTrace {
  uint64_t sequence = 0;  // this server's trace number
  std::string trace_id;   // 32 lowercase hex digits
  std::string parent_id;  // the caller's span id from traceparent; "" when none came
  std::string span_id;    // 16 hex digits: this request's span
  std::string model;
  bool tensors = false;    // TENSORS level: inputs and outputs are summarised
  int64_t receive_ns = 0;  // the request was read (steady clock)
  int64_t submit_ns = 0;   // handed to the runtime
  uint64_t request_id = 0;
  std::string input_summary;  // JSON object of the inputs (TENSORS)

  void note_submit(uint64_t id);
  void note_inputs(const std::map<std::string, Tensor>& inputs);
  // 00-<trace id>-<span id>-01
  std::string traceparent() const;
};

class TraceManager {
 public:
  TraceManager();
  ~TraceManager();  // flush()

  // Triton's settings as string lists: trace_level, trace_rate, trace_count, log_frequency,
  // trace_file, trace_mode. `model` "" = the global ones; a model's show its own where set.
  std::map<std::string, std::vector<std::string>> settings(const std::string& model) const;
  // Applies changes: key -> values (nullopt = clear: a model's setting follows the global one
  // again). InvalidArgument naming a bad key or value; nothing changes then.
  [[nodiscard]] Status update(const std::string& model,
                              const std::map<std::string, std::optional<std::vector<std::string>>>& changes);

  // Whether this request of `model` is traced (sampling and count); `traceparent` as received.
  std::shared_ptr<ActiveTrace> start(const std::string& model, const std::string& traceparent);
  // Records the finished request (response encoded now).
  void finish(const ActiveTrace& t, const InferResponse& r, const std::string& version);

  // The most recent trace, as a Chrome trace-event document ({"traceEvents": []} when none yet).
  std::string last_trace_json() const;
  // Traces recorded so far (all models).
  uint64_t traces_taken() const;
  // Writes the traces kept for log_frequency 0 to trace_file. Unavailable when it cannot.
  [[nodiscard]] Status flush();

  // Records a server event of `model` now: `name` ("controller instances up") and its arguments
  // (key -> value, written as strings).
  void note_server_event(const std::string& model, const std::string& name,
                         const std::map<std::string, std::string>& args);
  // The latest server events, as a Chrome trace-event document.
  std::string server_events_json() const;
  static constexpr size_t kServerEventsKept = 256;

 private:
  struct Effective;
  Effective effective(const std::string& model) const;  // needs mu_
  Status write_locked(const std::string& path, const std::vector<std::string>& events);

  mutable std::mutex mu_;
  TraceSettings global_;
  std::map<std::string, TraceSettings> models_;
  std::map<std::string, uint64_t> seen_;  // requests seen per model (for the rate)
  uint64_t sequence_ = 0;
  // Events (JSON objects) of traces not yet written, and how many traces they hold.
  std::vector<std::string> pending_;
  int64_t pending_traces_ = 0;
  int file_index_ = 0;
  std::string last_;                       // the last trace's events
  std::deque<std::string> server_events_;  // the latest server events (JSON objects)
};

}  // namespace streamline::serve
