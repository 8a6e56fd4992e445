// The backend registry's names, and backends' optional capabilities (exec/backend.h): device
// memory shared by IPC handle.

#include "exec/backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace streamline {
namespace {

// Host bytes standing in for mapped device memory: what the base class adds is the range check.
class HostBackedMemory final : public exec::ImportedDeviceMemory {
 public:
  explicit HostBackedMemory(size_t bytes) : ImportedDeviceMemory(/*device=*/0, bytes), data_(bytes) {}

 protected:
  Status copy_to_host(size_t offset, void* dst, size_t n) const override {
    std::memcpy(dst, data_.data() + offset, n);
    return ok_status();
  }
  Status copy_from_host(size_t offset, const void* src, size_t n) override {
    std::memcpy(data_.data() + offset, src, n);
    return ok_status();
  }

 private:
  std::vector<char> data_;
};

TEST(Backends, KnownByNameAndTheDeviceGoesToTheBackendNamedAfterIt) {
  exec::BackendRegistry registry;
  EXPECT_EQ(registry.find("cpu").status().code(), StatusCode::kNotFound);
  EXPECT_NE(registry.find("cpu").status().message().find("registered: none"), std::string::npos);
  // The eager backend runs on the CPU too, but the device still means the backend named "cpu".
  ASSERT_TRUE(registry.add(exec::make_eager_backend()).ok());
  EXPECT_EQ(registry.find(ops::Device::kCpu).status().code(), StatusCode::kUnsupported);
  ASSERT_TRUE(registry.add(exec::make_cpu_backend()).ok());
  EXPECT_EQ(registry.names(), (std::vector<std::string>{"eager", "cpu"}));
  auto cpu = registry.find(ops::Device::kCpu);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->name(), "cpu");
  const Status twice = registry.add(exec::make_eager_backend());
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("'eager' is registered already"), std::string::npos) << twice.to_string();
  auto gpu = registry.find("gpu");
  EXPECT_EQ(gpu.status().code(), StatusCode::kNotFound);
  EXPECT_NE(gpu.status().message().find("registered: eager, cpu"), std::string::npos) << gpu.status().to_string();
}

TEST(Backends, TheCpuBackendHasNoIpcMemory) {
  auto cpu = exec::make_cpu_backend();
  auto mem = cpu->import_ipc_memory(std::string(64, '\0'), 0, 64);
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(mem.status().message().find("IPC handle"), std::string::npos) << mem.status().to_string();
}

TEST(Backends, ImportedMemoryCopiesOnlyInsideTheRegion) {
  HostBackedMemory mem(16);
  EXPECT_EQ(mem.size(), 16u);
  const char in[4] = {1, 2, 3, 4};
  ASSERT_TRUE(mem.write(12, in, 4).ok());
  char out[4] = {};
  ASSERT_TRUE(mem.read(12, out, 4).ok());
  EXPECT_EQ(std::memcmp(in, out, 4), 0);
  EXPECT_TRUE(mem.read(16, out, 0).ok());

  const Status past = mem.write(13, in, 4);
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.message().find("past the region"), std::string::npos) << past.to_string();
  EXPECT_EQ(mem.read(17, out, 0).code(), StatusCode::kInvalidArgument);
  // offset + n would wrap around size_t.
  EXPECT_EQ(mem.read(1, out, SIZE_MAX).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace streamline
