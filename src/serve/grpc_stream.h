#pragma once
// ModelStreamInfer: Triton's bidirectional streaming inference on gRPC's callback API.
//
//   auto* reactor = new StreamReactor(core, streams, ids);   // from the service's ModelStreamInfer
//   return reactor;                                          // gRPC drives it; it deletes itself
//
// Each message read is one ModelInferRequest, handed to the core at once (requests of a stream
// run concurrently and are answered as they finish, each response naming its request's id). An
// error of one request (a bad message, an unknown model, a failed run) is sent as a
// ModelStreamInferResponse with error_message, and the stream stays open. When the client closes
// its side, the stream finishes OK after the last response is written. Writes go out one at a
// time, in the order the responses were produced.
// StreamRegistry::close_all() ends every open stream with UNAVAILABLE (server shutdown) once the
// responses of the requests it has already read are written.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <string>

#include "grpc_service.pb.h"
#include "serve/server_core.h"

namespace streamline::serve {

class StreamReactor;

// The open streams of a server. Thread-safe.
class StreamRegistry {
 public:
  void add(StreamReactor* s);
  void remove(StreamReactor* s);
  // Ends every open stream (UNAVAILABLE) once its pending responses are written; later streams
  // end at once.
  void close_all();
  bool closed() const;

 private:
  mutable std::mutex mu_;
  std::set<StreamReactor*> open_;
  bool closed_ = false;
};

class StreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts reading. `core`, `registry` and `ids` must outlive the stream (the service owns them).
  // `traceparent`: the call's W3C trace context metadata, for the stream's traced requests.
  StreamReactor(ServerCore& core, StreamRegistry& registry, std::atomic<uint64_t>& ids, std::string traceparent);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;
  void OnCancel() override;

  // Server shutdown: no more requests are read; the stream finishes UNAVAILABLE after its pending
  // responses.
  void close();
  // The client is gone (cancelled, or a write failed): nothing more reaches it, so a generation
  // stops. Thread-safe.
  bool gone();

 private:
  ~StreamReactor() override = default;
  // Serializes and queues one message; starts writing when idle. Takes mu_.
  void send(const inference::ModelStreamInferResponse& m);
  // One request answered (its last response queued).
  void request_done();
  // Finishes once reading stopped, every request is answered and every write is out. Needs mu_.
  void maybe_finish();
  // Deletes this once gRPC is done with it and no request still refers to it. Needs mu_ unlocked.
  void maybe_delete();

  ServerCore& core_;
  StreamRegistry& registry_;
  std::atomic<uint64_t>& ids_;
  const std::string traceparent_;
  grpc::ByteBuffer in_;

  std::mutex mu_;
  std::deque<grpc::ByteBuffer> writes_;  // front() is being written
  bool writing_ = false;
  bool reads_done_ = false;
  bool finished_ = false;
  bool done_ = false;      // OnDone ran
  bool deleting_ = false;  // maybe_delete() has claimed the deletion
  bool gone_ = false;      // cancelled or a write failed
  int pending_ = 0;        // requests not yet answered
  grpc::Status final_status_ = grpc::Status::OK;
};

}  // namespace streamline::serve
