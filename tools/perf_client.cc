#include "perf_client.h"

#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "grpc_service.grpc.pb.h"

namespace streamline::tools {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace pb = ::inference;
using tcp = asio::ip::tcp;

// Control calls (metadata) give up after this long; inference calls wait as long as they take.
constexpr auto kControlTimeout = std::chrono::seconds(10);

struct Endpoint {
  std::string host, port;
  std::string text() const { return host + ":" + port; }
};

Result<Endpoint> parse_url(std::string url, const std::string& default_port) {
  for (const char* scheme : {"http://", "grpc://"})
    if (url.rfind(scheme, 0) == 0) url = url.substr(std::string(scheme).size());
  if (const size_t slash = url.find('/'); slash != std::string::npos) url.resize(slash);
  if (url.empty()) return Endpoint{"localhost", default_port};
  Endpoint e;
  if (url.front() == '[') {  // [ipv6]:port
    const size_t close = url.find(']');
    if (close == std::string::npos) return invalid_argument("bad URL '" + url + "'");
    e.host = url.substr(1, close - 1);
    e.port = close + 1 < url.size() && url[close + 1] == ':' ? url.substr(close + 2) : default_port;
  } else if (const size_t colon = url.rfind(':'); colon != std::string::npos) {
    e.host = url.substr(0, colon);
    e.port = url.substr(colon + 1);
  } else {
    e.host = url;
    e.port = default_port;
  }
  if (e.host.empty() || e.port.empty() || e.port.find_first_not_of("0123456789") != std::string::npos)
    return invalid_argument("bad URL '" + url + "': expected host:port");
  if (e.port.size() > 5 || std::stoi(e.port) < 1 || std::stoi(e.port) > 65535)
    return invalid_argument("bad URL '" + url + "': port " + e.port + " is out of range: expected 1 to 65535");
  return e;
}

StatusCode code_from_http(int status) {
  switch (status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 404:
      return StatusCode::kNotFound;
    case 413:
    case 429:
      return StatusCode::kResourceExhausted;
    case 501:
      return StatusCode::kUnsupported;
    case 503:
      return StatusCode::kUnavailable;
    case 504:
      return StatusCode::kDeadlineExceeded;
    default:
      return StatusCode::kInternal;
  }
}

StatusCode code_from_grpc(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return StatusCode::kInvalidArgument;
    case grpc::StatusCode::NOT_FOUND:
      return StatusCode::kNotFound;
    case grpc::StatusCode::UNIMPLEMENTED:
      return StatusCode::kUnsupported;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return StatusCode::kResourceExhausted;
    case grpc::StatusCode::UNAVAILABLE:
      return StatusCode::kUnavailable;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return StatusCode::kDeadlineExceeded;
    case grpc::StatusCode::CANCELLED:
      return StatusCode::kCancelled;
    default:
      return StatusCode::kInternal;
  }
}

// The "error" member of a KServe error body, else the body itself.
std::string error_text(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  if (!doc.HasParseError() && doc.IsObject()) {
    auto it = doc.FindMember("error");
    if (it != doc.MemberEnd() && it->value.IsString()) return it->value.GetString();
  }
  return body.empty() ? "no message" : body;
}

Result<std::vector<RemoteTensor>> parse_tensors(const rapidjson::Value& doc, const char* key) {
  std::vector<RemoteTensor> out;
  auto it = doc.FindMember(key);
  if (it == doc.MemberEnd()) return out;
  if (!it->value.IsArray()) return internal_error(std::string("model metadata: '") + key + "' is not a list");
  for (const auto& t : it->value.GetArray()) {
    if (!t.IsObject() || !t.HasMember("name") || !t["name"].IsString() || !t.HasMember("datatype") ||
        !t["datatype"].IsString() || !t.HasMember("shape") || !t["shape"].IsArray())
      return internal_error(std::string("model metadata: malformed entry in '") + key + "'");
    RemoteTensor r{t["name"].GetString(), t["datatype"].GetString(), {}};
    for (const auto& d : t["shape"].GetArray()) {
      if (!d.IsInt64()) return internal_error("model metadata: tensor '" + r.name + "' has a non-integer dimension");
      r.shape.push_back(d.GetInt64());
    }
    out.push_back(std::move(r));
  }
  return out;
}

// ---- HTTP -------------------------------------------------------------------------------

// One kept-alive HTTP/1.1 connection, synchronous. Reconnects once when the server has closed it.
class HttpLink {
 public:
  explicit HttpLink(Endpoint e) : endpoint_(std::move(e)) {}

  Status connect() {
    beast::error_code ec;
    socket_.close(ec);
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(endpoint_.host, endpoint_.port, ec);
    if (ec) return unavailable("cannot resolve " + endpoint_.text() + ": " + ec.message());
    asio::connect(socket_, results, ec);
    if (ec) return unavailable("cannot connect to http://" + endpoint_.text() + ": " + ec.message());
    socket_.set_option(tcp::no_delay(true), ec);
    return ok_status();
  }

  // Sends `req` and reads the answer into `res`.
  Status round_trip(const http::request<http::string_body>& req, http::response<http::string_body>& res) {
    for (int attempt = 0;; ++attempt) {
      if (!socket_.is_open()) SL_RETURN_IF_ERROR(connect());
      beast::error_code ec;
      http::write(socket_, req, ec);
      if (!ec) {
        http::response_parser<http::string_body> parser;
        parser.body_limit(boost::none);
        buffer_.clear();
        http::read(socket_, buffer_, parser, ec);
        if (!ec) {
          res = parser.release();
          if (!res.keep_alive()) socket_.close(ec);
          return ok_status();
        }
      }
      socket_.close(ec);
      if (attempt > 0) return unavailable("HTTP request to " + endpoint_.text() + " failed: " + ec.message());
    }
  }

  Result<std::string> get(const std::string& target) {
    http::request<http::string_body> req{http::verb::get, target, 11};
    req.set(http::field::host, endpoint_.host);
    req.keep_alive(true);
    http::response<http::string_body> res;
    SL_RETURN_IF_ERROR(round_trip(req, res));
    if (res.result_int() != 200)
      return Status(code_from_http(static_cast<int>(res.result_int())), error_text(res.body()));
    return std::move(res.body());
  }

 private:
  Endpoint endpoint_;
  asio::io_context ioc_;
  tcp::socket socket_{ioc_};
  beast::flat_buffer buffer_;
};

class HttpConnection final : public PerfConnection {
 public:
  HttpConnection(Endpoint e, const http::request<http::string_body>& req) : link_(std::move(e)), req_(req) {}
  Status open() { return link_.connect(); }

  Status infer() override {
    SL_RETURN_IF_ERROR(link_.round_trip(req_, res_));
    const int status = static_cast<int>(res_.result_int());
    if (status == 200) return ok_status();
    // A binary response's error is still JSON; the header length is not needed to read it.
    return Status(code_from_http(status), error_text(res_.body()));
  }

 private:
  HttpLink link_;
  const http::request<http::string_body>& req_;
  http::response<http::string_body> res_;
};

class HttpClient final : public PerfClient {
 public:
  explicit HttpClient(Endpoint e) : endpoint_(std::move(e)), text_(endpoint_.text()), control_(endpoint_) {}

  const std::string& endpoint() const override { return text_; }

  Result<RemoteModel> metadata(const std::string& model) override {
    SL_ASSIGN_OR_RETURN(std::string body, control_.get("/v2/models/" + model));
    rapidjson::Document doc;
    doc.Parse(body.data(), body.size());
    if (doc.HasParseError() || !doc.IsObject()) return internal_error("model metadata is not a JSON object");
    RemoteModel m;
    m.name = doc.HasMember("name") && doc["name"].IsString() ? doc["name"].GetString() : model;
    if (doc.HasMember("versions") && doc["versions"].IsArray())
      for (const auto& v : doc["versions"].GetArray())
        if (v.IsString()) m.versions.emplace_back(v.GetString());
    SL_ASSIGN_OR_RETURN(m.inputs, parse_tensors(doc, "inputs"));
    SL_ASSIGN_OR_RETURN(m.outputs, parse_tensors(doc, "outputs"));
    return m;
  }

  Status prepare(const std::string& model, const std::vector<RemoteTensor>& inputs, const std::vector<Tensor>& values,
                 const std::vector<std::string>& outputs) override {
    // Binary tensor extension: a JSON header naming each input's byte count, then the bytes.
    rapidjson::StringBuffer sb;
    rapidjson::Writer<rapidjson::StringBuffer> w(sb);
    w.StartObject();
    w.Key("inputs");
    w.StartArray();
    for (size_t i = 0; i < inputs.size(); ++i) {
      w.StartObject();
      w.Key("name");
      w.String(inputs[i].name.c_str());
      w.Key("datatype");
      w.String(inputs[i].datatype.c_str());
      w.Key("shape");
      w.StartArray();
      for (int64_t d : inputs[i].shape) w.Int64(d);
      w.EndArray();
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(values[i].nbytes());
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
    w.Key("outputs");
    w.StartArray();
    for (const auto& o : outputs) {
      w.StartObject();
      w.Key("name");
      w.String(o.c_str());
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data");
      w.Bool(true);
      w.EndObject();
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    std::string body(sb.GetString(), sb.GetSize());
    const size_t header = body.size();
    for (const auto& v : values) body.append(static_cast<const char*>(v.raw()), v.nbytes());
    request_ = http::request<http::string_body>{http::verb::post, "/v2/models/" + model + "/infer", 11};
    request_.set(http::field::host, endpoint_.host);
    request_.set(http::field::content_type, "application/octet-stream");
    request_.set("Inference-Header-Content-Length", std::to_string(header));
    request_.keep_alive(true);
    request_.body() = std::move(body);
    request_.prepare_payload();
    return ok_status();
  }

  Result<std::unique_ptr<PerfConnection>> connect() override {
    auto c = std::make_unique<HttpConnection>(endpoint_, request_);
    SL_RETURN_IF_ERROR(c->open());
    return std::unique_ptr<PerfConnection>(std::move(c));
  }

 private:
  Endpoint endpoint_;
  std::string text_;
  HttpLink control_;
  http::request<http::string_body> request_;
};

// ---- gRPC -------------------------------------------------------------------------------

Status from_grpc(const grpc::Status& s) {
  if (s.ok()) return ok_status();
  return Status(code_from_grpc(s.error_code()), s.error_message());
}

class GrpcConnection final : public PerfConnection {
 public:
  GrpcConnection(const std::shared_ptr<grpc::Channel>& channel, const pb::ModelInferRequest& req)
      : stub_(pb::GRPCInferenceService::NewStub(channel)), req_(req) {}

  Status infer() override {
    grpc::ClientContext ctx;
    response_.Clear();
    return from_grpc(stub_->ModelInfer(&ctx, req_, &response_));
  }

 private:
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub_;
  const pb::ModelInferRequest& req_;
  pb::ModelInferResponse response_;
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
  }

  const std::string& endpoint() const override { return text_; }

  Result<RemoteModel> metadata(const std::string& model) override {
    auto stub = pb::GRPCInferenceService::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kControlTimeout);
    pb::ModelMetadataRequest req;
    req.set_name(model);
    pb::ModelMetadataResponse resp;
    const grpc::Status s = stub->ModelMetadata(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      return unavailable("cannot reach the gRPC server at " + text_ + ": " + s.error_message());
    SL_RETURN_IF_ERROR(from_grpc(s));
    RemoteModel m;
    m.name = resp.name();
    m.versions.assign(resp.versions().begin(), resp.versions().end());
    for (const auto& t : resp.inputs())
      m.inputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    for (const auto& t : resp.outputs())
      m.outputs.push_back({t.name(), t.datatype(), {t.shape().begin(), t.shape().end()}});
    return m;
  }

  Status prepare(const std::string& model, const std::vector<RemoteTensor>& inputs, const std::vector<Tensor>& values,
                 const std::vector<std::string>& outputs) override {
    request_.Clear();
    request_.set_model_name(model);
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto* in = request_.add_inputs();
      in->set_name(inputs[i].name);
      in->set_datatype(inputs[i].datatype);
      for (int64_t d : inputs[i].shape) in->add_shape(d);
      request_.add_raw_input_contents()->assign(static_cast<const char*>(values[i].raw()), values[i].nbytes());
    }
    for (const auto& o : outputs) request_.add_outputs()->set_name(o);
    return ok_status();
  }

  Result<std::unique_ptr<PerfConnection>> connect() override {
    return std::unique_ptr<PerfConnection>(std::make_unique<GrpcConnection>(channel_, request_));
  }

 private:
  std::string text_;
  std::shared_ptr<grpc::Channel> channel_;
  pb::ModelInferRequest request_;
};

}  // namespace

Result<std::unique_ptr<PerfClient>> PerfClient::create(const std::string& protocol, const std::string& url) {
  if (protocol == "http") {
    SL_ASSIGN_OR_RETURN(Endpoint e, parse_url(url, "8000"));
    return std::unique_ptr<PerfClient>(std::make_unique<HttpClient>(std::move(e)));
  }
  if (protocol == "grpc") {
    SL_ASSIGN_OR_RETURN(Endpoint e, parse_url(url, "8001"));
    return std::unique_ptr<PerfClient>(std::make_unique<GrpcClient>(std::move(e)));
  }
  return invalid_argument("protocol '" + protocol + "': expected http or grpc");
}

}  // namespace streamline::tools
