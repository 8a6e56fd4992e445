// ServerCore: requests in flight and draining, metadata, statistics, and the one mapping from
// Status to HTTP and gRPC codes. Prometheus metrics are in metrics.cc.

#include "serve/server_core.h"

#include <algorithm>
#include <chrono>

#include "core/version.h"
#include "serve/json_util.h"

namespace streamline::serve {
namespace {

std::string shape_string(const std::vector<int64_t>& dims, bool batch) {
  std::string s = "[";
  if (batch) s += "-1";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (batch || i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

// What the configuration promises beyond the model itself: at most max_batch_size rows, and the
// configured dims (which may be stricter than the model's).
Status check_against_config(const ModelConfig& c, const InferRequest& r) {
  const bool batch = c.max_batch_size > 0;
  for (const auto& [name, t] : r.inputs) {
    auto it = std::find_if(c.inputs.begin(), c.inputs.end(),
                           [&name = name](const TensorConfig& x) { return x.name == name; });
    if (it == c.inputs.end()) continue;  // the runtime names unknown inputs
    const Shape& s = t.shape();
    const std::string where = "input '" + name + "': ";
    if (batch) {
      if (s.rank() == 0) return invalid_argument(where + "needs a batch dimension (max_batch_size > 0), got a scalar");
      if (s[0] < 1 || s[0] > c.max_batch_size)
        return invalid_argument(where + "batch size " + std::to_string(s[0]) +
                                " is outside [1, max_batch_size=" + std::to_string(c.max_batch_size) + "]");
    }
    if (it->dims.empty() && !batch) continue;
    bool fits = s.rank() == it->dims.size() + (batch ? 1 : 0);
    for (size_t i = 0; fits && i < it->dims.size(); ++i) {
      const int64_t want = it->dims[i];
      fits = want < 0 || s[i + (batch ? 1 : 0)] == want;
    }
    if (!fits)
      return invalid_argument(where + "expected shape " + shape_string(it->dims, batch) + ", got " + t.describe());
  }
  return ok_status();
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Buckets of the refusal time histogram (microseconds): the target is under 1 ms.
LatencyHistogram refusal_histogram() {
  return LatencyHistogram({10, 25, 50, 100, 250, 500, 1000, 2500, 10000});
}

uint64_t now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// `count` events that took `us` microseconds in all, as the statistics extension's duration.
StatisticDuration duration(uint64_t count, double us) {
  return {.count = count, .ns = static_cast<uint64_t>(std::max(0.0, us) * 1000.0)};
}

}  // namespace

int http_status(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
    case StatusCode::kCancelled:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

int grpc_status_code(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 0;  // OK
    case StatusCode::kCancelled:
      return 1;  // CANCELLED
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      return 3;  // INVALID_ARGUMENT
    case StatusCode::kDeadlineExceeded:
      return 4;  // DEADLINE_EXCEEDED
    case StatusCode::kNotFound:
      return 5;  // NOT_FOUND
    case StatusCode::kResourceExhausted:
      return 8;  // RESOURCE_EXHAUSTED
    case StatusCode::kInternal:
      return 13;  // INTERNAL
    case StatusCode::kUnavailable:
      return 14;  // UNAVAILABLE
  }
  return 13;
}

ServerCore::ServerCore(Repository& repository, ServerOptions options)
    : repo_(repository), options_(std::move(options)) {
  // The controllers' decisions go into the traces as server events.
  repo_.set_decision_listener([this](const std::string& model, const ControllerDecision& d) {
    traces_.note_server_event(model, "controller " + d.knob + " " + d.direction,
                              {{"knob", d.knob},
                               {"direction", d.direction},
                               {"from", std::to_string(d.from)},
                               {"to", std::to_string(d.to)},
                               {"reason", d.reason}});
  });
}

ServerCore::~ServerCore() {
  repo_.set_decision_listener({});
  // Callbacks of accepted requests still refer to this object: wait for every one.
  draining_.store(true);
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return in_flight_.load() == 0; });
}

bool ServerCore::ready() const {
  if (draining_.load()) return false;
  for (const auto& e : repo_.index())
    if (e.state != ModelState::kReady) return false;
  return true;
}

ServerMetadata ServerCore::server_metadata() const {
  return ServerMetadata{options_.name,
                        SL_VERSION_STRING,
                        {"binary_tensor_data", "model_repository", "statistics", "model_configuration",
                         "system_shared_memory", "cuda_shared_memory", "logging", "trace", "classification"}};
}

std::string ServerCore::server_metadata_json(const ServerMetadata& m) {
  JsonOut out;
  out.w.StartObject();
  json_key_string(out.w, "name", m.name);
  json_key_string(out.w, "version", m.version);
  json_key(out.w, "extensions");
  out.w.StartArray();
  for (const std::string& e : m.extensions) json_string(out.w, e);
  out.w.EndArray();
  out.w.EndObject();
  return out.str();
}

Result<ModelMetadata> ServerCore::model_metadata(const std::string& model, const std::string& version) const {
  SL_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, repo_.get(model, version));
  const bool batch = m->config.max_batch_size > 0;
  ModelMetadata md;
  md.name = model;
  for (const auto& v : repo_.versions(model)) md.versions.push_back(v->version);
  if (md.versions.empty()) md.versions = {m->version};
  md.platform = "streamline_onnx";
  auto add = [batch](const std::vector<TensorConfig>& from, std::vector<TensorMetadata>* to) {
    for (const auto& t : from) {
      TensorMetadata tm;
      tm.name = t.name;
      tm.datatype = dtype_to_kserve(t.dtype);
      if (batch) tm.shape.push_back(-1);
      tm.shape.insert(tm.shape.end(), t.dims.begin(), t.dims.end());
      to->push_back(std::move(tm));
    }
  };
  add(m->config.inputs, &md.inputs);
  if (m->generator.enabled) {
    // A generator answers with its tokens, not with the model's logits.
    for (const char* name : {kTokenOutput, kIndexOutput}) md.outputs.push_back({name, "INT64", {1, 1}});
  } else {
    add(m->config.outputs, &md.outputs);
  }
  return md;
}

std::string ServerCore::model_metadata_json(const ModelMetadata& m) {
  JsonOut out;
  JsonWriter& w = out.w;
  auto tensors = [&w](const char* key, const std::vector<TensorMetadata>& ts) {
    json_key(w, key);
    w.StartArray();
    for (const auto& t : ts) {
      w.StartObject();
      json_key_string(w, "name", t.name);
      json_key_string(w, "datatype", t.datatype);
      json_key(w, "shape");
      json_int_array(w, t.shape);
      w.EndObject();
    }
    w.EndArray();
  };
  w.StartObject();
  json_key_string(w, "name", m.name);
  json_key(w, "versions");
  w.StartArray();
  for (const auto& v : m.versions) json_string(w, v);
  w.EndArray();
  json_key_string(w, "platform", m.platform);
  tensors("inputs", m.inputs);
  tensors("outputs", m.outputs);
  w.EndObject();
  return out.str();
}

Result<std::vector<ModelStatistics>> ServerCore::statistics(const std::string& model,
                                                            const std::string& version) const {
  std::vector<std::shared_ptr<LoadedModel>> models;
  if (model.empty()) {
    models = repo_.ready_models();
  } else if (!version.empty()) {
    SL_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, repo_.get(model, version));
    models.push_back(std::move(m));
  } else {
    SL_ASSIGN_OR_RETURN(std::shared_ptr<LoadedModel> m, repo_.get(model));
    models = repo_.versions(model);
    if (models.empty()) models.push_back(std::move(m));
  }
  std::vector<ModelStatistics> out;
  out.reserve(models.size());
  for (const auto& m : models) {
    const ServingStats s = repo_.cumulative_stats(*m);
    ModelStatistics& ms = out.emplace_back();
    ms.name = m->config.name;
    ms.version = m->version;
    uint64_t front = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto f = front_failures_.find(ms.name);
      if (f != front_failures_.end())
        for (const auto& [code, n] : f->second) front += n;
      auto l = last_inference_ms_.find(ms.name);
      if (l != last_inference_ms_.end()) ms.last_inference = l->second;
    }
    for (const auto& [b, n] : s.batch_size_hist) ms.inference_count += static_cast<uint64_t>(b) * n;
    ms.execution_count = s.batches;
    InferStatistics& is = ms.inference_stats;
    is.success = duration(s.succeeded, s.total.sum_us);
    is.fail = duration(s.failed + front, 0);
    is.queue = duration(s.queue.count, s.queue.sum_us);
    is.compute_input = duration(s.compute_input.count, s.compute_input.sum_us);
    is.compute_infer = duration(s.compute_infer.count, s.compute_infer.sum_us);
    is.compute_output = duration(s.compute_output.count, s.compute_output.sum_us);
    for (const auto& [b, t] : s.batch_timing) {
      ms.batch_stats.push_back({.batch_size = b,
                                .compute_input = duration(t.runs, t.input_us),
                                .compute_infer = duration(t.runs, t.infer_us),
                                .compute_output = duration(t.runs, t.output_us)});
    }
  }
  return out;
}

std::string ServerCore::statistics_json(const std::vector<ModelStatistics>& stats) {
  JsonOut out;
  JsonWriter& w = out.w;
  auto write_duration = [&w](const char* key, const StatisticDuration& d) {
    json_key(w, key);
    w.StartObject();
    json_key_uint(w, "count", d.count);
    json_key_uint(w, "ns", d.ns);
    w.EndObject();
  };
  w.StartObject();
  json_key(w, "model_stats");
  w.StartArray();
  for (const ModelStatistics& m : stats) {
    w.StartObject();
    json_key_string(w, "name", m.name);
    json_key_string(w, "version", m.version);
    json_key_uint(w, "last_inference", m.last_inference);
    json_key_uint(w, "inference_count", m.inference_count);
    json_key_uint(w, "execution_count", m.execution_count);
    const InferStatistics& is = m.inference_stats;
    json_key(w, "inference_stats");
    w.StartObject();
    write_duration("success", is.success);
    write_duration("fail", is.fail);
    write_duration("queue", is.queue);
    write_duration("compute_input", is.compute_input);
    write_duration("compute_infer", is.compute_infer);
    write_duration("compute_output", is.compute_output);
    write_duration("cache_hit", is.cache_hit);
    write_duration("cache_miss", is.cache_miss);
    w.EndObject();
    json_key(w, "batch_stats");
    w.StartArray();
    for (const BatchStatistics& b : m.batch_stats) {
      w.StartObject();
      json_key_int(w, "batch_size", b.batch_size);
      write_duration("compute_input", b.compute_input);
      write_duration("compute_infer", b.compute_infer);
      write_duration("compute_output", b.compute_output);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return out.str();
}

void ServerCore::refuse(const std::string& model, uint64_t id, Status status, InferCallback& done) {
  bool known = false;
  for (const auto& e : repo_.index()) known = known || e.name == model;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++front_failures_[known ? model : std::string()][status.code()];
  }
  InferResponse r;
  r.id = id;
  r.status = std::move(status);
  done(std::move(r));
}

void ServerCore::note_refusal(const std::string& model, const Status& status, int64_t since_ns) {
  if (status.code() != StatusCode::kResourceExhausted && status.code() != StatusCode::kUnavailable) return;
  const double us = static_cast<double>(steady_ns() - since_ns) / 1000.0;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = refusal_us_.find(model);
  if (it == refusal_us_.end()) it = refusal_us_.emplace(model, refusal_histogram()).first;
  it->second.add(us);
}

void ServerCore::note_inference(const std::string& model) {
  std::lock_guard<std::mutex> lock(mu_);
  last_inference_ms_[model] = now_ms();
}

void ServerCore::finished() {
  // Under the lock, so that drain() cannot miss the wake-up between its check and its wait.
  std::lock_guard<std::mutex> lock(mu_);
  if (in_flight_.fetch_sub(1) == 1) idle_cv_.notify_all();
}

void ServerCore::infer(const std::string& model, const std::string& version, InferRequest request, InferCallback done) {
  // Counted before draining_ is read: drain() sets draining_ and then reads in_flight_, so either
  // it sees this request or this request sees the drain.
  in_flight_.fetch_add(1);
  const int64_t t0 = steady_ns();
  if (draining_.load()) {
    // A copy: `model` may live in the front end's request, which the answer may free.
    const std::string name = model;
    refuse(name, request.id, unavailable("server is shutting down"), done);
    note_refusal(name, unavailable(""), t0);
    finished();
    return;
  }
  auto found = repo_.get(model, version);
  Status s = found.ok() ? check_against_config((*found)->config, request) : found.status();
  if (!s.ok()) {
    refuse(model, request.id, std::move(s), done);
    finished();
    return;
  }
  // The callback must not hold the LoadedModel: the last reference dropped on an instance thread
  // would join that thread from itself.
  (*found)->serving->submit(std::move(request), [this, model, t0, done = std::move(done)](InferResponse r) {
    note_inference(model);
    // Not run (queued and computed nothing): a refusal, timed to the answer.
    const bool refused = !r.status.ok() && r.queue_us == 0 && r.compute_us == 0;
    const Status status = refused ? r.status : ok_status();
    done(std::move(r));
    if (refused) note_refusal(model, status, t0);
    finished();
  });
}

Status ServerCore::check_single_response(const std::string& model, const std::string& version) const {
  auto m = repo_.get(model, version);
  if (m.ok() && (*m)->config.decoupled)
    return unsupported("model '" + model +
                       "' is decoupled (model_transaction_policy): its responses need a stream; use gRPC "
                       "ModelStreamInfer");
  return ok_status();
}

// The refusal begins with Triton's words for it, which clients and scripts look for.
Status ServerCore::check_model_control() const {
  if (!options_.allow_model_control)
    return unsupported(
        "explicit model load / unload is not allowed: the server runs with model control mode none (start it "
        "with --model-control-mode explicit)");
  return ok_status();
}

Status ServerCore::load_model(const std::string& model, const LoadOptions& options) {
  SL_RETURN_IF_ERROR(check_model_control());
  return repo_.load(model, options);
}

Status ServerCore::unload_model(const std::string& model) {
  SL_RETURN_IF_ERROR(check_model_control());
  return repo_.unload(model);
}

bool ServerCore::drain(std::chrono::milliseconds timeout) {
  // condition_variable::wait_for adds the timeout to now in nanoseconds: a longer one (up to
  // milliseconds::max()) would wrap into the past and end the drain at once.
  constexpr std::chrono::milliseconds kLongest = std::chrono::hours(24 * 365);
  draining_.store(true);
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, std::clamp(timeout, std::chrono::milliseconds(0), kLongest),
                           [this] { return in_flight_.load() == 0; });
}

}  // namespace streamline::serve
