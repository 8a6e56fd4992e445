// Triton's trace settings and sampling (TraceManager) and the classification extension's top-k,
// without sockets: what the settings API accepts and refuses, which requests are traced (rate,
// count, per-model levels), the W3C trace context, the Chrome trace-event files written per
// log_frequency, and classify()'s values, order, labels and BYTES layout.

#include "serve/trace.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "serve/classification.h"

namespace streamline::serve {
namespace {

namespace fs = std::filesystem;
using Changes = std::map<std::string, std::optional<std::vector<std::string>>>;

Changes set(std::initializer_list<std::pair<const std::string, std::vector<std::string>>> kv) {
  Changes c;
  for (const auto& [k, v] : kv) c[k] = v;
  return c;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A finished run of one step on each of two streams, inside [base, base + 100 us].
InferResponse traced_response(int64_t base) {
  InferResponse r;
  r.status = ok_status();
  r.outputs["y"] = Tensor::from_vector<float>(Shape{1, 2}, {0.5f, 1.5f});
  auto run = std::make_shared<RunTrace>();
  run->rows = 1;
  run->requests = 1;
  run->begin_ns = base + 10'000;
  run->inputs_done_ns = base + 20'000;
  run->run_done_ns = base + 80'000;
  run->end_ns = base + 90'000;
  run->steps = {{"matmul0", "MatMul", 0, base + 25'000, base + 50'000},
                {"relu0", "Relu", 1, base + 55'000, base + 75'000}};
  r.trace = run;
  return r;
}

class TraceManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sl_trace_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TraceManagerTest, DefaultsAreTritonsAndBadSettingsAreRefusedWithoutChangingAnything) {
  TraceManager t;
  auto s = t.settings("");
  EXPECT_EQ(s["trace_level"], std::vector<std::string>{"OFF"});
  EXPECT_EQ(s["trace_rate"], std::vector<std::string>{"1000"});
  EXPECT_EQ(s["trace_count"], std::vector<std::string>{"-1"});
  EXPECT_EQ(s["log_frequency"], std::vector<std::string>{"0"});
  EXPECT_EQ(t.start("m", ""), nullptr);  // OFF: nothing is traced

  for (const auto& [changes, needle] :
       std::vector<std::pair<Changes, std::string>>{{set({{"trace_level", {"SOMETIMES"}}}), "SOMETIMES"},
                                                    {set({{"trace_rate", {"0"}}}), "trace_rate"},
                                                    {set({{"trace_rate", {"12x"}}}), "12x"},
                                                    {set({{"trace_count", {"-2"}}}), "trace_count"},
                                                    {set({{"log_frequency", {"1", "2"}}}), "one value"},
                                                    {set({{"colour", {"red"}}}), "colour"},
                                                    {set({{"trace_mode", {"opentelemetry"}}}), "trace_mode"},
                                                    {Changes{{"trace_rate", std::nullopt}}, "cannot be cleared"}}) {
    // A valid change beside the bad one is not applied either.
    Changes with = changes;
    with["trace_level"] = with.count("trace_level") ? with["trace_level"] : std::vector<std::string>{"TIMESTAMPS"};
    Status st = t.update("", with);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << needle;
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    EXPECT_EQ(t.settings("")["trace_level"], std::vector<std::string>{"OFF"}) << needle;
  }
}

TEST_F(TraceManagerTest, RateCountAndModelSettingsPickTheTracedRequests) {
  TraceManager t;
  ASSERT_TRUE(t.update("", set({{"trace_level", {"TIMESTAMPS"}}, {"trace_rate", {"3"}}})).ok());
  int traced = 0;
  for (int i = 0; i < 9; ++i) traced += t.start("a", "") != nullptr;
  EXPECT_EQ(traced, 3);  // one request in every three

  // A model's own level wins over the global one until cleared.
  ASSERT_TRUE(t.update("b", set({{"trace_level", {"OFF"}}})).ok());
  EXPECT_EQ(t.settings("b")["trace_level"], std::vector<std::string>{"OFF"});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t.start("b", ""), nullptr);
  ASSERT_TRUE(t.update("b", Changes{{"trace_level", std::nullopt}}).ok());
  EXPECT_EQ(t.settings("b")["trace_level"], std::vector<std::string>{"TIMESTAMPS"});

  // trace_count: that many more traces, then none, and the setting shows what is left.
  ASSERT_TRUE(t.update("", set({{"trace_rate", {"1"}}, {"trace_count", {"2"}}})).ok());
  traced = 0;
  for (int i = 0; i < 5; ++i) traced += t.start("a", "") != nullptr;
  EXPECT_EQ(traced, 2);
  EXPECT_EQ(t.settings("")["trace_count"], std::vector<std::string>{"0"});
}

TEST_F(TraceManagerTest, AValidTraceparentGivesTheTraceItsIdAndAnInvalidOneIsReplaced) {
  TraceManager t;
  ASSERT_TRUE(t.update("", set({{"trace_level", {"TIMESTAMPS"}}, {"trace_rate", {"1"}}})).ok());
  auto a = t.start("m", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(a->parent_id, "00f067aa0ba902b7");
  EXPECT_EQ(a->span_id.size(), 16u);
  EXPECT_NE(a->span_id, a->parent_id);
  EXPECT_EQ(a->traceparent(), "00-4bf92f3577b34da6a3ce929d0e0e4736-" + a->span_id + "-01");
  for (const char* bad : {"00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // all-zero trace id
                          "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper case
                          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "garbage"}) {
    auto b = t.start("m", bad);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->trace_id.size(), 32u) << bad;
    EXPECT_NE(b->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736") << bad;
    EXPECT_NE(b->trace_id, std::string(32, '0')) << bad;
    EXPECT_TRUE(b->parent_id.empty()) << bad;
  }
}

TEST_F(TraceManagerTest, TracesGoToAFilePerLogFrequencyAsChromeTraceEvents) {
  TraceManager t;
  const fs::path file = dir_ / "t.json";
  ASSERT_TRUE(t.update("", set({{"trace_level", {"TIMESTAMPS", "TENSORS"}},
                                {"trace_rate", {"1"}},
                                {"log_frequency", {"2"}},
                                {"trace_file", {file.string()}}}))
                  .ok());
  for (int i = 0; i < 5; ++i) {
    auto a = t.start("m", "");
    ASSERT_NE(a, nullptr);
    a->receive_ns -= 1'000'000;  // the request arrived before the run below
    a->note_inputs({{"x", Tensor::from_vector<float>(Shape{1, 3}, {1.f, 2.f, 3.f})}});
    a->note_submit(static_cast<uint64_t>(i));
    t.finish(*a, traced_response(a->receive_ns), "1");
  }
  // Five traces, two a file: files .0 and .1 so far; the fifth waits for the next one.
  EXPECT_TRUE(fs::exists(dir_ / "t.json.0"));
  EXPECT_TRUE(fs::exists(dir_ / "t.json.1"));
  EXPECT_FALSE(fs::exists(dir_ / "t.json.2"));
  EXPECT_EQ(t.traces_taken(), 5u);

  rapidjson::Document doc;
  const std::string text = read_file(dir_ / "t.json.0");
  ASSERT_FALSE(doc.Parse(text.c_str()).HasParseError()) << text;
  int requests = 0, steps = 0;
  std::set<std::string> tracks;
  for (const auto& e : doc["traceEvents"].GetArray()) {
    const std::string ph = e["ph"].GetString(), name = e["name"].GetString();
    if (ph == "M" && name == "thread_name") tracks.insert(e["args"]["name"].GetString());
    if (ph != "X") continue;
    if (name == "request m") {
      ++requests;
      EXPECT_EQ(e["args"]["inputs"]["x"]["shape"][1].GetInt(), 3);
      EXPECT_EQ(e["args"]["outputs"]["y"]["values"][1].GetDouble(), 1.5);
    }
    if (std::string(e["cat"].GetString()) == "step") ++steps;
  }
  EXPECT_EQ(requests, 2);
  EXPECT_EQ(steps, 4);  // two steps per trace
  EXPECT_TRUE(tracks.count("request") && tracks.count("stream 0") && tracks.count("stream 1")) << text;
  // The dashboard's copy holds only the last trace.
  EXPECT_NE(t.last_trace_json().find("\"trace 5 m"), std::string::npos);
  EXPECT_EQ(t.last_trace_json().find("\"trace 4 m"), std::string::npos);
}

TEST_F(TraceManagerTest, LogFrequencyZeroKeepsTracesForOneFileWrittenAtFlush) {
  const fs::path file = dir_ / "all.json";
  {
    TraceManager t;
    ASSERT_TRUE(
        t.update("", set({{"trace_level", {"TIMESTAMPS"}}, {"trace_rate", {"1"}}, {"trace_file", {file.string()}}}))
            .ok());
    for (int i = 0; i < 3; ++i) {
      auto a = t.start("m", "");
      ASSERT_NE(a, nullptr);
      t.finish(*a, traced_response(a->receive_ns), "1");
    }
    EXPECT_FALSE(fs::exists(file));
  }  // the destructor flushes
  const std::string text = read_file(file);
  size_t n = 0;
  for (size_t at = text.find("\"request m\""); at != std::string::npos; at = text.find("\"request m\"", at + 1)) ++n;
  EXPECT_EQ(n, 3u) << text;
}

TEST_F(TraceManagerTest, ServerEventsAreKeptAndWrittenBesideATracedModelsTraces) {
  const fs::path file = dir_ / "events.json";
  {
    TraceManager t;
    t.note_server_event("m", "controller instances up", {{"reason", "p99 over: +1 instance"}});
    rapidjson::Document d;
    d.Parse(t.server_events_json().c_str());
    ASSERT_TRUE(d.IsObject() && d["traceEvents"].IsArray());
    const auto& ev = d["traceEvents"];
    ASSERT_EQ(ev.Size(), 2u);  // the track's name, then the event
    EXPECT_STREQ(ev[1]["ph"].GetString(), "i");
    EXPECT_STREQ(ev[1]["name"].GetString(), "controller instances up");
    EXPECT_STREQ(ev[1]["args"]["model"].GetString(), "m");
    EXPECT_STREQ(ev[1]["args"]["reason"].GetString(), "p99 over: +1 instance");
    for (size_t i = 0; i < TraceManager::kServerEventsKept + 5; ++i) t.note_server_event("m", "e", {});
    d.Parse(t.server_events_json().c_str());
    EXPECT_EQ(d["traceEvents"].Size(), TraceManager::kServerEventsKept + 1);
    // Tracing on with a file: the events go there too, with the traces.
    ASSERT_TRUE(
        t.update("", set({{"trace_level", {"TIMESTAMPS"}}, {"trace_rate", {"1"}}, {"trace_file", {file.string()}}}))
            .ok());
    t.note_server_event("m", "controller queue_delay down", {{"reason", "idle"}});
  }  // the destructor flushes
  const std::string text = read_file(file);
  EXPECT_NE(text.find("\"controller queue_delay down\""), std::string::npos) << text;
  EXPECT_EQ(text.find("\"controller instances up\""), std::string::npos) << "noted before tracing was on";
}

TEST(Classification, TopKPerRowWithLabelsAndTiesByIndex) {
  const Tensor t = Tensor::from_vector<float>(Shape{2, 4}, {0.1f, 0.9f, 0.5f, 0.9f, -1.f, -3.f, -2.f, 4.f});
  const std::vector<std::string> labels = {"cat", "dog", "owl", "yak"};
  auto c = classify(t, 2, /*batched=*/true, &labels);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(c->values,
            (std::vector<std::string>{"0.900000:1:dog", "0.900000:3:yak", "4.000000:3:yak", "-1.000000:0:cat"}));
  // Not batched: the whole tensor is one row; k past the class count is cut to it.
  auto all = classify(Tensor::from_vector<int32_t>(Shape{3}, {7, 9, 8}), 10, false, nullptr);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(all->values, (std::vector<std::string>{"9.000000:1", "8.000000:2", "7.000000:0"}));
}

TEST(Classification, RefusesAZeroCountAndNonNumericOutputs) {
  const Tensor t = Tensor::from_vector<float>(Shape{1, 2}, {1.f, 2.f});
  EXPECT_EQ(classify(t, 0, true, nullptr).status().code(), StatusCode::kInvalidArgument);
  Tensor b = Tensor::empty(DType::kBool, Shape{1, 2});
  Status s = classify(b, 1, true, nullptr).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bool"), std::string::npos) << s.message();
}

TEST(Classification, BytesAreLengthPrefixedLittleEndian) {
  const std::string raw = serialize_bytes({"ab", "", "xyz"});
  EXPECT_EQ(raw, std::string("\x02\0\0\0ab\0\0\0\0\x03\0\0\0xyz", 4 + 2 + 4 + 4 + 3));
}

}  // namespace
}  // namespace streamline::serve
