// Triton's CUDA shared memory through the server's registry: another process allocates GPU memory
// and shares it by its IPC handle (CUDA refuses to open a handle in the process that made it); the
// registry reads an input from it and writes an output into it, which that process then reads back.

#include "serve/shared_memory.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "cuda_test_util.h"

namespace streamline::serve {
namespace {

constexpr float kInput[4] = {1.5f, -2.0f, 3.25f, 8.0f};
constexpr float kOutput[4] = {10.0f, 20.0f, 30.0f, 40.0f};

// The exporting process: 64 bytes on GPU 0, kInput at offset 0; sends the handle, waits for the
// go-ahead, checks kOutput at offset 32. Exit code 0 when it saw kOutput.
[[noreturn]] void exporter(int to_parent, int from_parent) {
  void* d = nullptr;
  cudaIpcMemHandle_t h{};
  if (cudaMalloc(&d, 64) != cudaSuccess ||
      cudaMemcpy(d, kInput, sizeof kInput, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaIpcGetMemHandle(&h, d) != cudaSuccess) {
    std::memset(&h, 0, sizeof h);
    (void)!write(to_parent, &h, sizeof h);
    _exit(2);
  }
  (void)!write(to_parent, &h, sizeof h);
  char go = 0;
  if (read(from_parent, &go, 1) != 1) _exit(3);
  float back[4] = {};
  if (cudaMemcpy(back, static_cast<char*>(d) + 32, sizeof back, cudaMemcpyDeviceToHost) != cudaSuccess) _exit(4);
  _exit(std::memcmp(back, kOutput, sizeof back) == 0 ? 0 : 5);
}

TEST(GpuSharedMemory, InputsAndOutputsThroughAnotherProcessAllocation) {
  // Fork before this process touches CUDA: the child initialises its own context.
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) exporter(up[1], down[0]);
  cudaIpcMemHandle_t h{};
  ASSERT_EQ(read(up[0], &h, sizeof h), static_cast<ssize_t>(sizeof h));
  auto finish = [&](char go) {
    (void)!write(down[1], &go, 1);
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const Status gpu = exec::cuda::require_device();
  if (!gpu.ok()) {
    finish(0);
    GTEST_SKIP() << "needs a CUDA GPU: " << gpu.message();
  }

  SharedMemoryRegistry shm;
  ASSERT_TRUE(shm.register_cuda("gpu", std::string(reinterpret_cast<const char*>(&h), sizeof h), 0, 64).ok());
  auto st = shm.cuda_status("");
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->size(), 1u);
  EXPECT_EQ((*st)[0].byte_size, 64u);
  InferRequest req;
  ASSERT_TRUE(shm.read_inputs({{"x", DType::kFloat32, {4}, {"gpu", 0, 16}}}, &req).ok());
  EXPECT_EQ(std::memcmp(req.inputs.at("x").raw(), kInput, sizeof kInput), 0);
  Tensor y = Tensor::empty(DType::kFloat32, Shape{4});
  std::memcpy(y.raw(), kOutput, sizeof kOutput);
  ASSERT_TRUE(shm.write_output("y", y, {"gpu", 32, 16}).ok());
  // Past the region: refused with the reason.
  Status past = shm.write_output("y", y, {"gpu", 56, 16});
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument) << past.message();
  ASSERT_TRUE(shm.unregister_cuda("gpu").ok());
  EXPECT_EQ(finish(1), 0) << "the exporting process did not read the output back";
}

}  // namespace
}  // namespace streamline::serve
