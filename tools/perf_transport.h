#pragma once
// What the HTTP and gRPC perf clients share (perf_client.cc): the endpoint, the mapping of each
// protocol's error codes to ours, and the factories PerfClient::create() picks from.

#include <grpcpp/support/status.h>

#include <chrono>
#include <memory>
#include <string>

#include "perf_client.h"

namespace streamline::tools {

using PerfClock = std::chrono::steady_clock;

struct Endpoint {
  std::string host, port;
  std::string text() const { return host + ":" + port; }
};

// "host:port", "http://host:port", "grpc://host", "[::1]:8001", "" -> the endpoint, with
// `default_port` where none is given. InvalidArgument naming the URL otherwise.
Result<Endpoint> parse_url(std::string url, const std::string& default_port);

StatusCode code_from_http(int status);
Status from_grpc(const grpc::Status& s);
// The "error" member of a KServe error body, else the body itself.
std::string error_text(const std::string& body);
// A model's metadata from its KServe JSON.
Result<RemoteModel> parse_metadata_json(const std::string& body, const std::string& model);

inline int64_t elapsed_ns(PerfClock::time_point from, PerfClock::time_point to) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count();
}

std::unique_ptr<PerfClient> make_http_client(Endpoint e);
std::unique_ptr<PerfClient> make_grpc_client(Endpoint e);

}  // namespace streamline::tools
