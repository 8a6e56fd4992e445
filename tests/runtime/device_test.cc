// Devices and backends as the runtime sees them (runtime/device.h, runtime/device_ipc.h).

#include "runtime/device.h"

#include <gtest/gtest.h>

#include "runtime/device_ipc.h"

namespace streamline {
namespace {

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
