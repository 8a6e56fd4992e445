// ModelStreamInfer's reactor: reads requests, hands each to the core, writes responses one at a
// time, reports per-request errors in the stream, and finishes when the client is done.

#include "serve/grpc_stream.h"

#include <utility>

#include "grpc_service.grpc.pb.h"
#include "serve/echo.h"
#include "serve/grpc_infer.h"

namespace streamline::serve {
namespace {

namespace pb = ::inference;

}  // namespace

void StreamRegistry::add(StreamReactor* s) {
  bool close_now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_.insert(s);
    close_now = closed_;
  }
  if (close_now) s->close();
}

void StreamRegistry::remove(StreamReactor* s) {
  std::lock_guard<std::mutex> lock(mu_);
  open_.erase(s);
}

void StreamRegistry::close_all() {
  // close() never takes the registry's lock, so it may be called under it; a stream removes
  // itself (under this lock) before it is deleted, so every pointer here is alive.
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  for (StreamReactor* s : open_) s->close();
}

bool StreamRegistry::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

StreamReactor::StreamReactor(ServerCore& core, StreamRegistry& registry, std::atomic<uint64_t>& ids,
                             std::string traceparent)
    : core_(core), registry_(registry), ids_(ids), traceparent_(std::move(traceparent)) {
  registry_.add(this);
  StartRead(&in_);
}

void StreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    std::lock_guard<std::mutex> lock(mu_);
    reads_done_ = true;
    maybe_finish();
    return;
  }
  pb::ModelInferRequest req;
  const size_t bytes = in_.Length();
  const bool parsed = grpc::SerializationTraits<pb::ModelInferRequest>::Deserialize(&in_, &req).ok();
  in_.Clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (reads_done_) return;  // closed for shutdown meanwhile: the request is not taken
    ++pending_;
  }
  if (!parsed) {
    pb::ModelStreamInferResponse m;
    m.set_error_message("the request is not a valid inference.ModelInferRequest message (" + std::to_string(bytes) +
                        " bytes)");
    send(m);
    request_done();
  } else {
    const std::string id = req.id();
    grpc_infer(
        core_, req, ids_.fetch_add(1, std::memory_order_relaxed),
        {.streaming = true, .traceparent = traceparent_, .on_trace = nullptr, .stopped = [this] { return gone(); }},
        [this, id](const Status& s, pb::ModelInferResponse r, bool last) {
          pb::ModelStreamInferResponse m;
          if (s.ok()) {
            *m.mutable_infer_response() = std::move(r);
          } else {
            m.set_error_message(cap_message(s.message()));
            m.mutable_infer_response()->set_id(id);
          }
          send(m);
          if (last) request_done();
        });
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!reads_done_) StartRead(&in_);
}

void StreamReactor::send(const pb::ModelStreamInferResponse& m) {
  grpc::ByteBuffer bytes;
  bool own = false;
  const grpc::Status s = grpc::SerializationTraits<pb::ModelStreamInferResponse>::Serialize(m, &bytes, &own);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok() || finished_ || done_) return;
  writes_.push_back(std::move(bytes));
  if (!writing_) {
    writing_ = true;
    StartWrite(&writes_.front());
  }
}

void StreamReactor::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  writes_.pop_front();
  if (!ok) {
    // The client went away: nothing more can be written; the stream ends when gRPC says so.
    writes_.clear();
    writing_ = false;
    reads_done_ = true;
    gone_ = true;
    return;
  }
  if (!writes_.empty() && !finished_) {
    StartWrite(&writes_.front());
    return;
  }
  writing_ = false;
  maybe_finish();
}

void StreamReactor::request_done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --pending_;
    maybe_finish();
  }
  maybe_delete();
}

void StreamReactor::maybe_finish() {
  if (finished_ || done_ || !reads_done_ || pending_ > 0 || writing_) return;
  finished_ = true;
  Finish(final_status_);
}

void StreamReactor::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (reads_done_) return;
  reads_done_ = true;
  final_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down");
  maybe_finish();
}

void StreamReactor::OnCancel() {
  std::lock_guard<std::mutex> lock(mu_);
  gone_ = true;
}

bool StreamReactor::gone() {
  std::lock_guard<std::mutex> lock(mu_);
  return gone_ || done_;
}

void StreamReactor::OnDone() {
  registry_.remove(this);
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  maybe_delete();
}

void StreamReactor::maybe_delete() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_ || pending_ > 0 || deleting_) return;
    deleting_ = true;
  }
  delete this;
}

}  // namespace streamline::serve
