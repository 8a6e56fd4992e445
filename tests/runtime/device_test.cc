// Devices and backends as the runtime sees them (runtime/device.h, runtime/device_ipc.h).

#include "runtime/device.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/device_ipc.h"

namespace streamline {
namespace {

// ctest runs each test in its own process, so nothing has made a model or looked a backend up yet.
TEST(Backends, RegisteredAtStartUpBeforeAnyModel) {
  ASSERT_TRUE(runtime::init_backends().ok());
  std::vector<std::string> expected{"cpu", "eager"};
  if (runtime::cuda_built()) expected.push_back("cuda");
  EXPECT_EQ(runtime::backends().names(), expected);
  // Once: a second call registers nothing more.
  ASSERT_TRUE(runtime::init_backends().ok());
  EXPECT_EQ(runtime::backends().names(), expected);

  auto cpu = runtime::backend_for(ops::Device::kCpu);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  EXPECT_EQ((*cpu)->name(), "cpu");
  auto eager = runtime::backends().find("eager");
  ASSERT_TRUE(eager.ok()) << eager.status().to_string();
  auto weights = (*eager)->attach_model();
  ASSERT_TRUE(weights.ok());
  auto ctx = (*weights)->make_context({});
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  EXPECT_EQ((*ctx)->device(), "eager");
}

TEST(Backends, AnUnknownNameListsTheRegisteredOnes) {
  ASSERT_TRUE(runtime::init_backends().ok());
  auto tpu = runtime::backends().find("tpu");
  ASSERT_FALSE(tpu.ok());
  EXPECT_EQ(tpu.status().code(), StatusCode::kNotFound);
  EXPECT_NE(tpu.status().message().find("no backend named 'tpu'"), std::string::npos) << tpu.status().to_string();
  EXPECT_NE(tpu.status().message().find("registered: cpu, eager"), std::string::npos) << tpu.status().to_string();
}

TEST(DeviceIpc, OpeningAHandleIsAClearErrorWithoutAGpu) {
  // A short handle: the CUDA backend names the size; a build without it says it has none.
  auto shortened = runtime::DeviceIpcMemory::open("short", 0, 64);
  ASSERT_FALSE(shortened.ok());
  if (runtime::cuda_built()) {
    EXPECT_EQ(shortened.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(shortened.status().message().find("raw_handle has 5 bytes"), std::string::npos)
        << shortened.status().to_string();
  } else {
    EXPECT_EQ(shortened.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(shortened.status().message().find("needs the CUDA backend"), std::string::npos)
        << shortened.status().to_string();
  }
  // A zero handle: no GPU here, or one whose driver refuses it; both Unavailable.
  auto zero = runtime::DeviceIpcMemory::open(std::string(64, '\0'), 0, 64);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), runtime::cuda_built() ? StatusCode::kUnavailable : StatusCode::kUnsupported)
      << zero.status().to_string();
}

}  // namespace
}  // namespace streamline
