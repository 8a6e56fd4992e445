// Pieces of Triton's extensions that need no sockets: the shared memory registry on real POSIX
// shared memory objects, the split of a decoupled model's response into rows, the counters kept
// over reloads, and the log settings.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "core/logging.h"
#include "serve/grpc_infer.h"
#include "serve/repository.h"
#include "serve/shared_memory.h"

namespace streamline::serve {
namespace {

// A POSIX shared memory object of `bytes` bytes, removed at the end of the test.
class ShmObject {
 public:
  explicit ShmObject(size_t bytes) : key_("/sl_test_" + std::to_string(getpid()) + "_" + std::to_string(next_++)) {
    const int fd = shm_open(key_.c_str(), O_CREAT | O_RDWR | O_EXCL, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    data_ = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    bytes_ = bytes;
    close(fd);
  }
  ~ShmObject() {
    munmap(data_, bytes_);
    shm_unlink(key_.c_str());
  }
  const std::string& key() const { return key_; }
  char* data() { return data_; }

 private:
  static inline int next_ = 0;
  std::string key_;
  char* data_ = nullptr;
  size_t bytes_ = 0;
};

TEST(SharedMemory, InputsAreReadAndOutputsWrittenThroughRegions) {
  ShmObject obj(256);
  SharedMemoryRegistry shm;
  ASSERT_TRUE(shm.register_system("r", obj.key(), /*offset=*/64, /*byte_size=*/128).ok());
  float in[4] = {1, 2, 3, 4};
  std::memcpy(obj.data() + 64 + 16, in, sizeof in);
  InferRequest req;
  ASSERT_TRUE(shm.read_inputs({{"x", DType::kFloat32, {1, 4}, {"r", 16, 16}}}, &req).ok());
  EXPECT_EQ(req.inputs.at("x").data<float>()[3], 4.0f);
  Tensor out = Tensor::empty(DType::kFloat32, Shape{2});
  out.data<float>()[0] = 7;
  out.data<float>()[1] = 8;
  ASSERT_TRUE(shm.write_output("y", out, {"r", 0, 8}).ok());
  float back[2];
  std::memcpy(back, obj.data() + 64, sizeof back);
  EXPECT_EQ(back[1], 8.0f);
  auto st = shm.system_status("");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->size(), 1u);
  EXPECT_EQ((*st)[0].offset, 64u);
}

TEST(SharedMemory, BadRangesAndNamesAreRefusedWithTheirReason) {
  ShmObject obj(64);
  SharedMemoryRegistry shm;
  Status past = shm.register_system("r", obj.key(), 32, 64);
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.message().find("past the end"), std::string::npos) << past.message();
  EXPECT_EQ(shm.register_system("r", "/sl_no_such_object_here", 0, 8).code(), StatusCode::kNotFound);
  ASSERT_TRUE(shm.register_system("r", obj.key(), 0, 64).ok());
  EXPECT_EQ(shm.register_system("r", obj.key(), 0, 64).code(), StatusCode::kInvalidArgument);
  InferRequest req;
  // 2 x 4 floats = 32 bytes, but the request says 16.
  Status size = shm.read_inputs({{"x", DType::kFloat32, {2, 4}, {"r", 0, 16}}}, &req);
  EXPECT_EQ(size.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(size.message().find("does not match"), std::string::npos) << size.message();
  Status window = shm.read_inputs({{"x", DType::kFloat32, {4, 4}, {"r", 16, 64}}}, &req);
  EXPECT_EQ(window.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shm.system_status("other").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(shm.unregister_system("").ok());
  EXPECT_EQ(shm.window({"r", 0, 8}).status().code(), StatusCode::kNotFound);
  // Not a cudaIpcMemHandle_t (or no CUDA backend): refused, naming the region.
  Status cuda = shm.register_cuda("gpu_region", "short", 0, 8);
  EXPECT_FALSE(cuda.ok());
  EXPECT_NE(cuda.message().find("gpu_region"), std::string::npos) << cuda.message();
  EXPECT_EQ(shm.cuda_status("").value().size(), 0u);
}

TEST(SharedMemory, AWindowKeepsItsRegionMappedAfterUnregister) {
  ShmObject obj(64);
  SharedMemoryRegistry shm;
  ASSERT_TRUE(shm.register_system("r", obj.key(), 0, 64).ok());
  obj.data()[5] = 42;
  auto w = shm.window({"r", 0, 64});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(shm.unregister_system("r").ok());
  EXPECT_EQ(w->data[5], 42);  // still mapped while held
}

TEST(Decoupled, SplitRowsGivesOneResponsePerRow) {
  InferResponse r;
  r.id = 9;
  Tensor y = Tensor::empty(DType::kFloat32, Shape{3, 2});
  for (int i = 0; i < 6; ++i) y.data<float>()[i] = static_cast<float>(i);
  r.outputs["y"] = y;
  auto parts = split_rows(r);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[2].outputs.at("y").shape(), (Shape{1, 2}));
  EXPECT_EQ((*parts)[2].outputs.at("y").data<float>()[1], 5.0f);
  EXPECT_EQ((*parts)[1].id, 9u);
  r.outputs["z"] = Tensor::empty(DType::kFloat32, Shape{2, 2});
  EXPECT_EQ(split_rows(r).status().code(), StatusCode::kInvalidArgument);
}

TEST(Stats, AccumulateAddsCountersAndKeepsLivePercentiles) {
  ServingStats a, b;
  a.succeeded = 3;
  a.failures[StatusCode::kInvalidArgument] = 2;
  a.total_hist = LatencyHistogram({10, 20});
  a.total_hist.add(5);
  b.succeeded = 1;
  b.total.p50_us = 77;
  b.total_hist = LatencyHistogram({10, 20});
  b.total_hist.add(15);
  b.queued = 4;
  ServingStats sum;
  accumulate_stats(sum, a);
  accumulate_stats(sum, b);
  EXPECT_EQ(sum.succeeded, 4u);
  EXPECT_EQ(sum.failures[StatusCode::kInvalidArgument], 2u);
  EXPECT_EQ(sum.total_hist.counts, (std::vector<uint64_t>{1, 1, 0}));
  EXPECT_EQ(sum.total.p50_us, 77);
  EXPECT_EQ(sum.queued, 4);
}

TEST(Logging, SettingsSwitchLevelsAndRefuseBadValues) {
  const LogSettings saved = log_settings();
  LogSettings s = saved;
  s.info = true;
  s.verbose = 0;
  ASSERT_TRUE(set_log_settings(s).ok());
  EXPECT_TRUE(log_enabled(LogLevel::kInfo));
  EXPECT_FALSE(log_enabled(LogLevel::kDebug));
  s.verbose = 2;
  ASSERT_TRUE(set_log_settings(s).ok());
  EXPECT_TRUE(log_enabled(LogLevel::kDebug));
  s.format = "xml";
  EXPECT_EQ(set_log_settings(s).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(log_settings().verbose, 2);  // unchanged by the refused call
  ASSERT_TRUE(set_log_settings(saved).ok());
}

}  // namespace
}  // namespace streamline::serve
