#include "serve/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/logging.h"
#include "grpc_service.grpc.pb.h"
#include "serve/echo.h"
#include "serve/grpc_codec.h"
#include "serve/grpc_infer.h"
#include "serve/grpc_stream.h"
#include "serve/task_pool.h"

namespace streamline::serve {
namespace {

namespace pb = ::inference;
using Svc = pb::GRPCInferenceService;

// stop() holds new calls until none has come for this long...
constexpr auto kQuiet = std::chrono::milliseconds(100);
// ...or this long has passed,
constexpr auto kHoldLimit = std::chrono::seconds(2);
// and answers them this long after gRPC began to shut down (its GOAWAY is out by then).
constexpr auto kGoawayLead = std::chrono::milliseconds(100);
// Model loads and unloads waiting for the loader thread beyond which a call gets UNAVAILABLE.
constexpr size_t kMaxQueuedModelControl = 1024;

grpc::Status to_grpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(grpc_status_code(s)), cap_message(s.message()));
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Every method is registered raw (bytes in, bytes out) and parsed here: gRPC's callback API
// answers a request it cannot parse with UNIMPLEMENTED and no message, which tells a client
// nothing. A Call owns one request and its response; finish() serializes the response, finishes
// the RPC and deletes the Call.
template <typename Req, typename Resp>
struct Call {
  Call(grpc::CallbackServerContext* ctx, grpc::ByteBuffer* out) : reactor(ctx->DefaultReactor()), out(out) {}

  void finish(grpc::Status s) {
    if (s.ok()) {
      grpc::ByteBuffer bytes;
      bool own = false;
      s = grpc::SerializationTraits<Resp>::Serialize(response, &bytes, &own);
      if (s.ok()) out->Swap(&bytes);
    }
    reactor->Finish(s);
    delete this;
  }
  void finish(const Status& s) { finish(to_grpc(s)); }

  Req request;
  Resp response;
  grpc::ServerUnaryReactor* reactor;
  grpc::ByteBuffer* out;
};

// The GRPCInferenceService on gRPC's callback API: a handler decodes, hands the work to the core
// and returns; ModelInfer finishes from the runtime's response callback, so no gRPC thread waits
// while a request is queued or running.
// LogSettings: the request's settings applied over the current ones, then all of them answered.
Status apply_log_settings(const pb::LogSettingsRequest& req, pb::LogSettingsResponse* out) {
  streamline::LogSettings s = log_settings();
  for (const auto& entry : req.settings()) {
    // Named references, not a structured binding: clang before 16 cannot capture those.
    const std::string& key = entry.first;
    const auto& v = entry.second;
    using V = pb::LogSettingsRequest::SettingValue;
    const auto flag = [&](bool* to) -> Status {
      if (v.parameter_choice_case() != V::kBoolParam) {
        std::string m = "'";
        m += echo(key);
        m += "' must be a bool_param";
        return invalid_argument(m);
      }
      *to = v.bool_param();
      return ok_status();
    };
    if (key == "log_info") {
      SL_RETURN_IF_ERROR(flag(&s.info));
    } else if (key == "log_warning") {
      SL_RETURN_IF_ERROR(flag(&s.warning));
    } else if (key == "log_error") {
      SL_RETURN_IF_ERROR(flag(&s.error));
    } else if (key == "log_verbose_level") {
      if (v.parameter_choice_case() != V::kUint32Param)
        return invalid_argument("'log_verbose_level' must be a uint32_param");
      s.verbose = static_cast<int>(std::min<uint32_t>(v.uint32_param(), 1000000));
    } else if (key == "log_format" || key == "log_file") {
      if (v.parameter_choice_case() != V::kStringParam) return invalid_argument("'" + key + "' must be a string_param");
      (key == "log_format" ? s.format : s.file) = v.string_param();
    } else {
      return invalid_argument("unknown log setting '" + echo(key) + "'");
    }
  }
  SL_RETURN_IF_ERROR(set_log_settings(s));
  const streamline::LogSettings now = log_settings();
  auto& m = *out->mutable_settings();
  m["log_file"].set_string_param(now.file);
  m["log_info"].set_bool_param(now.info);
  m["log_warning"].set_bool_param(now.warning);
  m["log_error"].set_bool_param(now.error);
  m["log_verbose_level"].set_uint32_param(static_cast<uint32_t>(now.verbose));
  m["log_format"].set_string_param(now.format);
  return ok_status();
}

// Every RPC registered raw, innermost first.
using RawBase = Svc::WithRawCallbackMethod_TraceSetting<Svc::WithRawCallbackMethod_LogSettings<
    Svc::WithRawCallbackMethod_CudaSharedMemoryUnregister<Svc::WithRawCallbackMethod_CudaSharedMemoryRegister<
        Svc::WithRawCallbackMethod_CudaSharedMemoryStatus<Svc::WithRawCallbackMethod_SystemSharedMemoryUnregister<
            Svc::WithRawCallbackMethod_SystemSharedMemoryRegister<
                Svc::WithRawCallbackMethod_SystemSharedMemoryStatus<Svc::Service>>>>>>>>;
using RawService =
    Svc::WithRawCallbackMethod_ServerLive<Svc::WithRawCallbackMethod_ServerReady<Svc::WithRawCallbackMethod_ModelReady<
        Svc::WithRawCallbackMethod_ServerMetadata<Svc::WithRawCallbackMethod_ModelMetadata<
            Svc::WithRawCallbackMethod_ModelInfer<Svc::WithRawCallbackMethod_ModelStreamInfer<
                Svc::WithRawCallbackMethod_ModelConfig<Svc::WithRawCallbackMethod_ModelStatistics<
                    Svc::WithRawCallbackMethod_RepositoryIndex<Svc::WithRawCallbackMethod_RepositoryModelLoad<
                        Svc::WithRawCallbackMethod_RepositoryModelUnload<RawBase>>>>>>>>>>>>;

class InferenceService final : public RawService {
 public:
  using Ctx = grpc::CallbackServerContext;
  using Bytes = grpc::ByteBuffer;

  explicit InferenceService(ServerCore& core) : core_(core) {}

  void start() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = released_ = false;
    loader_ = std::make_unique<TaskPool>(
        TaskPoolOptions{.threads = 1, .max_queued = kMaxQueuedModelControl, .name = "sl-grpc-load"});
  }
  // From now on new calls wait (stop() phase 1).
  void hold() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = true;
  }
  // Answers the held calls and every later one UNAVAILABLE; open streams end (UNAVAILABLE) once
  // the requests they have read are answered.
  void release() {
    std::vector<std::function<void()>> held;
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
      held.swap(held_);
    }
    for (auto& refuse : held) refuse();
    streams_.close_all();
  }
  void stop_loader() {
    if (loader_) loader_->stop();
  }
  int64_t last_call_ns() const { return last_call_ns_.load(); }

  grpc::ServerUnaryReactor* ServerLive(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::ServerLiveRequest, pb::ServerLiveResponse>(ctx, in, out, [this](auto& c) {
      c.response.set_live(core_.live());
      c.finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* ServerReady(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::ServerReadyRequest, pb::ServerReadyResponse>(ctx, in, out, [this](auto& c) {
      c.response.set_ready(core_.ready());
      c.finish(grpc::Status::OK);
    });
  }

  // Unknown or unavailable models are not ready; that is an answer, not an error.
  grpc::ServerUnaryReactor* ModelReady(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::ModelReadyRequest, pb::ModelReadyResponse>(ctx, in, out, [this](auto& c) {
      c.response.set_ready(!core_.draining() && core_.repository().get(c.request.name(), c.request.version()).ok());
      c.finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* ServerMetadata(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::ServerMetadataRequest, pb::ServerMetadataResponse>(ctx, in, out, [this](auto& c) {
      const auto m = core_.server_metadata();
      c.response.set_name(m.name);
      c.response.set_version(m.version);
      for (const std::string& e : m.extensions) c.response.add_extensions(e);
      c.finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* ModelMetadata(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::ModelMetadataRequest, pb::ModelMetadataResponse>(ctx, in, out, [this](auto& c) {
      auto m = core_.model_metadata(c.request.name(), c.request.version());
      if (!m.ok()) return c.finish(m.status());
      pb::ModelMetadataResponse& resp = c.response;
      resp.set_name(m->name);
      for (const auto& v : m->versions) resp.add_versions(v);
      resp.set_platform(m->platform);
      auto add = [](const TensorMetadata& t, pb::ModelMetadataResponse::TensorMetadata* to) {
        to->set_name(t.name);
        to->set_datatype(t.datatype);
        for (int64_t d : t.shape) to->add_shape(d);
      };
      for (const auto& t : m->inputs) add(t, resp.add_inputs());
      for (const auto& t : m->outputs) add(t, resp.add_outputs());
      c.finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* ModelInfer(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::ModelInferRequest, pb::ModelInferResponse>(ctx, in, out, [this, ctx](auto& c) { infer(c, ctx); });
  }

  // Requests of one stream run concurrently; each error is a message of the stream, which stays
  // open (grpc_stream.h).
  grpc::ServerBidiReactor<Bytes, Bytes>* ModelStreamInfer(Ctx* ctx) override {
    last_call_ns_.store(steady_ns());
    return new StreamReactor(core_, streams_, next_id_, traceparent_of(ctx));
  }

  grpc::ServerUnaryReactor* ModelConfig(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::ModelConfigRequest, pb::ModelConfigResponse>(ctx, in, out, [this](auto& c) {
      auto m = core_.repository().get(c.request.name(), c.request.version());
      if (!m.ok()) return c.finish(m.status());
      fill_model_config((*m)->config, c.response.mutable_config());
      c.finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* ModelStatistics(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::ModelStatisticsRequest, pb::ModelStatisticsResponse>(ctx, in, out, [this](auto& c) {
      auto stats = core_.statistics(c.request.name(), c.request.version());
      if (!stats.ok()) return c.finish(stats.status());
      fill_statistics(*stats, &c.response);
      c.finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* RepositoryIndex(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::RepositoryIndexRequest, pb::RepositoryIndexResponse>(ctx, in, out, [this](auto& c) {
      for (const auto& e : core_.repository().full_index()) {
        if (c.request.ready() && e.state != ModelState::kReady) continue;
        auto* m = c.response.add_models();
        m->set_name(valid_utf8(e.name));
        m->set_version(e.version);
        m->set_state(model_state_name(e.state));
        m->set_reason(valid_utf8(e.reason));
      }
      c.finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* RepositoryModelLoad(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::RepositoryModelLoadRequest, pb::RepositoryModelLoadResponse>(ctx, in, out, [this](auto& c) {
      if (Status s = core_.check_model_control(); !s.ok()) return c.finish(s);
      if (c.request.model_name().empty()) return c.finish(invalid_argument("model_name is empty"));
      LoadOptions options;
      for (const auto& [key, value] : c.request.parameters()) {
        if (key == "config") {
          if (value.parameter_choice_case() != pb::ModelRepositoryParameter::kStringParam)
            return c.finish(invalid_argument("load parameter 'config' must be a string_param holding the JSON config"));
          options.config_json = value.string_param();
        } else if (key.rfind("file:", 0) == 0) {
          return c.finish(
              unsupported("load parameter '" + echo(key) +
                          "': model files cannot be sent with the request here; put them in the repository"));
        }
      }
      control(c, [this, name = c.request.model_name(), options] { return core_.load_model(name, options); });
    });
  }

  grpc::ServerUnaryReactor* RepositoryModelUnload(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::RepositoryModelUnloadRequest, pb::RepositoryModelUnloadResponse>(ctx, in, out, [this](auto& c) {
      if (Status s = core_.check_model_control(); !s.ok()) return c.finish(s);
      if (c.request.model_name().empty()) return c.finish(invalid_argument("model_name is empty"));
      control(c, [this, name = c.request.model_name()] { return core_.unload_model(name); });
    });
  }

  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::SystemSharedMemoryStatusRequest, pb::SystemSharedMemoryStatusResponse>(
        ctx, in, out, [this](auto& c) {
          auto st = core_.shared_memory().system_status(c.request.name());
          if (!st.ok()) return c.finish(st.status());
          for (const SystemRegionInfo& r : *st) {
            auto& m = (*c.response.mutable_regions())[r.name];
            m.set_name(r.name);
            m.set_key(r.key);
            m.set_offset(r.offset);
            m.set_byte_size(r.byte_size);
          }
          c.finish(grpc::Status::OK);
        });
  }

  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::SystemSharedMemoryRegisterRequest, pb::SystemSharedMemoryRegisterResponse>(
        ctx, in, out, [this](auto& c) {
          const auto& r = c.request;
          c.finish(core_.shared_memory().register_system(r.name(), r.key(), r.offset(), r.byte_size()));
        });
  }

  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::SystemSharedMemoryUnregisterRequest, pb::SystemSharedMemoryUnregisterResponse>(
        ctx, in, out, [this](auto& c) { c.finish(core_.shared_memory().unregister_system(c.request.name())); });
  }

  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::CudaSharedMemoryStatusRequest, pb::CudaSharedMemoryStatusResponse>(ctx, in, out, [this](auto& c) {
      auto st = core_.shared_memory().cuda_status(c.request.name());
      if (!st.ok()) return c.finish(st.status());
      for (const CudaRegionInfo& r : *st) {
        auto& m = (*c.response.mutable_regions())[r.name];
        m.set_name(r.name);
        m.set_device_id(static_cast<uint64_t>(r.device_id));
        m.set_byte_size(r.byte_size);
      }
      c.finish(grpc::Status::OK);
    });
  }

  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::CudaSharedMemoryRegisterRequest, pb::CudaSharedMemoryRegisterResponse>(
        ctx, in, out, [this](auto& c) {
          const auto& r = c.request;
          c.finish(core_.shared_memory().register_cuda(r.name(), r.raw_handle(), r.device_id(), r.byte_size()));
        });
  }

  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::CudaSharedMemoryUnregisterRequest, pb::CudaSharedMemoryUnregisterResponse>(
        ctx, in, out, [this](auto& c) { c.finish(core_.shared_memory().unregister_cuda(c.request.name())); });
  }

  // Triton's trace settings (trace.h): an empty value list clears a model's setting.
  grpc::ServerUnaryReactor* TraceSetting(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::TraceSettingRequest, pb::TraceSettingResponse>(ctx, in, out, [this](auto& c) {
      const std::string& model = c.request.model_name();
      if (!model.empty()) {
        bool known = false;
        for (const RepositoryEntry& e : core_.repository().full_index()) known = known || e.name == model;
        if (!known) return c.finish(not_found("unknown model '" + echo(model) + "'"));
      }
      std::map<std::string, std::optional<std::vector<std::string>>> changes;
      for (const auto& [key, v] : c.request.settings()) {
        if (v.value_size() == 0)
          changes[key] = std::nullopt;
        else
          changes[key] = std::vector<std::string>(v.value().begin(), v.value().end());
      }
      if (Status s = core_.traces().update(model, changes); !s.ok()) return c.finish(s);
      for (const auto& [key, values] : core_.traces().settings(model)) {
        auto& to = (*c.response.mutable_settings())[key];
        for (const auto& v : values) to.add_value(v);
      }
      c.finish(grpc::Status::OK);
    });
  }

  // Triton's log settings: log_file, log_info, log_warning, log_error, log_verbose_level,
  // log_format; the settings given change, the answer holds them all.
  grpc::ServerUnaryReactor* LogSettings(Ctx* ctx, const Bytes* in, Bytes* out) override {
    return run<pb::LogSettingsRequest, pb::LogSettingsResponse>(
        ctx, in, out, [](auto& c) { c.finish(apply_log_settings(c.request, &c.response)); });
  }

 private:
  // Parses the request, then hands the call to `handler` (which finishes it, now or later), holds
  // it (stopping), or refuses it.
  template <typename Req, typename Resp, typename Handler>
  grpc::ServerUnaryReactor* run(Ctx* ctx, const Bytes* in, Bytes* out, Handler handler) {
    auto* call = new Call<Req, Resp>(ctx, out);
    grpc::ServerUnaryReactor* reactor = call->reactor;
    last_call_ns_.store(steady_ns());
    if (Status parsed = parse_message(*in, &call->request); !parsed.ok()) {
      call->finish(parsed);
      return reactor;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (released_) {
        call->finish(unavailable("server is shutting down"));
        return reactor;
      }
      if (holding_) {
        held_.push_back([call] { call->finish(unavailable("server is shutting down")); });
        return reactor;
      }
    }
    handler(*call);
    return reactor;
  }

  static std::string traceparent_of(Ctx* ctx) {
    const auto& md = ctx->client_metadata();
    auto it = md.find("traceparent");
    return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
  }

  void infer(Call<pb::ModelInferRequest, pb::ModelInferResponse>& c, Ctx* ctx) {
    // From here the call belongs to the callback, which may run before grpc_infer() returns.
    auto* call = &c;
    // A traced call's span goes back in the initial metadata, sent with the answer (on_trace runs
    // before the request is queued, so before any finish()).
    auto on_trace = [ctx](const std::string& tp) { ctx->AddInitialMetadata("traceparent", tp); };
    grpc_infer(core_, c.request, next_id_.fetch_add(1, std::memory_order_relaxed),
               {.streaming = false, .traceparent = traceparent_of(ctx), .on_trace = on_trace, .stopped = nullptr},
               [call](const Status& s, pb::ModelInferResponse r, bool last) {
                 (void)last;  // unary: exactly one call
                 if (!s.ok()) return call->finish(s);
                 call->response = std::move(r);
                 call->finish(grpc::Status::OK);
               });
  }

  // A load or an unload blocks for as long as the model takes to load or drain, which must not
  // hold one of gRPC's callback threads: the loader thread runs them one at a time.
  template <typename C, typename Op>
  void control(C& c, Op op) {
    auto* call = &c;
    if (!loader_->try_post([call, op] { call->finish(op()); }))
      call->finish(unavailable("too many model loads and unloads waiting (" + std::to_string(kMaxQueuedModelControl) +
                               "); retry later"));
  }

 private:
  ServerCore& core_;
  std::unique_ptr<TaskPool> loader_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int64_t> last_call_ns_{0};
  StreamRegistry streams_;
  std::mutex mu_;
  bool holding_ = false, released_ = false;
  std::vector<std::function<void()>> held_;
};

std::string listen_address(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

struct GrpcServer::Impl {
  Impl(ServerCore& c, GrpcOptions o) : core(c), options(std::move(o)), service(c) {}

  ServerCore& core;
  GrpcOptions options;
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
  impl_->service.start();
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || selected == 0) {
    if (impl_->server) impl_->server->Shutdown();
    impl_->server.reset();
    impl_->service.stop_loader();
    return unavailable("gRPC: cannot listen on " + address);
  }
  impl_->port = selected;
  return ok_status();
}

void GrpcServer::stop() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->server) return;
  InferenceService& service = impl_->service;
  // 1. New calls wait until the clients are quiet: a client waiting for its answer sends nothing.
  // gRPC cancels (CANCELLED) every call that reaches a server already shutting down, so none may
  // be on its way when Shutdown() begins.
  service.hold();
  const auto hold_start = std::chrono::steady_clock::now();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const auto last = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(service.last_call_ns()));
    if (now - last >= kQuiet || now - hold_start >= kHoldLimit) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // 2. Shutdown() sends GOAWAY and returns once every started call has finished: infer calls when
  // the core answers them, loads and unloads when the loader has run them, held calls when (3)
  // refuses them, after the GOAWAY, so that a client's next call goes to a new connection
  // (refused: UNAVAILABLE) instead of this one.
  std::thread shutdown([this] { impl_->server->Shutdown(); });
  std::this_thread::sleep_for(kGoawayLead);
  service.release();
  shutdown.join();
  impl_->server->Wait();
  service.stop_loader();
  impl_->server.reset();
}

int GrpcServer::port() const {
  return impl_->port.load();
}

}  // namespace streamline::serve
