// Pipeline: graph checks at build, results equal to running the steps by hand, bounded queues
// with backpressure, exactly one response per request under concurrency, fan-out and fan-in,
// model stages that batch across pipeline requests, and shutdown.

#include "streamline/pipeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "graph/ir.h"
#include "runtime/stages/image_ops.h"

namespace streamline {
namespace {

using graph::Dim;
using graph::DimList;
using namespace std::chrono_literals;

Tensor scalar_in(float v) {
  return Tensor::from_vector<float>(Shape{1}, {v});
}
float value(const Tensor& t) {
  return t.data<float>()[0];
}

// out = f(in) on float [1] tensors.
StageFunction unary(std::string in, std::string out, std::function<float(float)> f) {
  return [in, out, f](const TensorMap& ins, TensorMap& outs) {
    outs[out] = scalar_in(f(value(ins.at(in))));
    return ok_status();
  };
}

InferRequest request(uint64_t id, std::string name, Tensor t) {
  InferRequest r;
  r.id = id;
  r.inputs[std::move(name)] = std::move(t);
  return r;
}

// A stage that blocks every request until opened; counts how many are inside.
// Whether `condition` holds within 10 s (checked as fast as the scheduler allows): for states
// another thread reaches at an unknown moment.
template <typename F>
bool eventually(F condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

class Gate final : public Stage {
 public:
  Status process(StageIO& io) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++inside_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    --inside_;
    io.outputs[0] = io.inputs[0];
    return ok_status();
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void wait_inside(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return inside_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int inside_ = 0;
};

Status build_status(const PipelineBuilder& b) {
  return b.build().status();
}

void expect_invalid(const PipelineBuilder& b, const std::string& needle) {
  const Status s = build_status(b);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos) << "'" << needle << "' not in: " << s.message();
}

StageFunction passthrough(std::string in, std::string out) {
  return unary(std::move(in), std::move(out), [](float v) { return v; });
}

TEST(PipelineBuild, RejectsBadGraphs) {
  expect_invalid(PipelineBuilder().input("x"), "no stages");
  {
    PipelineBuilder b;
    b.add_function({.name = "a", .inputs = {"x"}, .outputs = {"y"}}, passthrough("x", "y"));
    expect_invalid(b, "no inputs");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_function({.name = "a", .inputs = {"x"}, .outputs = {"y"}}, passthrough("x", "y"));
    b.add_function({.name = "a", .inputs = {"y"}, .outputs = {"z"}}, passthrough("y", "z"));
    expect_invalid(b, "two stages are named 'a'");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_function({.name = "a", .inputs = {"x"}, .outputs = {"y"}}, passthrough("x", "y"));
    b.add_function({.name = "b", .inputs = {"x"}, .outputs = {"y"}}, passthrough("x", "y"));
    expect_invalid(b, "tensor 'y' is written by stage 'b' and also by stage 'a'");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_function({.name = "a", .inputs = {"x"}, .outputs = {"x2"}}, passthrough("x", "x2"));
    b.add_function({.name = "b", .inputs = {"x2"}, .outputs = {"x"}}, passthrough("x2", "x"));
    expect_invalid(b, "is a pipeline input");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_function({.name = "a", .inputs = {"x", "ghost"}, .outputs = {"y"}}, passthrough("x", "y"));
    expect_invalid(b, "stage 'a' reads 'ghost'");
  }
  {
    // a -> b -> c -> a, fed by an entry stage.
    PipelineBuilder b;
    b.input("x");
    b.add_function({.name = "entry", .inputs = {"x"}, .outputs = {"e"}}, passthrough("x", "e"));
    b.add_function({.name = "a", .inputs = {"e", "c_out"}, .outputs = {"a_out"}}, passthrough("e", "a_out"));
    b.add_function({.name = "b", .inputs = {"a_out"}, .outputs = {"b_out"}}, passthrough("a_out", "b_out"));
    b.add_function({.name = "c", .inputs = {"b_out"}, .outputs = {"c_out"}}, passthrough("b_out", "c_out"));
    const Status s = build_status(b);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("cycle"), std::string::npos) << s.message();
    for (const char* n : {"'a'", "'b'", "'c'"}) EXPECT_NE(s.message().find(n), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find("'entry'"), std::string::npos) << s.message();
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_function({.name = "self", .inputs = {"x", "y"}, .outputs = {"y"}}, passthrough("x", "y"));
    expect_invalid(b, "names tensor 'y' twice");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_function({.name = "a", .inputs = {"x"}, .outputs = {"y"}}, passthrough("x", "y"));
    b.output("nope");
    expect_invalid(b, "pipeline output 'nope'");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_function({.name = "a", .inputs = {"x"}, .outputs = {"y"}, .queue_capacity = 0}, passthrough("x", "y"));
    expect_invalid(b, "queue_capacity");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_function({.name = "a", .inputs = {"x"}, .outputs = {"y"}, .instances = 0}, passthrough("x", "y"));
    expect_invalid(b, "instances");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_stage({.name = "null", .inputs = {"x"}, .outputs = {"y"}}, nullptr);
    expect_invalid(b, "stage 'null'");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_stage_per_instance({.name = "f", .inputs = {"x"}, .outputs = {"y"}}, [] { return std::unique_ptr<Stage>(); });
    expect_invalid(b, "stage 'f': its factory returned no stage");
  }
  {
    PipelineBuilder b;
    b.input("x").input("x");
    b.add_function({.name = "a", .inputs = {"x"}, .outputs = {"y"}}, passthrough("x", "y"));
    expect_invalid(b, "declared twice");
  }
}

TEST(Pipeline, LinearChainAndRequestChecks) {
  PipelineBuilder b;
  b.input("x");
  b.add_function({.name = "double", .inputs = {"x"}, .outputs = {"d"}}, unary("x", "d", [](float v) { return 2 * v; }));
  b.add_function({.name = "inc", .inputs = {"d"}, .outputs = {"y"}, .instances = 3},
                 unary("d", "y", [](float v) { return v + 1; }));
  auto p = b.build();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)->output_names(), (std::vector<std::string>{"y"}));  // only the sink by default
  InferResponse r = (*p)->infer(request(7, "x", scalar_in(5)));
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.id, 7u);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(value(r.outputs.at("y")), 11.f);

  EXPECT_EQ((*p)->infer(InferRequest{}).status.code(), StatusCode::kInvalidArgument);  // missing x
  InferRequest extra = request(1, "x", scalar_in(1));
  extra.inputs["z"] = scalar_in(1);
  EXPECT_EQ((*p)->infer(extra).status.code(), StatusCode::kInvalidArgument);
  InferRequest bad_out = request(2, "x", scalar_in(1));
  bad_out.requested_outputs = {"d"};  // an intermediate, not an output
  EXPECT_EQ((*p)->infer(bad_out).status.code(), StatusCode::kInvalidArgument);
  const PipelineStats s = (*p)->stats();
  EXPECT_EQ(s.accepted, 1u);
  EXPECT_EQ(s.succeeded, 1u);
  EXPECT_EQ(s.failed, 3u);
  EXPECT_EQ(s.failures.at(StatusCode::kInvalidArgument), 3u);
  ASSERT_EQ(s.stages.size(), 2u);
  EXPECT_EQ(s.stages[0].name, "double");
  EXPECT_EQ(s.stages[1].processed, 1u);
  EXPECT_EQ(s.stages[1].instances, 3);
  EXPECT_EQ(s.stages[0].queue.count, 1u);
  EXPECT_EQ(s.total.count, 1u);
}

TEST(Pipeline, StageErrorsNameTheStage) {
  struct Thrower final : Stage {
    Status process(StageIO&) override { throw std::runtime_error("boom"); }
  };
  struct Lazy final : Stage {
    Status process(StageIO&) override { return ok_status(); }  // sets no output
  };
  PipelineBuilder b;
  b.input("x");
  b.add_function({.name = "check", .inputs = {"x"}, .outputs = {"c"}}, [](const TensorMap& in, TensorMap& out) {
    if (value(in.at("x")) < 0) return invalid_argument("negative input");
    out["c"] = in.at("x");
    return ok_status();
  });
  b.add_stage({.name = "thrower", .inputs = {"c"}, .outputs = {"t"}}, std::make_shared<Thrower>());
  b.add_stage({.name = "lazy", .inputs = {"c"}, .outputs = {"l"}}, std::make_shared<Lazy>());
  b.add_function({.name = "sloppy", .inputs = {"c"}, .outputs = {"s"}}, [](const TensorMap&, TensorMap& out) {
    out["other"] = scalar_in(0);
    return ok_status();
  });
  {
    PipelineBuilder only = b;
    auto p = only.output("c").build();
    ASSERT_TRUE(p.ok());
  }
  auto p = b.build();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  InferResponse neg = (*p)->infer(request(1, "x", scalar_in(-1)));
  EXPECT_EQ(neg.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(neg.status.message(), "stage 'check': negative input");
  InferResponse pos = (*p)->infer(request(2, "x", scalar_in(1)));
  EXPECT_EQ(pos.status.code(), StatusCode::kInternal);
  // Three branches fail; the first to fail answers, the others are dropped.
  EXPECT_TRUE(pos.status.message().find("stage 'thrower'") == 0 || pos.status.message().find("stage 'lazy'") == 0 ||
              pos.status.message().find("stage 'sloppy'") == 0)
      << pos.status.message();
  (*p)->shutdown();
  const PipelineStats s = (*p)->stats();
  uint64_t branches = 0;
  for (const auto& st : s.stages) {
    if (st.name == "check") {
      EXPECT_EQ(st.failed, 1u);
    } else {
      branches += st.failed + st.skipped;  // a branch failed, or was dropped after another failed
    }
  }
  EXPECT_EQ(branches, 3u);
  EXPECT_EQ(s.failed, 2u);
}

// detect -> (left, right) -> join: the join waits for both branches; any instance count works.
TEST(Pipeline, FanOutFanIn) {
  PipelineBuilder b;
  b.input("x");
  b.add_function({.name = "detect", .inputs = {"x"}, .outputs = {"box"}, .instances = 2},
                 unary("x", "box", [](float v) { return v + 1; }));
  b.add_function({.name = "left", .inputs = {"box"}, .outputs = {"a"}, .instances = 2}, unary("box", "a", [](float v) {
                   std::this_thread::sleep_for(200us);
                   return 2 * v;
                 }));
  b.add_function({.name = "right", .inputs = {"box"}, .outputs = {"b"}},
                 unary("box", "b", [](float v) { return 3 * v; }));
  b.add_function({.name = "join", .inputs = {"a", "b", "x"}, .outputs = {"z"}, .instances = 2},
                 [](const TensorMap& in, TensorMap& out) {
                   out["z"] = scalar_in(value(in.at("a")) + value(in.at("b")) - value(in.at("x")));
                   return ok_status();
                 });
  b.output("z").output("box");
  auto p = b.build();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<std::future<InferResponse>> fs;
  for (int i = 0; i < 40; ++i)
    fs.push_back((*p)->submit(request(static_cast<uint64_t>(i), "x", scalar_in(static_cast<float>(i)))));
  for (int i = 0; i < 40; ++i) {
    InferResponse r = fs[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(r.id, static_cast<uint64_t>(i));
    EXPECT_EQ(value(r.outputs.at("z")), 5.f * (static_cast<float>(i) + 1) - static_cast<float>(i));
    EXPECT_EQ(value(r.outputs.at("box")), static_cast<float>(i) + 1);
  }
  const PipelineStats s = (*p)->stats();
  for (const auto& st : s.stages) EXPECT_EQ(st.processed, 40u) << st.name;
  EXPECT_EQ(s.stages.back().name, "join");
}

// A slow stage with capacity 2 never holds more than 2 waiting requests; the entry refuses at once
// (timeout 0) or after the request's timeout, and accepts again once there is room.
TEST(Pipeline, EntryBackpressure) {
  auto gate = std::make_shared<Gate>();
  PipelineBuilder b;
  b.input("x");
  b.add_stage({.name = "slow", .inputs = {"x"}, .outputs = {"y"}, .queue_capacity = 2}, gate);
  auto p = b.build({.entry_timeout_us = 0});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  Pipeline& pipe = **p;
  auto first = pipe.submit(request(0, "x", scalar_in(0)));
  gate->wait_inside(1);  // the worker holds request 0
  auto second = pipe.submit(request(1, "x", scalar_in(1)));
  auto third = pipe.submit(request(2, "x", scalar_in(2)));
  EXPECT_EQ(pipe.stats().stages[0].queue_depth, 2);

  InferResponse refused = pipe.submit(request(3, "x", scalar_in(3))).get();  // ready at once
  EXPECT_EQ(refused.status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status.message().find("stage 'slow'"), std::string::npos) << refused.status.message();
  InferRequest patient = request(4, "x", scalar_in(4));
  patient.timeout_us = 30'000;
  const auto t0 = std::chrono::steady_clock::now();
  InferResponse waited = pipe.submit(std::move(patient)).get();
  EXPECT_EQ(waited.status.code(), StatusCode::kResourceExhausted);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 25ms);

  InferRequest later = request(5, "x", scalar_in(5));
  later.timeout_us = 10'000'000;
  std::future<InferResponse> fifth;
  std::thread submitter([&] { fifth = pipe.submit(std::move(later)); });  // blocks until room
  EXPECT_TRUE(eventually([&] { return pipe.stats().stages[0].blocked_producers == 1; }))
      << "the fifth request never waited for room";
  gate->open();
  submitter.join();
  for (auto* f : {&first, &second, &third, &fifth}) EXPECT_TRUE(f->get().status.ok());
  const PipelineStats s = pipe.stats();
  EXPECT_EQ(s.stages[0].max_queue_depth, 2);
  EXPECT_EQ(s.stages[0].processed, 4u);
  EXPECT_EQ(s.failures.at(StatusCode::kResourceExhausted), 2u);
  EXPECT_EQ(s.accepted, 4u);
}

// Inside the pipeline a full queue blocks its producer: with the sink gated, at most
// capacity requests wait at each stage and the rest wait upstream or at the entry.
TEST(Pipeline, InternalBackpressureBoundsEveryQueue) {
  auto gate = std::make_shared<Gate>();
  PipelineBuilder b;
  b.input("x");
  b.add_function({.name = "fast", .inputs = {"x"}, .outputs = {"f"}, .queue_capacity = 2}, passthrough("x", "f"));
  b.add_stage({.name = "sink", .inputs = {"f"}, .outputs = {"y"}, .queue_capacity = 2}, gate);
  auto p = b.build({.entry_timeout_us = 10'000'000});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  constexpr int kN = 12;
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kN; ++i)
    clients.emplace_back([&, i] {
      (*p)->submit(request(static_cast<uint64_t>(i), "x", scalar_in(static_cast<float>(i))), [&](InferResponse r) {
        EXPECT_TRUE(r.status.ok()) << r.status.to_string();
        answered.fetch_add(1);
      });
    });
  gate->wait_inside(1);
  // Saturation: the sink holds 1 and queues 2; fast's worker has processed a 4th and is blocked
  // pushing it, 2 more wait in fast's queue; the other clients wait to enter.
  EXPECT_TRUE(eventually([&] {
    const PipelineStats s = (*p)->stats();
    return s.stages[0].queue_depth == 2 && s.stages[1].queue_depth == 2 && s.stages[0].processed == 4 &&
           s.stages[1].blocked_producers == 1 && s.stages[0].blocked_producers == kN - 6;
  }));
  PipelineStats s = (*p)->stats();
  EXPECT_EQ(s.stages[1].blocked_producers, 1);       // fast's worker, pushing its 4th
  EXPECT_EQ(s.stages[0].blocked_producers, kN - 6);  // the clients that have not entered
  EXPECT_EQ(s.stages[1].queue_depth, 2);
  EXPECT_EQ(s.stages[0].queue_depth, 2);
  EXPECT_EQ(s.stages[0].processed, 4u);
  EXPECT_EQ(answered.load(), 0);
  gate->open();
  for (auto& t : clients) t.join();
  (*p)->shutdown();
  s = (*p)->stats();
  EXPECT_EQ(answered.load(), kN);
  for (const auto& st : s.stages) {
    EXPECT_LE(st.max_queue_depth, 2) << st.name;
    EXPECT_EQ(st.processed, static_cast<uint64_t>(kN)) << st.name;
  }
}

// 8 threads x 50 requests through fan-out/fan-in with one stage failing every 7th request: each
// request gets exactly one response, the right one.
TEST(Pipeline, ExactlyOneResponseUnderConcurrency) {
  PipelineBuilder b;
  b.input("x");
  b.add_function({.name = "split", .inputs = {"x"}, .outputs = {"p", "q"}, .instances = 2, .queue_capacity = 4},
                 [](const TensorMap& in, TensorMap& out) {
                   out["p"] = scalar_in(value(in.at("x")));
                   out["q"] = scalar_in(-value(in.at("x")));
                   return ok_status();
                 });
  b.add_function({.name = "picky", .inputs = {"p"}, .outputs = {"p2"}, .instances = 3, .queue_capacity = 3},
                 [](const TensorMap& in, TensorMap& out) {
                   const int v = static_cast<int>(value(in.at("p")));
                   if (v % 7 == 0) return invalid_argument("multiple of 7");
                   out["p2"] = scalar_in(static_cast<float>(v * 10));
                   return ok_status();
                 });
  b.add_function({.name = "neg", .inputs = {"q"}, .outputs = {"q2"}, .queue_capacity = 2},
                 unary("q", "q2", [](float v) { return v - 0.5f; }));
  b.add_function({.name = "join", .inputs = {"p2", "q2"}, .outputs = {"out"}, .instances = 2, .queue_capacity = 2},
                 [](const TensorMap& in, TensorMap& out) {
                   out["out"] = scalar_in(value(in.at("p2")) + value(in.at("q2")));
                   return ok_status();
                 });
  auto p = b.build({.entry_timeout_us = 60'000'000});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  constexpr int kThreads = 8, kPer = 50, kTotal = kThreads * kPer;
  std::vector<std::atomic<int>> count(kTotal);
  std::vector<std::atomic<int>> bad(kTotal);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::vector<std::future<InferResponse>> mine;
      for (int i = 0; i < kPer; ++i) {
        const int id = t * kPer + i;
        auto check = [&, id](const InferResponse& r) {
          count[static_cast<size_t>(id)].fetch_add(1);
          const bool fails = id % 7 == 0;
          bool good = r.id == static_cast<uint64_t>(id);
          if (fails) {
            good = good && r.status.code() == StatusCode::kInvalidArgument &&
                   r.status.message() == "stage 'picky': multiple of 7";
          } else {
            good = good && r.status.ok() && value(r.outputs.at("out")) == static_cast<float>(id) * 9 - 0.5f;
          }
          if (!good) bad[static_cast<size_t>(id)].fetch_add(1);
        };
        InferRequest r = request(static_cast<uint64_t>(id), "x", scalar_in(static_cast<float>(id)));
        if (i % 2) {
          (*p)->submit(std::move(r), check);
        } else {
          mine.push_back((*p)->submit(std::move(r)));
          check(mine.back().get());
        }
      }
    });
  for (auto& t : threads) t.join();
  (*p)->shutdown();
  int failing = 0;
  for (int id = 0; id < kTotal; ++id) {
    EXPECT_EQ(count[static_cast<size_t>(id)].load(), 1) << id;
    EXPECT_EQ(bad[static_cast<size_t>(id)].load(), 0) << id;
    failing += id % 7 == 0;
  }
  const PipelineStats s = (*p)->stats();
  EXPECT_EQ(s.succeeded, static_cast<uint64_t>(kTotal - failing));
  EXPECT_EQ(s.failed, static_cast<uint64_t>(failing));
  EXPECT_EQ(s.in_flight, 0);
  for (const auto& st : s.stages) {
    EXPECT_LE(st.max_queue_depth, st.queue_capacity) << st.name;
    if (st.name == "picky") {
      EXPECT_EQ(st.failed, static_cast<uint64_t>(failing));
    }
    if (st.name == "join") {
      EXPECT_EQ(st.processed + st.skipped, static_cast<uint64_t>(kTotal - failing));
    }
  }
}

TEST(Pipeline, ShutdownDrainsThenRefuses) {
  auto gate = std::make_shared<Gate>();
  PipelineBuilder b;
  b.input("x");
  b.add_stage({.name = "gate", .inputs = {"x"}, .outputs = {"y"}, .queue_capacity = 8}, gate);
  auto p = b.build();
  ASSERT_TRUE(p.ok());
  std::vector<std::future<InferResponse>> fs;
  for (int i = 0; i < 5; ++i) fs.push_back((*p)->submit(request(static_cast<uint64_t>(i), "x", scalar_in(1))));
  gate->wait_inside(1);
  std::thread closer([&] { (*p)->shutdown(ShutdownMode::kDrain); });
  // Probe until shutdown has begun, so that the gate opens while it drains; probes accepted before
  // that are drained too. Until then the queue may fill (the closer thread can be slow to start):
  // a probe refused as queue-full tells nothing yet.
  Status refused;
  for (uint64_t id = 100;; ++id) {
    auto f = (*p)->submit(request(id, "x", scalar_in(1)));
    if (f.wait_for(0s) == std::future_status::ready) {
      refused = f.get().status;
      if (refused.code() == StatusCode::kResourceExhausted) {
        std::this_thread::yield();
        continue;
      }
      break;
    }
    fs.push_back(std::move(f));
    std::this_thread::yield();
  }
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused.to_string();
  gate->open();
  closer.join();
  for (auto& f : fs) EXPECT_TRUE(f.get().status.ok());
  EXPECT_EQ((*p)->infer(request(9, "x", scalar_in(1))).status.code(), StatusCode::kUnavailable);
  (*p)->shutdown();  // idempotent
}

TEST(Pipeline, ShutdownCancelAnswersQueuedRequests) {
  auto gate = std::make_shared<Gate>();
  PipelineBuilder b;
  b.input("x");
  b.add_stage({.name = "gate", .inputs = {"x"}, .outputs = {"g"}, .queue_capacity = 64}, gate);
  b.add_function({.name = "after", .inputs = {"g"}, .outputs = {"y"}}, passthrough("g", "y"));
  auto p = b.build();
  ASSERT_TRUE(p.ok());
  std::vector<std::future<InferResponse>> fs;
  for (int i = 0; i < 5; ++i) fs.push_back((*p)->submit(request(static_cast<uint64_t>(i), "x", scalar_in(1))));
  gate->wait_inside(1);
  std::thread closer([&] { (*p)->shutdown(ShutdownMode::kCancel); });
  // Probe until shutdown has begun (the state the probe asserts); probes accepted before that are
  // queued and cancelled too. The gate opens and the closer is joined before any assertion can
  // end the test.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool began = false;
  for (uint64_t id = 100; std::chrono::steady_clock::now() < deadline; ++id) {
    auto f = (*p)->submit(request(id, "x", scalar_in(1)));
    if (f.wait_for(0s) == std::future_status::ready) {
      const InferResponse probe = f.get();
      EXPECT_EQ(probe.status.code(), StatusCode::kUnavailable) << probe.status.to_string();
      began = true;
      break;
    }
    fs.push_back(std::move(f));
    std::this_thread::sleep_for(1ms);
  }
  gate->open();
  closer.join();
  ASSERT_TRUE(began) << "no probe was refused within 10 s of shutdown(kCancel)";
  for (auto& f : fs) {
    const InferResponse r = f.get();  // the one inside the gate is cancelled at its next stage
    EXPECT_EQ(r.status.code(), StatusCode::kCancelled) << r.status.to_string();
  }
}

// An intermediate tensor is released once its last reader has it, not when the request ends.
TEST(Pipeline, IntermediatesAreReleasedEarly) {
  auto gate = std::make_shared<Gate>();
  std::weak_ptr<float> watch;  // the memory of "big"
  PipelineBuilder b;
  b.input("x");
  b.add_function({.name = "make", .inputs = {"x"}, .outputs = {"big"}}, [&watch](const TensorMap& in, TensorMap& out) {
    auto buffer = std::make_shared<float>(value(in.at("x")));
    watch = buffer;
    Tensor t = Tensor::view(DType::kFloat32, Shape{1}, buffer.get());
    t.set_owner(std::move(buffer));
    out["big"] = std::move(t);
    return ok_status();
  });
  b.add_function({.name = "use", .inputs = {"big"}, .outputs = {"small"}}, passthrough("big", "small"));
  b.add_stage({.name = "wait", .inputs = {"small"}, .outputs = {"y"}}, gate);
  auto p = b.build();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto f = (*p)->submit(request(1, "x", scalar_in(3)));
  gate->wait_inside(1);
  EXPECT_TRUE(eventually([&] { return watch.expired(); }));  // the request is still in the pipeline, "big" is gone
  gate->open();
  EXPECT_EQ(value(f.get().outputs.at("y")), 3.f);
}

TEST(Pipeline, PerInstanceStagesAreNotShared) {
  struct Counter final : Stage {
    Status process(StageIO& io) override {
      EXPECT_EQ(busy_.fetch_add(1), 0);  // never two threads on one object
      std::this_thread::sleep_for(100us);
      busy_.fetch_sub(1);
      io.outputs[0] = io.inputs[0];
      return ok_status();
    }
    std::atomic<int> busy_{0};
  };
  std::atomic<int> made{0};
  PipelineBuilder b;
  b.input("x");
  b.add_stage_per_instance({.name = "c", .inputs = {"x"}, .outputs = {"y"}, .instances = 3}, [&] {
    made.fetch_add(1);
    return std::make_unique<Counter>();
  });
  auto p = b.build();
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(made.load(), 3);
  std::vector<std::future<InferResponse>> fs;
  for (int i = 0; i < 30; ++i) fs.push_back((*p)->submit(request(static_cast<uint64_t>(i), "x", scalar_in(1))));
  for (auto& f : fs) EXPECT_TRUE(f.get().status.ok());
}

// ---- Model stages -------------------------------------------------------------------------------

constexpr int kClasses = 5;

// x[N,3,8,8] -> GlobalAveragePool -> Flatten -> MatMul W[3,5] -> logits[N,5].
std::shared_ptr<Model> tiny_classifier() {
  graph::Graph g;
  g.opsets[""] = 13;
  const auto x = g.add_value("x", DType::kFloat32, DimList{Dim::sym("N"), 3, 8, 8});
  g.add_input(x);
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  Tensor w = Tensor::empty(DType::kFloat32, Shape{3, kClasses});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = u(rng);
  const auto wv = g.add_constant("W", w);
  const auto pooled = g.add_value("pooled", DType::kFloat32);
  const auto flat = g.add_value("flat", DType::kFloat32);
  const auto logits = g.add_value("logits", DType::kFloat32);
  g.add_node("GlobalAveragePool", "gap", {x}, {pooled});
  g.add_node("Flatten", "flatten", {pooled}, {flat});
  g.add_node("MatMul", "fc", {flat, wv}, {logits});
  g.add_output(logits);
  // Plain layout throughout: these tests are about the pipeline, not layout planning.
  ModelOptions mo;
  mo.channels_last = false;
  auto m = Model::from_graph(std::move(g), mo);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

std::shared_ptr<ServingModel> serve(std::shared_ptr<Model> model, int max_batch, int64_t delay_us,
                                    const Clock* clock = nullptr) {
  ServingOptions o;
  o.instances = 1;
  o.threads_per_instance = 1;
  o.batching.max_batch_size = max_batch;
  o.batching.max_queue_delay_us = delay_us;
  if (clock) o.clock = clock;
  auto s = ServingModel::create(std::move(model), o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::shared_ptr<ServingModel>(std::move(*s)) : nullptr;
}

Tensor file_tensor(const std::vector<uint8_t>& bytes) {
  return Tensor::from_vector<uint8_t>(Shape{static_cast<int64_t>(bytes.size())}, bytes);
}

std::vector<uint8_t> test_image(int64_t h, int64_t w, uint32_t seed, bool jpeg) {
  std::mt19937 rng(seed);
  Tensor t = Tensor::empty(DType::kUInt8, Shape{h, w, 3});
  // Per-channel brightness differs by seed, so the classes differ between images.
  const int base[3] = {static_cast<int>(rng() % 200), static_cast<int>(rng() % 200), static_cast<int>(rng() % 200)};
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(base[i % 3] + rng() % 50);
  auto bytes = jpeg ? runtime::encode_jpeg(t, 90) : runtime::encode_png(t);
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

// decode -> resize/normalise -> model -> top-k gives the top-k of the same steps done by hand.
TEST(PipelineModel, ClassifierMatchesStepsByHand) {
  auto model = tiny_classifier();
  ASSERT_TRUE(model);
  auto served = serve(model, 4, 2000);
  ASSERT_TRUE(served);
  stages::ImagePreprocessOptions pre;
  pre.resize = {.height = 8, .width = 8, .shorter_side = 9};
  PipelineBuilder b;
  b.input("file");
  b.add_stage({.name = "decode", .inputs = {"file"}, .outputs = {"rgb"}, .instances = 2}, stages::decode_image());
  b.add_stage({.name = "pre", .inputs = {"rgb"}, .outputs = {"tensor"}, .instances = 2}, stages::preprocess_image(pre));
  b.add_model({.name = "model", .inputs = {"tensor"}, .outputs = {"scores_raw"}}, served,
              {.model_inputs = {"x"}, .model_outputs = {"logits"}});
  b.add_stage({.name = "top3", .inputs = {"scores_raw"}, .outputs = {"classes", "probs"}}, stages::top_k({.k = 3}));
  auto p = b.build();
  ASSERT_TRUE(p.ok()) << p.status().to_string();

  Session session(model);
  constexpr int kImages = 12;
  std::vector<std::vector<uint8_t>> files;
  std::vector<std::future<InferResponse>> fs;
  for (int i = 0; i < kImages; ++i) {
    files.push_back(test_image(10 + i, 14 + 2 * i, static_cast<uint32_t>(i), i % 2 == 0));
    fs.push_back((*p)->submit(request(static_cast<uint64_t>(i), "file", file_tensor(files.back()))));
  }
  for (int i = 0; i < kImages; ++i) {
    InferResponse r = fs[static_cast<size_t>(i)].get();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    const auto& f = files[static_cast<size_t>(i)];
    auto rgb = runtime::decode_image(f.data(), f.size(), {});
    ASSERT_TRUE(rgb.ok());
    auto scaled = runtime::resize_shorter_side(*rgb, 9);
    ASSERT_TRUE(scaled.ok());
    auto crop = runtime::center_crop(*scaled, 8, 8);
    ASSERT_TRUE(crop.ok());
    auto norm = runtime::normalize_hwc(*crop, pre.normalize.mean, pre.normalize.std, pre.normalize.scale);
    ASSERT_TRUE(norm.ok());
    auto x = runtime::hwc_to_nchw(*norm);
    ASSERT_TRUE(x.ok());
    auto logits = session.run({*x});
    ASSERT_TRUE(logits.ok()) << logits.status().to_string();
    auto probs = runtime::softmax_last_axis((*logits)[0]);
    ASSERT_TRUE(probs.ok());
    auto want = runtime::top_k_last_axis(*probs, 3);
    ASSERT_TRUE(want.ok());
    const Tensor& classes = r.outputs.at("classes");
    const Tensor& scores = r.outputs.at("probs");
    ASSERT_EQ(classes.shape(), (Shape{1, 3}));
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(classes.data<int64_t>()[k], want->indices.data<int64_t>()[k]) << "image " << i << " rank " << k;
      EXPECT_NEAR(scores.data<float>()[k], want->scores.data<float>()[k], 1e-5f) << "image " << i;
    }
    EXPECT_GE(r.batch_size, 1);
  }
  // A corrupt file fails at the decode stage and never reaches the model.
  std::vector<uint8_t> broken = files[0];
  broken.resize(broken.size() / 2);
  InferResponse bad = (*p)->infer(request(99, "file", file_tensor(broken)));
  EXPECT_EQ(bad.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status.message().rfind("stage 'decode'", 0), 0u) << bad.status.message();
  const PipelineStats s = (*p)->stats();
  EXPECT_EQ(s.stages[2].name, "model");
  EXPECT_TRUE(s.stages[2].model);
  EXPECT_EQ(s.stages[2].processed, static_cast<uint64_t>(kImages));
  EXPECT_EQ(s.stages[0].failed, 1u);
  EXPECT_EQ(served->stats().succeeded, static_cast<uint64_t>(kImages));
}

// The model stage submits asynchronously: with one stage thread, 4 pipeline requests are in the
// model at once and run as one batch (the clock never moves, so only a full batch launches).
TEST(PipelineModel, BatchesAcrossPipelineRequests) {
  FakeClock clock;
  auto served = serve(tiny_classifier(), 4, 1'000'000, &clock);
  ASSERT_TRUE(served);
  PipelineBuilder b;
  b.input("x");
  b.add_model({.name = "model", .inputs = {"x"}, .outputs = {"logits"}, .instances = 1}, served);
  auto p = b.build();
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<std::future<InferResponse>> fs;
  for (int i = 0; i < 4; ++i) {
    Tensor x = Tensor::empty(DType::kFloat32, Shape{1, 3, 8, 8});
    for (int64_t j = 0; j < x.numel(); ++j) x.data<float>()[j] = static_cast<float>(i);
    fs.push_back((*p)->submit(request(static_cast<uint64_t>(i), "x", x)));
  }
  for (auto& f : fs) {
    InferResponse r = f.get();
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_EQ(r.batch_size, 4);
    EXPECT_EQ(r.outputs.at("logits").shape(), (Shape{1, kClasses}));
  }
  EXPECT_EQ(served->stats().batch_size_hist, (std::map<int, uint64_t>{{4, 1}}));
  (*p)->shutdown();  // a response is delivered before its stage slot is released
  EXPECT_EQ((*p)->stats().stages[0].in_flight, 0);
}

TEST(PipelineModel, ModelErrorsAndWiring) {
  auto served = serve(tiny_classifier(), 2, 0);
  ASSERT_TRUE(served);
  {
    PipelineBuilder b;
    b.input("x");
    ModelStageOptions mo;
    mo.model_outputs = {"logits"};
    b.add_model({.name = "m", .inputs = {"x"}, .outputs = {"y"}}, served, mo);
    EXPECT_TRUE(b.build().ok());
  }
  {
    PipelineBuilder b;
    b.input("img");
    b.add_model({.name = "m", .inputs = {"img"}, .outputs = {"logits"}}, served);
    expect_invalid(b, "stage 'm': the model has no input named 'img'");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_model({.name = "m", .inputs = {"x"}, .outputs = {"out"}}, served);
    expect_invalid(b, "no output named 'out'");
  }
  {
    PipelineBuilder b;
    b.input("x");
    b.add_model({.name = "m", .inputs = {"x"}, .outputs = {"logits"}}, nullptr);
    expect_invalid(b, "stage 'm': no model");
  }
  PipelineBuilder b;
  b.input("x");
  b.add_model({.name = "m", .inputs = {"x"}, .outputs = {"logits"}}, served);
  auto p = b.build();
  ASSERT_TRUE(p.ok());
  InferResponse r = (*p)->infer(request(1, "x", Tensor::empty(DType::kFloat32, Shape{1, 3, 4, 4})));
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status.message().rfind("stage 'm': ", 0), 0u) << r.status.message();
  EXPECT_TRUE((*p)->infer(request(2, "x", Tensor::empty(DType::kFloat32, Shape{1, 3, 8, 8}))).status.ok());
}

TEST(PipelineModel, ImageClassifierHelper) {
  auto served = serve(tiny_classifier(), 2, 500);
  ASSERT_TRUE(served);
  // The tiny model's input is fixed at 8x8: the helper crops to that.
  ImageClassifierOptions co;
  co.top_k.k = 2;
  auto p = build_image_classifier(served, co);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ((*p)->output_names(), (std::vector<std::string>{"classes", "scores"}));
  InferResponse r = (*p)->infer(request(1, "image", file_tensor(test_image(12, 20, 3, true))));
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.outputs.at("classes").shape(), (Shape{1, 2}));
  EXPECT_GE(r.outputs.at("scores").data<float>()[0], r.outputs.at("scores").data<float>()[1]);
  EXPECT_EQ(build_image_classifier(nullptr).status().code(), StatusCode::kInvalidArgument);
  co.model_input = "nope";
  EXPECT_EQ(build_image_classifier(served, co).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamline
