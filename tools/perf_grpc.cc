// `streamline perf` over gRPC: one channel; inference calls through the generic stub, so that
// marshalling the request and unmarshalling the response are ours to time (perf_analyzer's gRPC
// "send" and "receive"). A connection waits on its own completion queue (infer) or gets gRPC's
// callback (start); control calls use the generated stub.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>

#include "grpc_service.grpc.pb.h"
#include "perf_transport.h"

namespace streamline::tools {
namespace {

namespace pb = ::inference;

constexpr char kInferMethod[] = "/inference.GRPCInferenceService/ModelInfer";
// Control calls (metadata, statistics) give up after this long; inference calls wait as long as
// they take.
constexpr auto kControlTimeout = std::chrono::seconds(10);

// One call's buffers and times; lives until its completion has been handled.
struct GrpcCall {
  grpc::ClientContext ctx;
  grpc::ByteBuffer request, response;
  PerfClock::time_point t0, t_sent;
};

// Unmarshals the answer of `call` (when it succeeded) and fills `timing`.
Status finish_call(GrpcCall& call, const grpc::Status& rpc, RequestTiming* timing) {
  const PerfClock::time_point t_recv = PerfClock::now();
  Status s = from_grpc(rpc);
  if (s.ok()) {
    pb::ModelInferResponse response;
    const grpc::Status parsed =
        grpc::SerializationTraits<pb::ModelInferResponse>::Deserialize(&call.response, &response);
    if (!parsed.ok()) s = internal_error("cannot read the inference response: " + parsed.error_message());
  }
  const PerfClock::time_point end = PerfClock::now();
  timing->end = end;
  timing->latency_ns = elapsed_ns(call.t0, end);
  timing->send_ns = elapsed_ns(call.t0, call.t_sent);
  timing->recv_ns = elapsed_ns(t_recv, end);
  return s;
}

class GrpcConnection final : public PerfConnection {
 public:
  GrpcConnection(const std::shared_ptr<grpc::Channel>& channel, const std::vector<pb::ModelInferRequest>& requests)
      : stub_(channel), requests_(requests) {}

  ~GrpcConnection() override {
    cq_.Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  Status infer(size_t request, RequestTiming* timing) override {
    GrpcCall call;
    if (Status s = marshal(request, call); !s.ok()) return s;
    auto rpc = stub_.PrepareUnaryCall(&call.ctx, kInferMethod, call.request, &cq_);
    grpc::Status status;
    rpc->StartCall();
    rpc->Finish(&call.response, &status, &call);
    void* tag = nullptr;
    bool ok = false;
    if (!cq_.Next(&tag, &ok) || !ok) status = grpc::Status(grpc::StatusCode::INTERNAL, "the call did not complete");
    return finish_call(call, status, timing);
  }

  void start(size_t request, InferDone done) override {
    auto call = std::make_shared<GrpcCall>();
    if (Status s = marshal(request, *call); !s.ok()) {
      RequestTiming timing;
      timing.end = PerfClock::now();
      return done(s, timing);
    }
    stub_.UnaryCall(&call->ctx, kInferMethod, grpc::StubOptions(), &call->request, &call->response,
                    [call, done = std::move(done)](grpc::Status status) {
                      RequestTiming timing;
                      const Status s = finish_call(*call, status, &timing);
                      done(s, timing);
                    });
  }

 private:
  Status marshal(size_t request, GrpcCall& call) {
    call.t0 = PerfClock::now();
    bool own = false;
    const grpc::Status s =
        grpc::SerializationTraits<pb::ModelInferRequest>::Serialize(requests_[request], &call.request, &own);
    call.t_sent = PerfClock::now();
    if (!s.ok()) return internal_error("cannot marshal the inference request: " + s.error_message());
    return ok_status();
  }

  grpc::GenericStub stub_;
  const std::vector<pb::ModelInferRequest>& requests_;
  grpc::CompletionQueue cq_;  // infer() waits here
};

class GrpcClient final : public PerfClient {
 public:
  explicit GrpcClient(Endpoint e) : text_(e.text()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    const bool ipv6 = e.host.find(':') != std::string::npos;
    channel_ = grpc::CreateCustomChannel(ipv6 ? "[" + e.host + "]:" + e.port : text_,
                                         grpc::InsecureChannelCredentials(), args);
    control_ = pb::GRPCInferenceService::NewStub(channel_);
  }

  const std::string& endpoint() const override { return text_; }

  Result<RemoteModel> metadata(const std::string& model, const std::string& version) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kControlTimeout);
    pb::ModelMetadataRequest req;
    req.set_name(model);
    req.set_version(version);
    pb::ModelMetadataResponse resp;
    SL_RETURN_IF_ERROR(control_status(control_->ModelMetadata(&ctx, req, &resp)));
    RemoteModel m;
    m.name = resp.name();
    m.versions.assign(resp.versions().begin(), resp.versions().end());
    for (const auto& t : resp.inputs())
      m.inputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    for (const auto& t : resp.outputs())
      m.outputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    return m;
  }

  Result<ServerStats> statistics(const std::string& model, const std::string& version) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kControlTimeout);
    pb::ModelStatisticsRequest req;
    req.set_name(model);
    req.set_version(version);
    pb::ModelStatisticsResponse resp;
    SL_RETURN_IF_ERROR(control_status(control_->ModelStatistics(&ctx, req, &resp)));
    ServerStats s;
    bool found = false;
    auto add = [](const pb::StatisticDuration& d, StatDuration* out) {
      out->count += d.count();
      out->ns += d.ns();
    };
    for (const auto& m : resp.model_stats()) {
      if (m.name() != model || (!version.empty() && m.version() != version)) continue;
      found = true;
      s.inference_count += m.inference_count();
      s.execution_count += m.execution_count();
      add(m.inference_stats().success(), &s.success);
      add(m.inference_stats().queue(), &s.queue);
      add(m.inference_stats().compute_input(), &s.compute_input);
      add(m.inference_stats().compute_infer(), &s.compute_infer);
      add(m.inference_stats().compute_output(), &s.compute_output);
    }
    if (!found) return not_found("model statistics: no entry for model '" + model + "'");
    return s;
  }

  Status prepare(const std::string& model, const std::string& version, const std::vector<RequestInputs>& requests,
                 const std::vector<std::string>& outputs) override {
    requests_.clear();
    for (const RequestInputs& r : requests) {
      pb::ModelInferRequest& req = requests_.emplace_back();
      req.set_model_name(model);
      req.set_model_version(version);
      for (size_t i = 0; i < r.tensors.size(); ++i) {
        auto* in = req.add_inputs();
        in->set_name(r.tensors[i].name);
        in->set_datatype(r.tensors[i].datatype);
        for (int64_t d : r.tensors[i].shape) in->add_shape(d);
        req.add_raw_input_contents()->assign(static_cast<const char*>(r.values[i].raw()), r.values[i].nbytes());
      }
      for (const auto& o : outputs) req.add_outputs()->set_name(o);
    }
    return ok_status();
  }

  Result<std::unique_ptr<PerfConnection>> connect() override {
    return std::unique_ptr<PerfConnection>(std::make_unique<GrpcConnection>(channel_, requests_));
  }

  void run_async(int) override {}

 private:
  // A server out of reach is Unavailable naming the endpoint; other errors are the server's.
  Status control_status(const grpc::Status& s) const {
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      return unavailable("cannot reach the gRPC server at " + text_ + ": " + s.error_message());
    return from_grpc(s);
  }

  std::string text_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::GRPCInferenceService::Stub> control_;
  std::vector<pb::ModelInferRequest> requests_;
};

}  // namespace

std::unique_ptr<PerfClient> make_grpc_client(Endpoint e) {
  return std::make_unique<GrpcClient>(std::move(e));
}

}  // namespace streamline::tools
