#pragma once
// InstancePool: N execution contexts over one shared Model; runs batches of requests.
//
//   InstancePool pool(model, {.instances = 2, .threads_per_instance = 1, .pin = false});
//   // on instance i's own thread:
//   SL_RETURN_IF_ERROR(pool.start_instance(i, &warm_shapes));   // pin, size the arena
//   pool.run_batch(i, requests, responses);                     // concat -> run -> split
//
// Each instance owns its ExecutionContext (arena, stream workers) and staging buffers for
// concatenated inputs, sized once and reused; the Model (weights, kernels, plans) is shared.
// Instance i must be used by one thread at a time (the scheduler gives each its own thread);
// different instances run concurrently. arena_bytes() may be called from any thread.

#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "exec/execution_context.h"
#include "runtime/device.h"
#include "streamline/serving.h"

namespace streamline::runtime {

// Most instances of one served model, and most workers of one pipeline stage.
inline constexpr int kMaxInstances = 1024;

struct InstancePoolOptions {
  // The serving options the pool reads: instances, and pin (instance i's threads on cores
  // [i*T, (i+1)*T) mod cores).
  ServingOptions serving;
  // Intra-op threads per instance (split evenly over the model's streams): serving's
  // threads_per_instance resolved against the machine (core::share_threads).
  int threads_per_instance = 1;
};

class InstancePool {
 public:
  InstancePool(std::shared_ptr<const Model> model, InstancePoolOptions options);
  InstancePool(const InstancePool&) = delete;
  InstancePool& operator=(const InstancePool&) = delete;

  int size() const { return static_cast<int>(instances_.size()); }
  // Cores instance i is pinned to (empty when not pinning).
  std::vector<int> cores_of(int instance) const;

  // Call first on instance i's thread: pins it, then, if `warm_shapes` is given, runs those
  // input shapes once on zeros so the arena is sized before serving.
  [[nodiscard]] Status start_instance(int instance, const std::vector<Shape>* warm_shapes);

  // Runs `requests` as one batch on instance i: inputs concatenated along dim 0 (a single
  // request runs on its own tensors), one run, outputs split back per request. Every response
  // gets a status; on an error all of them get it (the scheduler then runs each one alone, so
  // that the request at fault is found). Requests must have passed validation and share their
  // non-batch dims.
  void run_batch(int instance, std::span<const InferRequest* const> requests, std::span<InferResponse> responses);

  size_t arena_bytes(int instance) const;

  // Intra-op threads every instance runs its next batches with (>= 1; at most the threads the
  // Model was planned for, whose workspaces are sized for them). Any thread, any time: a batch
  // running keeps the count it started with.
  void set_threads(int threads);
  int threads() const { return threads_.load(std::memory_order_relaxed); }

 private:
  struct Instance {
    explicit Instance(exec::ContextOptions co) : options(std::move(co)) {}
    exec::ContextOptions options;                     // options.device: the GPU a CUDA model's instance runs on
    int index = 0;                                    // its place in the pool
    std::unique_ptr<exec::ExecutionContext> context;  // made on the instance's first run
    std::vector<Tensor> staging;                      // per model input: concatenation buffer, grown never shrunk
    std::vector<Tensor> inputs;                       // this run's inputs (reused)
    std::vector<Shape> shapes;                        // this run's input shapes (reused)
    std::vector<Tensor> outputs;                      // views into the arena until the next run
    std::atomic<size_t> arena{0};
  };
  Status run(Instance& in, std::span<const InferRequest* const> requests, std::span<InferResponse> responses);
  // Run options for `threads` intra-op threads per instance.
  exec::RunOptions run_options(int threads) const;
  // The instance's context, made on first use (a missing GPU is reported then, per request).
  Result<exec::ExecutionContext*> context_of(Instance& in) const;

  std::shared_ptr<const Model> model_;
  InstancePoolOptions options_;
  int streams_ = 1;
  std::atomic<int> threads_{1};  // per instance, for the next batch
  std::vector<std::unique_ptr<Instance>> instances_;
};

}  // namespace streamline::runtime
