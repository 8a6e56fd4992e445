#pragma once
// The CUDA executor: runs an ExecutionPlan made for Device::kCuda on CUDA streams and events.
//
//   auto weights = std::make_shared<exec::cuda::DeviceConstants>(/*device=*/0);   // one per model and GPU
//   SL_ASSIGN_OR_RETURN(auto ctx, exec::cuda::CudaExecutionContext::create(weights, {}));
//   std::vector<Tensor> outs;                                  // host tensors
//   SL_RETURN_IF_ERROR(ctx->run(*plan, inputs, &outs, {}));    // inputs are host tensors too
//
// One run, in order:
//   1. the inputs go host -> pinned staging -> device on the context's copy stream;
//   2. compute stream 0 waits for the copy; every other stream of the plan forks from stream 0;
//   3. each step is enqueued on its plan stream after cudaStreamWaitEvent on its wait events, and
//      records its events after it (the plan's events map one to one onto CUDA events);
//   4. the streams join stream 0, the copy stream waits for it and copies the outputs back; the run
//      returns when they are on the host.
// CUDA graphs: after `graph_warmup_runs` direct runs of a plan, steps 2 to 4's compute part is
// captured once (cudaStreamBeginCapture on stream 0, the other streams joining through the fork and
// join events) and replayed from then on with one cudaGraphLaunch. Capture needs every address
// fixed, which holds: the arena, the input buffers and the constants do not move while the binding
// lives. When capture fails (a kernel that synchronises, a library that allocates), the reason is
// logged once and the plan keeps running without a graph.
//
// Memory: one device block per context holds the plan's arena (activations and workspaces at the
// planner's offsets) followed by the input buffers; it grows to the largest plan run, never per
// run. Weights and folded constants live once per model and device in DeviceConstants, shared by
// every context. Nothing is allocated on the device per run.
//
// Thread-safety: a context runs one plan at a time (one per concurrent request, like the CPU
// ExecutionContext); contexts may run concurrently on one GPU, each on its own streams, so the
// copies of one overlap the compute of another. DeviceConstants is thread-safe.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "exec/cuda/memory.h"
#include "exec/cuda/stream.h"
#include "exec/execution_context.h"
#include "plan/execution_plan.h"

namespace streamline::exec::cuda {

// Device copies of host constants (weights, folded values), uploaded once each and kept until
// destruction. Keyed by the host tensor's data pointer, so every plan of a model shares them.
class DeviceConstants {
 public:
  explicit DeviceConstants(int device = 0) : device_(device) {}
  ~DeviceConstants();
  DeviceConstants(const DeviceConstants&) = delete;
  DeviceConstants& operator=(const DeviceConstants&) = delete;

  // The device pointer holding `host`'s bytes (uploaded with a blocking copy on first request).
  // Thread-safe. ResourceExhausted when the device is full.
  Result<void*> get(const Tensor& host, const std::string& name);
  int device() const { return device_; }
  size_t bytes() const;    // device bytes held
  size_t uploads() const;  // constants uploaded so far

 private:
  int device_;
  mutable std::mutex mu_;
  std::unordered_map<const void*, void*> by_host_;
  std::vector<void*> blocks_;
  size_t bytes_ = 0;
};

struct CudaContextOptions {
  // What every backend's context is made with: device (the CUDA ordinal; the plan's constants must
  // be on it too) and cuda_graphs (capture each plan after its warm-up runs and replay it).
  ContextOptions context;
  int graph_warmup_runs = 1;         // direct runs of a plan before it is captured (lazy library setup)
  bool high_priority_copies = true;  // the copy stream gets the device's highest priority
};

// What a context has done so far (for tests, logs and `bench`).
struct CudaContextStats {
  uint64_t runs = 0;
  uint64_t graph_launches = 0;  // runs replayed from a captured graph
  uint64_t graph_captures = 0;  // plans captured
  uint64_t graph_failures = 0;  // plans whose capture failed (they run directly)
  size_t device_bytes = 0;      // the context's device block (arena + inputs)
};

class CudaExecutionContext final : public ExecutionContext {
 public:
  // Makes the streams (one copy stream now, compute streams as plans need them) on
  // options.device. Unavailable without a usable device. `constants` must be for the same device.
  static Result<std::unique_ptr<CudaExecutionContext>> create(std::shared_ptr<DeviceConstants> constants,
                                                              CudaContextOptions options);
  ~CudaExecutionContext();
  CudaExecutionContext(const CudaExecutionContext&) = delete;
  CudaExecutionContext& operator=(const CudaExecutionContext&) = delete;

  // Runs `plan` once. `inputs` are host tensors in plan.input_names order, `outputs` receives host
  // tensors in plan.output_names order: owned copies, or (options.copy_outputs false) views into
  // the context valid until its next run. Errors name the failing node; a device fault that leaves
  // the context unusable is reported as Internal and every later run fails with it.
  [[nodiscard]] Status run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs,
                           std::vector<Tensor>* outputs, const RunOptions& options) override;
  // InvalidArgument: eager plans run on the CPU only.
  [[nodiscard]] Status run_values(const plan::ExecutionPlan& plan, std::span<const AnyValue> inputs,
                                  std::vector<AnyValue>* outputs, const RunOptions& options) override;
  size_t arena_bytes() const override { return device_bytes(); }
  int num_streams() const override { return static_cast<int>(streams_.size()); }
  std::string device() const override { return "cuda:" + std::to_string(options_.context.device); }

  const CudaContextStats& stats() const { return stats_; }
  size_t device_bytes() const { return block_ ? block_->capacity() : 0; }

 private:
  struct Binding;
  CudaExecutionContext(std::shared_ptr<DeviceConstants> constants, CudaContextOptions options);
  Result<Binding*> bind(const plan::ExecutionPlan& plan);
  Status ensure_streams(int count);
  // `timing`: 2 timing events per step (begin, end), or null.
  Status enqueue_steps(const plan::ExecutionPlan& plan, Binding& b, const std::vector<cudaEvent_t>* timing = nullptr);
  Status report_step_times(const plan::ExecutionPlan& plan, Binding& b, ExecObserver& observer, int64_t host_start_ns);
  Status capture(const plan::ExecutionPlan& plan, Binding& b);

  std::shared_ptr<DeviceConstants> constants_;
  CudaContextOptions options_;
  CudaStream copy_stream_;
  std::vector<CudaStream> streams_;  // compute streams; stream 0 is the plan's stream 0
  std::unique_ptr<EventPool> events_;
  std::unique_ptr<DeviceArena> block_;
  PinnedHostPool pinned_;
  std::unordered_map<uint64_t, std::unique_ptr<Binding>> bindings_;  // by plan id
  CudaContextStats stats_;
  Status broken_;  // set after a device fault: the context cannot be trusted any more
};

}  // namespace streamline::exec::cuda
