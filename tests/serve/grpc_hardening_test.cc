// The gRPC front end under hostile input and at shutdown: an undecodable message gets
// INVALID_ARGUMENT with a message, errors stay short whatever the client sent, and calls racing a
// stopping server are answered UNAVAILABLE, never CANCELLED.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "grpc_service.grpc.pb.h"
#include "serve/grpc_server.h"
#include "serve/repository.h"
#include "serve/server_core.h"
#include "serve_test_util.h"

namespace streamline::serve {
namespace {

namespace pb = ::inference;
using namespace std::chrono_literals;

struct Fixture {
  Fixture() {
    dir.write("mm/1/model.onnx", testing::matmul_relu_onnx());
    dir.write("mm/config.pbtxt", "max_batch_size: 8\n");
    repo = std::make_unique<Repository>(dir.path(), RepositoryOptions{});
    EXPECT_TRUE(repo->load_all().ok());
    core = std::make_unique<ServerCore>(*repo, ServerOptions{});
    grpc = std::make_unique<GrpcServer>(*core, GrpcOptions{.host = "127.0.0.1", .port = 0});
    const Status s = grpc->start();
    EXPECT_TRUE(s.ok()) << s.to_string();
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc->port()), grpc::InsecureChannelCredentials());
  }
  ~Fixture() {
    grpc.reset();
    core.reset();
    repo.reset();
  }
  std::unique_ptr<pb::GRPCInferenceService::Stub> stub() const { return pb::GRPCInferenceService::NewStub(channel); }

  testing::TempRepo dir;
  std::unique_ptr<Repository> repo;
  std::unique_ptr<ServerCore> core;
  std::unique_ptr<GrpcServer> grpc;
  std::shared_ptr<grpc::Channel> channel;
};

pb::ModelInferRequest one_row() {
  pb::ModelInferRequest req;
  req.set_model_name("mm");
  auto* in = req.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(testing::kIn);
  req.add_raw_input_contents()->assign(sizeof(float) * testing::kIn, '\0');
  return req;
}

// Sends `bytes` as the request message of `method` and returns the status.
grpc::Status raw_call(grpc::Channel& channel, const std::string& method, const std::string& bytes) {
  grpc::GenericStub stub(channel.shared_from_this());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  grpc::CompletionQueue cq;
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  return status;
}

TEST(GrpcHardeningTest, AnUndecodableMessageIsAnInvalidArgumentWithAMessage) {
  Fixture f;
  for (const char* method : {"/inference.GRPCInferenceService/ModelInfer", "/inference.GRPCInferenceService/ServerLive",
                             "/inference.GRPCInferenceService/RepositoryModelLoad"}) {
    const grpc::Status s = raw_call(*f.channel, method, "\xff\xff\xff\xff\xff");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << s.error_message();
    EXPECT_NE(s.error_message().find("is not a valid inference."), std::string::npos) << s.error_message();
  }
  // A well-formed message still works through the same path.
  pb::ModelInferResponse resp;
  grpc::ClientContext ctx;
  const grpc::Status ok = f.stub()->ModelInfer(&ctx, one_row(), &resp);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(resp.raw_output_contents_size(), 2);
}

TEST(GrpcHardeningTest, ErrorsStayShortWhateverTheRequestHolds) {
  Fixture f;
  pb::ModelInferRequest huge_shape = one_row();
  for (int i = 0; i < 100000; ++i) huge_shape.mutable_inputs(0)->add_shape(1);
  pb::ModelInferResponse resp;
  grpc::ClientContext c1;
  grpc::Status s = f.stub()->ModelInfer(&c1, huge_shape, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(s.error_message().size(), 200u) << s.error_message().substr(0, 300);
  EXPECT_NE(s.error_message().find("rank 100002 is above 32"), std::string::npos) << s.error_message();

  pb::ModelInferRequest long_name = one_row();
  long_name.mutable_inputs(0)->set_name(std::string(100000, 'n'));
  grpc::ClientContext c2;
  s = f.stub()->ModelInfer(&c2, long_name, &resp);
  EXPECT_NE(s.error_code(), grpc::StatusCode::OK);
  EXPECT_LT(s.error_message().size(), 5000u);

  pb::ModelInferRequest unknown = one_row();
  unknown.set_model_name(std::string(100000, 'm'));
  grpc::ClientContext c3;
  s = f.stub()->ModelInfer(&c3, unknown, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LT(s.error_message().size(), 5000u);
  EXPECT_NE(s.error_message().find("more)"), std::string::npos) << s.error_message().substr(0, 300);
}

TEST(GrpcHardeningTest, CallsRacingAStopAreUnavailableNeverCancelled) {
  Fixture f;
  std::atomic<bool> done{false};
  std::mutex mu;
  std::map<grpc::StatusCode, int> codes;
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&] {
      auto stub = f.stub();
      const pb::ModelInferRequest req = one_row();
      while (!done) {
        pb::ModelInferResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + 20s);
        const grpc::Status s = stub->ModelInfer(&ctx, req, &resp);
        ++answered;
        std::lock_guard<std::mutex> lock(mu);
        ++codes[s.error_code()];
      }
    });
  while (answered < 200) std::this_thread::yield();  // the clients are going
  EXPECT_TRUE(f.core->drain(5s));
  f.grpc->stop();
  done = true;
  for (std::thread& t : clients) t.join();
  std::string summary;
  for (const auto& [code, n] : codes) summary += std::to_string(code) + ":" + std::to_string(n) + " ";
  EXPECT_EQ(codes.count(grpc::StatusCode::CANCELLED), 0u) << summary;
  for (const auto& [code, n] : codes)
    EXPECT_TRUE(code == grpc::StatusCode::OK || code == grpc::StatusCode::UNAVAILABLE) << summary;
  EXPECT_GT(codes[grpc::StatusCode::OK], 0) << summary;
  EXPECT_GT(codes[grpc::StatusCode::UNAVAILABLE], 0) << summary;
}

}  // namespace
}  // namespace streamline::serve
