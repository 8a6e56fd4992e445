#include "serve/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "grpc_service.grpc.pb.h"
#include "serve/grpc_codec.h"

namespace streamline::serve {
namespace {

namespace pb = ::inference;

grpc::Status to_grpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(grpc_status_code(s)), s.message());
}

grpc::ServerUnaryReactor* finish(grpc::CallbackServerContext* ctx, const grpc::Status& s) {
  grpc::ServerUnaryReactor* r = ctx->DefaultReactor();
  r->Finish(s);
  return r;
}

grpc::ServerUnaryReactor* finish(grpc::CallbackServerContext* ctx, const Status& s) {
  return finish(ctx, to_grpc(s));
}

// Runs repository operations one at a time on its own thread: a load or an unload blocks for as
// long as the model takes to load or drain, which must not hold one of gRPC's callback threads.
class LifecycleWorker {
 public:
  ~LifecycleWorker() { stop(); }

  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    if (thread_.joinable()) return;
    stopping_ = false;
    thread_ = std::thread([this] { loop(); });
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // Runs what is queued, then joins.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!thread_.joinable()) return;
      stopping_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

// The GRPCInferenceService on gRPC's callback API: a handler decodes, hands the work to the core
// and returns; ModelInfer finishes its reactor from the runtime's response callback, so no gRPC
// thread waits while a request is queued or running.
class InferenceService final : public pb::GRPCInferenceService::CallbackService {
 public:
  InferenceService(ServerCore& core, LifecycleWorker& worker) : core_(core), worker_(worker) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* ctx, const pb::ServerLiveRequest*,
                                       pb::ServerLiveResponse* resp) override {
    resp->set_live(core_.live());
    return finish(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* ctx, const pb::ServerReadyRequest*,
                                        pb::ServerReadyResponse* resp) override {
    resp->set_ready(core_.ready());
    return finish(ctx, grpc::Status::OK);
  }

  // Unknown or unavailable models are not ready; that is an answer, not an error.
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* ctx, const pb::ModelReadyRequest* req,
                                       pb::ModelReadyResponse* resp) override {
    resp->set_ready(!core_.draining() && core_.repository().get(req->name(), req->version()).ok());
    return finish(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* ctx, const pb::ServerMetadataRequest*,
                                           pb::ServerMetadataResponse* resp) override {
    return finish(ctx, fill_server_metadata(core_.server_metadata_json(), resp));
  }

  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* ctx, const pb::ModelMetadataRequest* req,
                                          pb::ModelMetadataResponse* resp) override {
    auto m = core_.model_metadata(req->name(), req->version());
    if (!m.ok()) return finish(ctx, m.status());
    resp->set_name(m->name);
    for (const auto& v : m->versions) resp->add_versions(v);
    resp->set_platform(m->platform);
    auto add = [](const TensorMetadata& t, pb::ModelMetadataResponse::TensorMetadata* out) {
      out->set_name(t.name);
      out->set_datatype(t.datatype);
      for (int64_t d : t.shape) out->add_shape(d);
    };
    for (const auto& t : m->inputs) add(t, resp->add_inputs());
    for (const auto& t : m->outputs) add(t, resp->add_outputs());
    return finish(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* ctx, const pb::ModelInferRequest* req,
                                       pb::ModelInferResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    InferRequest request;
    request.id = next_id_.fetch_add(1, std::memory_order_relaxed);
    const Status decoded = decode_infer_request(*req, &request);
    if (!decoded.ok()) {
      reactor->Finish(to_grpc(decoded));
      return reactor;
    }
    // Outputs go back in the order asked for, else in the model's order; the response names the
    // version that served it.
    std::vector<std::string> order = request.requested_outputs;
    std::string version = req->model_version();
    {
      auto m = core_.repository().get(req->model_name(), req->model_version());
      if (m.ok()) {
        version = (*m)->version;
        if (order.empty())
          for (const auto& d : (*m)->serving->model().outputs()) order.push_back(d.name);
      }
    }
    resp->set_model_name(req->model_name());
    resp->set_model_version(version);
    resp->set_id(req->id());
    // From here the response belongs to the callback, which may run before infer() returns.
    core_.infer(req->model_name(), req->model_version(), std::move(request),
                [reactor, resp, order = std::move(order)](InferResponse r) {
                  if (!r.status.ok()) {
                    reactor->Finish(to_grpc(r.status));
                    return;
                  }
                  reactor->Finish(to_grpc(encode_infer_response(r, order, resp)));
                });
    return reactor;
  }

  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* ctx, const pb::ModelConfigRequest* req,
                                        pb::ModelConfigResponse* resp) override {
    auto m = core_.repository().get(req->name(), req->version());
    if (!m.ok()) return finish(ctx, m.status());
    fill_model_config((*m)->config, resp->mutable_config());
    return finish(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* ctx, const pb::ModelStatisticsRequest* req,
                                            pb::ModelStatisticsResponse* resp) override {
    if (!req->version().empty()) {
      auto m = core_.repository().get(req->name(), req->version());
      if (!m.ok()) return finish(ctx, m.status());
    }
    auto json = core_.statistics_json(req->name());
    if (!json.ok()) return finish(ctx, json.status());
    return finish(ctx, fill_statistics(*json, resp));
  }

  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* ctx, const pb::RepositoryIndexRequest* req,
                                            pb::RepositoryIndexResponse* resp) override {
    for (const auto& e : core_.repository().index()) {
      if (req->ready() && e.state != ModelState::kReady) continue;
      auto* m = resp->add_models();
      m->set_name(e.name);
      m->set_version(e.version);
      m->set_state(model_state_name(e.state));
      m->set_reason(e.reason);
    }
    return finish(ctx, grpc::Status::OK);
  }

  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* ctx,
                                                const pb::RepositoryModelLoadRequest* req,
                                                pb::RepositoryModelLoadResponse*) override {
    if (Status s = core_.check_model_control(); !s.ok()) return finish(ctx, s);
    if (req->model_name().empty()) return finish(ctx, invalid_argument("model_name is empty"));
    for (const auto& [key, value] : req->parameters())
      if (key == "config" || key.rfind("file:", 0) == 0)
        return finish(ctx, unsupported("load parameter '" + key + "' is not supported; edit the repository instead"));
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    worker_.post([this, reactor, name = req->model_name()] { reactor->Finish(to_grpc(core_.load_model(name))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* ctx,
                                                  const pb::RepositoryModelUnloadRequest* req,
                                                  pb::RepositoryModelUnloadResponse*) override {
    if (Status s = core_.check_model_control(); !s.ok()) return finish(ctx, s);
    if (req->model_name().empty()) return finish(ctx, invalid_argument("model_name is empty"));
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    worker_.post([this, reactor, name = req->model_name()] { reactor->Finish(to_grpc(core_.unload_model(name))); });
    return reactor;
  }

 private:
  ServerCore& core_;
  LifecycleWorker& worker_;
  std::atomic<uint64_t> next_id_{1};
};

std::string listen_address(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

struct GrpcServer::Impl {
  Impl(ServerCore& c, GrpcOptions o) : core(c), options(std::move(o)), service(c, worker) {}

  ServerCore& core;
  GrpcOptions options;
  LifecycleWorker worker;
  InferenceService service;  // outlives the server below
  std::unique_ptr<grpc::Server> server;
  std::atomic<int> port{0};
  std::mutex mu;  // start and stop
};

GrpcServer::GrpcServer(ServerCore& core, GrpcOptions options)
    : impl_(std::make_unique<Impl>(core, std::move(options))) {}

GrpcServer::~GrpcServer() {
  stop();
}

Status GrpcServer::start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->server) return ok_status();
  if (impl_->options.port < 0 || impl_->options.port > 65535)
    return invalid_argument("gRPC port " + std::to_string(impl_->options.port) + " is outside [0, 65535]");
  const std::string address = listen_address(impl_->options.host, impl_->options.port);
  grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &selected);
  builder.RegisterService(&impl_->service);
  const int64_t max_bytes = impl_->core.options().max_request_bytes;
  builder.SetMaxReceiveMessageSize(max_bytes <= 0 ? INT_MAX : static_cast<int>(std::min<int64_t>(max_bytes, INT_MAX)));
  builder.SetMaxSendMessageSize(-1);
  // Without this a second server on the same port would bind too (SO_REUSEPORT) and share traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl_->worker.start();
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || selected == 0) {
    if (impl_->server) impl_->server->Shutdown();
    impl_->server.reset();
    impl_->worker.stop();
    return unavailable("gRPC: cannot listen on " + address);
  }
  impl_->port = selected;
  return ok_status();
}

void GrpcServer::stop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->server) return;
  // Refuses new calls and returns once every started call has finished: infer calls finish when
  // the core answers them, loads and unloads when the worker has run them.
  impl_->server->Shutdown();
  impl_->server->Wait();
  impl_->worker.stop();
  impl_->server.reset();
}

int GrpcServer::port() const {
  return impl_->port.load();
}

}  // namespace streamline::serve
