// ServingModel end to end on tiny graphs built in the test: batched outputs equal unbatched
// ones, refusals are explicit, and every request gets exactly one response under concurrency.

#include "streamline/serving.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "graph/ir.h"

namespace streamline {
namespace {

using graph::Dim;
using graph::DimList;
using namespace std::chrono_literals;

constexpr int kIn = 4, kOut = 3;

Tensor random_tensor(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::empty(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// x[N,4] -> h = x @ W -> y = Relu(h); outputs h and y.
std::shared_ptr<Model> matmul_relu_model() {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto x = g.add_value("x", DType::kFloat32, DimList{Dim::sym("N"), kIn});
  g.add_input(x);
  const auto w = g.add_constant("W", random_tensor(Shape{kIn, kOut}, 7));
  const auto h = g.add_value("h", DType::kFloat32);
  const auto y = g.add_value("y", DType::kFloat32);
  g.add_node("MatMul", "matmul", {x, w}, {h});
  g.add_node("Relu", "relu", {h}, {y});
  g.add_output(h);
  g.add_output(y);
  auto m = Model::from_graph(std::move(g));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

// x[N,S] -> Relu; S free, so requests of different S must not share a batch.
std::shared_ptr<Model> relu_model(Dim first) {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto x = g.add_value("x", DType::kFloat32, DimList{first, Dim::sym("S")});
  g.add_input(x);
  const auto y = g.add_value("y", DType::kFloat32);
  g.add_node("Relu", "relu", {x}, {y});
  g.add_output(y);
  auto m = Model::from_graph(std::move(g));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

constexpr int kTableRows = 8, kTableCols = 3;

// idx[N,2] int64 from the request -> y = Gather(table, idx) [N,2,3], table[r][c] = 10 r + c. An
// index outside [-8, 8) fails the run: a value-level error that only the request's data causes.
std::shared_ptr<Model> gather_model() {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto idx = g.add_value("idx", DType::kInt64, DimList{Dim::sym("N"), 2});
  g.add_input(idx);
  std::vector<float> table;
  for (int r = 0; r < kTableRows; ++r)
    for (int c = 0; c < kTableCols; ++c) table.push_back(static_cast<float>(10 * r + c));
  const auto t = g.add_constant("table", Tensor::from_vector<float>(Shape{kTableRows, kTableCols}, table));
  const auto y = g.add_value("y", DType::kFloat32);
  g.add_node("Gather", "gather", {t, idx}, {y});
  g.add_output(y);
  auto m = Model::from_graph(std::move(g));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

InferRequest request(uint64_t id, Tensor x) {
  InferRequest r;
  r.id = id;
  r.inputs["x"] = std::move(x);
  return r;
}

void expect_near(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f) << i;
}

ServingOptions options(int instances, int max_batch, int64_t delay_us, const Clock* clock = nullptr) {
  ServingOptions o;
  o.instances = instances;
  o.threads_per_instance = 1;
  o.batching.max_batch_size = max_batch;
  o.batching.max_queue_delay_us = delay_us;
  if (clock) o.clock = clock;
  return o;
}

TEST(Serving, BatchedOutputsEqualUnbatched) {
  auto model = matmul_relu_model();
  ASSERT_TRUE(model);
  FakeClock clock;  // never moves: only a full batch launches
  auto served = ServingModel::create(model, options(1, 8, 1000, &clock));
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  EXPECT_EQ((*served)->planned_batch_sizes(), (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  Session session(model);
  std::vector<Tensor> xs;
  std::vector<std::future<InferResponse>> fs;
  const int rows[] = {1, 2, 1, 3, 1};  // 8 rows in all
  for (int i = 0; i < 5; ++i) {
    xs.push_back(random_tensor(Shape{rows[i], kIn}, 100 + static_cast<uint32_t>(i)));
    fs.push_back((*served)->submit(request(static_cast<uint64_t>(i), xs.back())));
  }
  for (int i = 0; i < 5; ++i) {
    InferResponse r = fs[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(r.id, static_cast<uint64_t>(i));
    EXPECT_EQ(r.batch_size, 8);
    auto ref = session.run({xs[static_cast<size_t>(i)]});
    ASSERT_TRUE(ref.ok());
    ASSERT_EQ(r.outputs.size(), 2u);
    expect_near(r.outputs.at("h"), (*ref)[0]);
    expect_near(r.outputs.at("y"), (*ref)[1]);
  }
  const ServingStats s = (*served)->stats();
  EXPECT_EQ(s.batch_size_hist, (std::map<int, uint64_t>{{8, 1}}));
  EXPECT_EQ(s.succeeded, 5u);
}

TEST(Serving, RequestedOutputsOnly) {
  auto served = ServingModel::create(matmul_relu_model(), options(1, 1, 0));
  ASSERT_TRUE(served.ok());
  InferRequest r = request(1, random_tensor(Shape{2, kIn}, 1));
  r.requested_outputs = {"y"};
  InferResponse resp = (*served)->infer(r);
  ASSERT_TRUE(resp.status.ok());
  ASSERT_EQ(resp.outputs.size(), 1u);
  EXPECT_EQ(resp.outputs.at("y").shape(), (Shape{2, kOut}));
  for (int64_t i = 0; i < resp.outputs.at("y").numel(); ++i) EXPECT_GE(resp.outputs.at("y").data<float>()[i], 0.f);
  EXPECT_EQ(resp.batch_size, 2);  // batching off: a request runs at its own batch size
}

TEST(Serving, InvalidRequestsAreRefused) {
  auto served = ServingModel::create(matmul_relu_model(), options(1, 4, 0));
  ASSERT_TRUE(served.ok());
  ServingModel& m = **served;
  auto code = [&](InferRequest r) { return m.infer(std::move(r)).status.code(); };
  EXPECT_EQ(code(InferRequest{}), StatusCode::kInvalidArgument);  // missing input
  InferRequest extra = request(1, random_tensor(Shape{1, kIn}, 1));
  extra.inputs["z"] = random_tensor(Shape{1}, 1);
  EXPECT_EQ(code(extra), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(request(2, Tensor::empty(DType::kInt64, Shape{1, kIn}))), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(request(3, random_tensor(Shape{1, kIn + 1}, 1))), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(request(4, random_tensor(Shape{5, kIn}, 1))), StatusCode::kInvalidArgument);  // > max batch
  EXPECT_EQ(code(request(5, random_tensor(Shape{kIn}, 1))), StatusCode::kInvalidArgument);     // rank
  InferRequest bad_out = request(6, random_tensor(Shape{1, kIn}, 1));
  bad_out.requested_outputs = {"nope"};
  EXPECT_EQ(code(bad_out), StatusCode::kInvalidArgument);
  InferRequest neg = request(7, random_tensor(Shape{1, kIn}, 1));
  neg.timeout_us = -5;
  EXPECT_EQ(code(neg), StatusCode::kInvalidArgument);
  EXPECT_TRUE(m.infer(request(8, random_tensor(Shape{1, kIn}, 1))).status.ok());
  const ServingStats s = m.stats();
  EXPECT_EQ(s.failures.at(StatusCode::kInvalidArgument), 8u);
  EXPECT_EQ(s.accepted, 1u);
  EXPECT_EQ(s.succeeded, 1u);
}

// Two requests with out-of-range indices share one full batch with two good ones: the good ones
// get their rows, each bad one its own error (naming its own index, never the other's).
TEST(Serving, ABadRequestFailsAloneInItsBatch) {
  auto model = gather_model();
  ASSERT_TRUE(model);
  FakeClock clock;  // never moves: only the full batch of 4 launches
  auto served = ServingModel::create(model, options(1, 4, 1'000'000, &clock));
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  const std::vector<std::vector<int64_t>> idx = {{1, 2}, {101, 0}, {3, -1}, {0, 103}};
  std::vector<std::future<InferResponse>> fs;
  for (size_t i = 0; i < idx.size(); ++i) {
    InferRequest r;
    r.id = i;
    r.inputs["idx"] = Tensor::from_vector<int64_t>(Shape{1, 2}, idx[i]);
    fs.push_back((*served)->submit(std::move(r)));
  }
  std::vector<InferResponse> rs;
  for (auto& f : fs) rs.push_back(f.get());
  for (size_t i : {0, 2}) {
    ASSERT_TRUE(rs[i].status.ok()) << i << ": " << rs[i].status.to_string();
    const Tensor& y = rs[i].outputs.at("y");
    ASSERT_EQ(y.shape(), (Shape{1, 2, kTableCols}));
    for (int k = 0; k < 2; ++k) {
      const int64_t row = (idx[i][static_cast<size_t>(k)] + kTableRows) % kTableRows;
      for (int c = 0; c < kTableCols; ++c)
        EXPECT_EQ(y.data<float>()[k * kTableCols + c], static_cast<float>(10 * row + c)) << i;
    }
  }
  const std::pair<size_t, std::string> bad[] = {{1, "101"}, {3, "103"}};
  for (const auto& [i, own] : bad) {
    const std::string other = own == "101" ? "103" : "101";
    EXPECT_EQ(rs[i].status.code(), StatusCode::kInvalidArgument) << rs[i].status.to_string();
    EXPECT_NE(rs[i].status.message().find(own), std::string::npos) << rs[i].status.message();
    EXPECT_EQ(rs[i].status.message().find(other), std::string::npos) << rs[i].status.message();
    EXPECT_TRUE(rs[i].outputs.empty());
  }
  const ServingStats s = (*served)->stats();
  EXPECT_EQ(s.succeeded, 2u);
  EXPECT_EQ(s.failures.at(StatusCode::kInvalidArgument), 2u);
  EXPECT_EQ(s.batch_size_hist, (std::map<int, uint64_t>{{1, 4}, {4, 1}}));  // the batch, then each alone
}

// Timeouts at the int64 boundary on the real clock (whose epoch is far from 0): no overflow into
// an instant DeadlineExceeded; negative ones are refused, saying why.
TEST(Serving, TimeoutsAtTheInt64Boundary) {
  auto served = ServingModel::create(matmul_relu_model(), options(1, 1, 0));
  ASSERT_TRUE(served.ok());
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int64_t t : {kMax, kMax - 1, kMax / 2}) {
    InferRequest r = request(1, random_tensor(Shape{1, kIn}, 1));
    r.timeout_us = t;
    const InferResponse resp = (*served)->infer(std::move(r));
    EXPECT_TRUE(resp.status.ok()) << t << ": " << resp.status.to_string();
  }
  for (int64_t t : {int64_t{-1}, std::numeric_limits<int64_t>::min()}) {
    InferRequest r = request(2, random_tensor(Shape{1, kIn}, 1));
    r.timeout_us = t;
    const InferResponse resp = (*served)->infer(std::move(r));
    EXPECT_EQ(resp.status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(resp.status.message().find("timeout_us must be >= 0"), std::string::npos) << resp.status.message();
    EXPECT_NE(resp.status.message().find(std::to_string(t)), std::string::npos) << resp.status.message();
  }
}

TEST(Serving, DifferentNonBatchDimsAreNotBatchedTogether) {
  auto model = relu_model(Dim::sym("N"));
  ASSERT_TRUE(model);
  FakeClock clock;
  auto served = ServingModel::create(model, options(1, 2, 1'000'000, &clock));
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  std::vector<std::future<InferResponse>> fs;
  for (int i = 0; i < 4; ++i) {
    const int64_t s = i % 2 ? 5 : 3;
    fs.push_back((*served)->submit(request(static_cast<uint64_t>(i), random_tensor(Shape{1, s}, 9))));
  }
  for (int i = 0; i < 4; ++i) {
    InferResponse r = fs[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(r.batch_size, 2);
    EXPECT_EQ(r.outputs.at("y").shape(), (Shape{1, i % 2 ? 5 : 3}));
  }
  EXPECT_EQ((*served)->stats().batch_size_hist, (std::map<int, uint64_t>{{2, 2}}));
}

TEST(Serving, FixedBatchDimensionCannotBeBatched) {
  auto model = relu_model(Dim(1));
  ASSERT_TRUE(model);
  auto batched = ServingModel::create(model, options(1, 4, 0));
  EXPECT_EQ(batched.status().code(), StatusCode::kInvalidArgument);
  auto plain = ServingModel::create(model, options(1, 1, 0));
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE((*plain)->infer(request(1, random_tensor(Shape{1, 6}, 2))).status.ok());
  EXPECT_EQ((*plain)->infer(request(2, random_tensor(Shape{2, 6}, 2))).status.code(), StatusCode::kInvalidArgument);
}

TEST(Serving, BadOptionsAreRefused) {
  auto model = matmul_relu_model();
  EXPECT_EQ(ServingModel::create(model, options(0, 1, 0)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ServingModel::create(model, options(1, 0, 0)).status().code(), StatusCode::kInvalidArgument);
  ServingOptions o = options(1, 4, 0);
  o.batching.preferred_batch_sizes = {8};
  EXPECT_EQ(ServingModel::create(model, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ServingModel::create(nullptr, options(1, 1, 0)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ServingModel::load("/no/such/model.onnx", options(1, 1, 0)).status().code(), StatusCode::kNotFound);
}

TEST(Serving, PreferredSizesArePlannedAtLoad) {
  ServingOptions o = options(2, 8, 0);
  o.batching.preferred_batch_sizes = {4};
  auto served = ServingModel::create(matmul_relu_model(), o);
  ASSERT_TRUE(served.ok());
  EXPECT_EQ((*served)->planned_batch_sizes(), (std::vector<int>{1, 4, 8}));
  for (size_t bytes : (*served)->arena_bytes()) EXPECT_GT(bytes, 0u);  // warmed up at batch 8
}

TEST(Serving, WithoutAControllerStatsReportTheConfiguredSettings) {
  ServingOptions o = options(2, 8, 300);
  o.threads_per_instance = 2;
  o.batching.preferred_batch_sizes = {4};
  auto served = ServingModel::create(matmul_relu_model(), o);
  ASSERT_TRUE(served.ok()) << served.status().to_string();
  const ControllerStats c = (*served)->stats().controller;
  EXPECT_FALSE(c.enabled);
  EXPECT_EQ(c.active_instances, 2);
  EXPECT_EQ(c.queue_delay_us, 300);
  EXPECT_EQ(c.preferred_batch, 4);
  EXPECT_EQ(c.threads_per_instance, 2);
}

TEST(Serving, QueueFullTimeoutAndShutdown) {
  FakeClock clock;
  ServingOptions o = options(1, 4, 1'000'000, &clock);
  o.batching.queue.max_queue_size = 2;
  o.batching.queue.default_timeout_us = 500;
  auto served = ServingModel::create(matmul_relu_model(), o);
  ASSERT_TRUE(served.ok());
  ServingModel& m = **served;
  auto x = random_tensor(Shape{1, kIn}, 3);
  auto a = m.submit(request(1, x));
  InferRequest long_budget = request(2, x);
  long_budget.timeout_us = 1'000'000;
  auto b = m.submit(std::move(long_budget));
  auto c = m.submit(request(3, x));  // queue holds 2
  ASSERT_EQ(c.wait_for(0ms), std::future_status::ready);
  EXPECT_EQ(c.get().status.code(), StatusCode::kResourceExhausted);
  clock.advance_us(600);  // request 1 times out; the worker re-reads the clock by itself
  EXPECT_EQ(a.get().status.code(), StatusCode::kDeadlineExceeded);
  auto d = m.submit(request(4, x));
  m.shutdown(ShutdownMode::kCancel);
  EXPECT_EQ(b.get().status.code(), StatusCode::kCancelled);
  EXPECT_EQ(d.get().status.code(), StatusCode::kCancelled);
  EXPECT_EQ(m.infer(request(5, x)).status.code(), StatusCode::kUnavailable);
  const ServingStats s = m.stats();
  EXPECT_EQ(s.failures.at(StatusCode::kResourceExhausted), 1u);
  EXPECT_EQ(s.failures.at(StatusCode::kDeadlineExceeded), 1u);
  EXPECT_EQ(s.failures.at(StatusCode::kCancelled), 2u);
  EXPECT_EQ(s.failures.at(StatusCode::kUnavailable), 1u);
  EXPECT_EQ(s.in_flight, 0);
}

// 8 threads x 200 requests through 2 instances with batching, a small queue and short
// timeouts: every request gets exactly one response, and every success is correct.
TEST(Serving, ConcurrentRequestsEachGetExactlyOneResponse) {
  auto model = matmul_relu_model();
  ServingOptions o = options(2, 8, 300);
  o.batching.queue.max_queue_size = 16;
  auto served = ServingModel::create(model, o);
  ASSERT_TRUE(served.ok());
  constexpr int kThreads = 8, kPerThread = 200;
  std::vector<Tensor> xs, expected;
  Session session(model);
  for (int i = 0; i < 4; ++i) {
    xs.push_back(random_tensor(Shape{1, kIn}, 50 + static_cast<uint32_t>(i)));
    auto ref = session.run({xs.back()});
    ASSERT_TRUE(ref.ok());
    expected.push_back((*ref)[1]);
  }
  std::vector<std::atomic<int>> answers(kThreads * kPerThread);
  std::atomic<int> ok{0}, failed{0}, wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int id = t * kPerThread + i;
        InferRequest r = request(static_cast<uint64_t>(id), xs[static_cast<size_t>(id % 4)]);
        r.requested_outputs = {"y"};
        if (i % 10 == 0) r.timeout_us = 1;  // likely to time out
        (*served)->submit(std::move(r), [&, id](InferResponse resp) {
          answers[static_cast<size_t>(id)].fetch_add(1);
          if (!resp.status.ok()) {
            const auto c = resp.status.code();
            if (c != StatusCode::kResourceExhausted && c != StatusCode::kDeadlineExceeded) wrong.fetch_add(1);
            failed.fetch_add(1);
            return;
          }
          ok.fetch_add(1);
          const Tensor& y = resp.outputs.at("y");
          const Tensor& e = expected[static_cast<size_t>(id % 4)];
          for (int64_t k = 0; k < y.numel(); ++k)
            if (std::fabs(y.data<float>()[k] - e.data<float>()[k]) > 1e-5f) wrong.fetch_add(1);
        });
        if (i % 16 == 0) std::this_thread::sleep_for(200us);
      }
    });
  for (auto& t : ts) t.join();
  (*served)->shutdown(ShutdownMode::kDrain);
  for (size_t i = 0; i < answers.size(); ++i) ASSERT_EQ(answers[i].load(), 1) << "request " << i;
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(ok.load(), 0);
  const ServingStats s = (*served)->stats();
  EXPECT_EQ(s.succeeded + s.failed, static_cast<uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(s.succeeded, static_cast<uint64_t>(ok.load()));
  EXPECT_EQ(s.in_flight, 0);
}

}  // namespace
}  // namespace streamline
