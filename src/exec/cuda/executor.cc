// The CUDA executor; see executor.h for the order of one run and for CUDA graphs.

#include "exec/cuda/executor.h"

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "core/cuda/cuda_status.h"
#include "core/logging.h"
#include "exec/run_outputs.h"

namespace streamline::exec::cuda {
namespace {

size_t align_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// DeviceConstants

DeviceConstants::~DeviceConstants() {
  for (void* p : blocks_) (void)cudaFree(p);
}

Result<void*> DeviceConstants::get(const Tensor& host, const std::string& name) {
  if (host.nbytes() == 0 || host.raw() == nullptr) return static_cast<void*>(nullptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_host_.find(host.raw());
  if (it != by_host_.end()) return it->second;
  SL_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "constant '" + name + "'");
  void* dev = nullptr;
  SL_CUDA_RETURN_IF_ERROR(cudaMalloc(&dev, host.nbytes()),
                          "constant '" + name + "' (" + std::to_string(host.nbytes()) + " bytes)");
  blocks_.push_back(dev);
  SL_CUDA_RETURN_IF_ERROR(cudaMemcpy(dev, host.raw(), host.nbytes(), cudaMemcpyHostToDevice),
                          "uploading constant '" + name + "'");
  by_host_.emplace(host.raw(), dev);
  bytes_ += host.nbytes();
  return dev;
}

size_t DeviceConstants::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t DeviceConstants::uploads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_host_.size();
}

// ---------------------------------------------------------------------------------------------
// Bindings: one plan's tensors at fixed device addresses in this context.

struct CudaExecutionContext::Binding {
  enum class Graph { kNotYet, kCaptured, kFailed };
  void* block_base = nullptr;  // the device block the addresses below point into
  std::vector<std::vector<Tensor>> step_inputs, step_outputs;
  std::vector<void*> input_device;          // per plan input
  std::vector<PinnedBlock> input_staging;   // per plan input
  std::vector<PinnedBlock> output_staging;  // per plan output (arena outputs only)
  std::vector<PooledEvent> plan_events;     // the plan's events, by id
  PooledEvent inputs_ready, fork, compute_done;
  std::vector<PooledEvent> join;  // per stream s >= 1
  Graph graph = Graph::kNotYet;
  cudaGraphExec_t graph_exec = nullptr;
  uint64_t runs = 0;
  // Traced runs: a timing event before and after every step, and one at the start (made on the
  // first traced run; timing events cost more to record than the pooled ones).
  std::vector<cudaEvent_t> timing;
  cudaEvent_t timing_start = nullptr;

  ~Binding() {
    if (graph_exec != nullptr) (void)cudaGraphExecDestroy(graph_exec);
    for (cudaEvent_t e : timing) (void)cudaEventDestroy(e);
    if (timing_start != nullptr) (void)cudaEventDestroy(timing_start);
  }
};

CudaExecutionContext::CudaExecutionContext(std::shared_ptr<DeviceConstants> constants, CudaContextOptions options)
    : constants_(std::move(constants)), options_(options) {}

CudaExecutionContext::~CudaExecutionContext() {
  // Nothing may still run on the streams when the block and the graphs go away.
  if (copy_stream_.get() != nullptr) (void)cudaStreamSynchronize(copy_stream_.get());
  for (auto& s : streams_) (void)cudaStreamSynchronize(s.get());
  bindings_.clear();
}

Result<std::unique_ptr<CudaExecutionContext>> CudaExecutionContext::create(std::shared_ptr<DeviceConstants> constants,
                                                                           CudaContextOptions options) {
  if (!constants) return invalid_argument("CUDA context: no constant store given");
  if (constants->device() != options.context.device)
    return invalid_argument("CUDA context on device " + std::to_string(options.context.device) +
                            " given the constants of device " + std::to_string(constants->device()));
  int count = 0;
  SL_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count), "looking for CUDA devices");
  if (options.context.device < 0 || options.context.device >= count)
    return invalid_argument("no CUDA device " + std::to_string(options.context.device) + " (" + std::to_string(count) +
                            " visible)");
  SL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.context.device),
                          "selecting device " + std::to_string(options.context.device));
  std::unique_ptr<CudaExecutionContext> ctx(new CudaExecutionContext(std::move(constants), options));
  SL_ASSIGN_OR_RETURN(ctx->copy_stream_, CudaStream::create(options.high_priority_copies ? StreamPriority::kHigh
                                                                                         : StreamPriority::kNormal));
  SL_ASSIGN_OR_RETURN(ctx->events_, EventPool::create(16));
  SL_RETURN_IF_ERROR(ctx->ensure_streams(1));
  return ctx;
}

Status CudaExecutionContext::ensure_streams(int count) {
  while (static_cast<int>(streams_.size()) < count) {
    SL_ASSIGN_OR_RETURN(CudaStream s, CudaStream::create(StreamPriority::kNormal));
    streams_.push_back(std::move(s));
  }
  return ok_status();
}

Result<CudaExecutionContext::Binding*> CudaExecutionContext::bind(const plan::ExecutionPlan& plan) {
  if (plan.device != ops::Device::kCuda)
    return invalid_argument("the CUDA executor runs plans made for the CUDA device, not for " +
                            std::string(ops::device_name(plan.device)));
  // Pass 1: the device block, grown (with every binding dropped) when this plan needs more.
  size_t need = align_up(plan.arena_bytes, kDeviceAlignment);
  for (int slot : plan.input_slots) need += align_up(plan.slots[static_cast<size_t>(slot)].bytes, kDeviceAlignment);
  need = std::max<size_t>(need, kDeviceAlignment);
  if (!block_ || block_->capacity() < need) {
    for (auto& s : streams_) SL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s.get()), "growing the device arena");
    SL_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_stream_.get()), "growing the device arena");
    bindings_.clear();
    block_.reset();
    SL_ASSIGN_OR_RETURN(block_, DeviceArena::create(need, options_.context.device));
    stats_.device_bytes = block_->capacity();
  }
  auto it = bindings_.find(plan.id);
  if (it != bindings_.end() && it->second->block_base == block_->base()) return it->second.get();

  auto b = std::make_unique<Binding>();
  b->block_base = block_->base();
  char* base = static_cast<char*>(block_->base());
  size_t at = align_up(plan.arena_bytes, kDeviceAlignment);
  for (int slot : plan.input_slots) {
    const plan::TensorSlot& s = plan.slots[static_cast<size_t>(slot)];
    b->input_device.push_back(base + at);
    at += align_up(s.bytes, kDeviceAlignment);
    SL_ASSIGN_OR_RETURN(PinnedBlock pb, pinned_.acquire(std::max<size_t>(s.bytes, 1)));
    b->input_staging.push_back(std::move(pb));
  }
  // Pass 2: every slot as a device tensor; constants come from the shared store.
  std::vector<Tensor> slot_tensor(plan.slots.size());
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const plan::TensorSlot& s = plan.slots[i];
    void* p = nullptr;
    switch (s.kind) {
      case plan::SlotKind::kArena:
        p = base + s.offset;
        break;
      case plan::SlotKind::kInput:
        p = b->input_device[static_cast<size_t>(s.input_index)];
        break;
      case plan::SlotKind::kConstant: {
        SL_ASSIGN_OR_RETURN(p, constants_->get(plan.constants[static_cast<size_t>(s.constant)], s.name));
        break;
      }
    }
    slot_tensor[i] = Tensor::view(s.dtype, s.shape, p, s.layout);
  }
  for (const plan::Step& st : plan.steps) {
    std::vector<Tensor> ins, outs;
    for (int sl : st.inputs) ins.push_back(sl < 0 ? Tensor() : slot_tensor[static_cast<size_t>(sl)]);
    for (int sl : st.outputs) outs.push_back(sl < 0 ? Tensor() : slot_tensor[static_cast<size_t>(sl)]);
    b->step_inputs.push_back(std::move(ins));
    b->step_outputs.push_back(std::move(outs));
  }
  // Pass 3: output staging and events.
  for (int slot : plan.output_slots) {
    const plan::TensorSlot& s = plan.slots[static_cast<size_t>(slot)];
    PinnedBlock pb;
    if (s.kind == plan::SlotKind::kArena) {
      SL_ASSIGN_OR_RETURN(pb, pinned_.acquire(std::max<size_t>(s.bytes, 1)));
    }
    b->output_staging.push_back(std::move(pb));
  }
  SL_RETURN_IF_ERROR(ensure_streams(std::max(1, plan.num_streams)));
  for (int e = 0; e < plan.num_events; ++e) {
    SL_ASSIGN_OR_RETURN(PooledEvent ev, events_->acquire());
    b->plan_events.push_back(std::move(ev));
  }
  SL_ASSIGN_OR_RETURN(b->inputs_ready, events_->acquire());
  SL_ASSIGN_OR_RETURN(b->fork, events_->acquire());
  SL_ASSIGN_OR_RETURN(b->compute_done, events_->acquire());
  for (int s = 1; s < plan.num_streams; ++s) {
    SL_ASSIGN_OR_RETURN(PooledEvent ev, events_->acquire());
    b->join.push_back(std::move(ev));
  }
  Binding* raw = b.get();
  bindings_[plan.id] = std::move(b);
  return raw;
}

// The compute part of a run: fork, every step on its stream with the plan's events, join. Used
// both to run directly and to capture a graph (then nothing executes until the graph launches).
Status CudaExecutionContext::enqueue_steps(const plan::ExecutionPlan& plan, Binding& b,
                                           const std::vector<cudaEvent_t>* timing) {
  cudaStream_t s0 = streams_[0].get();
  if (plan.num_streams > 1) {
    SL_CUDA_RETURN_IF_ERROR(cudaEventRecord(b.fork.get(), s0), "forking the plan's streams");
    for (int s = 1; s < plan.num_streams; ++s)
      SL_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(streams_[static_cast<size_t>(s)].get(), b.fork.get(), 0),
                              "forking the plan's streams");
  }
  std::vector<char> recorded(static_cast<size_t>(plan.num_events), 0);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const plan::Step& st = plan.steps[i];
    if (st.stream < 0 || st.stream >= plan.num_streams)
      return internal_error("step '" + st.name + "' is on stream " + std::to_string(st.stream) + " of " +
                            std::to_string(plan.num_streams));
    cudaStream_t stream = streams_[static_cast<size_t>(st.stream)].get();
    // The node's name for error messages, built only when something fails (this loop runs every
    // direct run).
    auto where = [&st] { return "node '" + st.name + "' (" + st.op + ")"; };
    for (int e : st.wait_events) {
      // CUDA waits for the most recent record of an event, so it must be enqueued already.
      if (!recorded[static_cast<size_t>(e)])
        return internal_error(where() + " waits for event " + std::to_string(e) + " before it is recorded");
      SL_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, b.plan_events[static_cast<size_t>(e)].get(), 0), where());
    }
    ops::RunContext rc;
    rc.inputs = b.step_inputs[i];
    rc.outputs = b.step_outputs[i];
    rc.workspace = st.workspace_bytes ? static_cast<char*>(b.block_base) + st.workspace_offset : nullptr;
    rc.state = st.state.get();
    rc.num_threads = 1;
    rc.device_stream = stream;
    if (timing) SL_CUDA_RETURN_IF_ERROR(cudaEventRecord((*timing)[2 * i], stream), where());
    if (Status ran = st.kernel->run(rc); !ran.ok()) return ran.with_context(where());
    if (timing) SL_CUDA_RETURN_IF_ERROR(cudaEventRecord((*timing)[2 * i + 1], stream), where());
    for (int e : st.record_events) {
      SL_CUDA_RETURN_IF_ERROR(cudaEventRecord(b.plan_events[static_cast<size_t>(e)].get(), stream), where());
      recorded[static_cast<size_t>(e)] = 1;
    }
  }
  for (int s = 1; s < plan.num_streams; ++s) {
    cudaEvent_t j = b.join[static_cast<size_t>(s - 1)].get();
    SL_CUDA_RETURN_IF_ERROR(cudaEventRecord(j, streams_[static_cast<size_t>(s)].get()), "joining the plan's streams");
    SL_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(s0, j, 0), "joining the plan's streams");
  }
  return ok_status();
}

Status CudaExecutionContext::report_step_times(const plan::ExecutionPlan& plan, Binding& b, ExecObserver& observer,
                                               int64_t host_start_ns) {
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    float begin_ms = 0, end_ms = 0;
    SL_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&begin_ms, b.timing_start, b.timing[2 * i]), "step timing");
    SL_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&end_ms, b.timing_start, b.timing[2 * i + 1]), "step timing");
    observer.on_step_timed(plan, static_cast<int>(i), plan.steps[i].stream,
                           host_start_ns + static_cast<int64_t>(static_cast<double>(begin_ms) * 1e6),
                           host_start_ns + static_cast<int64_t>(static_cast<double>(end_ms) * 1e6));
  }
  return ok_status();
}

Status CudaExecutionContext::capture(const plan::ExecutionPlan& plan, Binding& b) {
  cudaStream_t s0 = streams_[0].get();
  SL_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal), "capturing a CUDA graph");
  Status enqueued = enqueue_steps(plan, b);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s0, &graph);
  Status result = enqueued;
  if (result.ok() && end != cudaSuccess)
    result = ::streamline::cuda::cuda_status(end, "cudaStreamEndCapture", __FILE__, __LINE__, "capturing a CUDA graph");
  if (result.ok()) {
    const cudaError_t inst = cudaGraphInstantiate(&b.graph_exec, graph, 0);
    if (inst != cudaSuccess) {
      b.graph_exec = nullptr;
      result =
          ::streamline::cuda::cuda_status(inst, "cudaGraphInstantiate", __FILE__, __LINE__, "capturing a CUDA graph");
    }
  }
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // a failed capture leaves no sticky error; clear the last one
  return result;
}

Status CudaExecutionContext::run_values(const plan::ExecutionPlan&, std::span<const AnyValue>, std::vector<AnyValue>*,
                                        const RunOptions&) {
  return invalid_argument("eager plans run on the CPU only");
}

Status CudaExecutionContext::run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs,
                                 std::vector<Tensor>* outputs, const RunOptions& options) {
  if (!broken_.ok()) return broken_;
  if (plan.eager) return invalid_argument("eager plans run on the CPU only");
  // Pass 1: check the inputs against the plan.
  SL_RETURN_IF_ERROR(check_inputs(plan, inputs));
  if (options.safe) return unsupported("safe mode (canaries, poisoning) runs on the CPU only");
  SL_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.context.device),
                          "selecting device " + std::to_string(options_.context.device));
  SL_ASSIGN_OR_RETURN(Binding * b, bind(plan));
  cudaStream_t copy = copy_stream_.get();
  cudaStream_t s0 = streams_[0].get();
  if (options.observer) options.observer->on_run_begin(plan);

  // Pass 2: inputs to the device on the copy stream; compute waits for them.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t n = inputs[i].nbytes();
    if (n == 0) continue;
    std::memcpy(b->input_staging[i].data(), inputs[i].raw(), n);
    SL_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(b->input_device[i], b->input_staging[i].data(), n, cudaMemcpyHostToDevice, copy),
        "input '" + plan.input_names[i] + "'");
  }
  SL_CUDA_RETURN_IF_ERROR(cudaEventRecord(b->inputs_ready.get(), copy), "inputs");
  SL_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(s0, b->inputs_ready.get(), 0), "inputs");

  // Pass 3: compute, from a captured graph when there is one. A traced run is enqueued step by
  // step between timing events instead.
  const bool timed = options.observer != nullptr && options.observer->wants_step_times();
  int64_t host_start_ns = 0;
  if (timed && b->timing.empty()) {
    SL_CUDA_RETURN_IF_ERROR(cudaEventCreate(&b->timing_start), "step timing");
    b->timing.assign(2 * plan.steps.size(), nullptr);
    for (auto& e : b->timing) SL_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e), "step timing");
  }
  if (timed) {
    host_start_ns = now_ns();
    SL_CUDA_RETURN_IF_ERROR(cudaEventRecord(b->timing_start, s0), "step timing");
  }
  if (!timed && options_.context.cuda_graphs && b->graph == Binding::Graph::kNotYet &&
      b->runs >= static_cast<uint64_t>(std::max(0, options_.graph_warmup_runs))) {
    Status c = capture(plan, *b);
    if (c.ok()) {
      b->graph = Binding::Graph::kCaptured;
      ++stats_.graph_captures;
    } else {
      b->graph = Binding::Graph::kFailed;
      ++stats_.graph_failures;
      SL_LOG(kWarning) << "CUDA graph capture failed; plan runs without a graph: " << c.message();
    }
  }
  if (!timed && b->graph == Binding::Graph::kCaptured) {
    SL_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(b->graph_exec, s0), "launching the plan's CUDA graph");
    ++stats_.graph_launches;
  } else {
    SL_RETURN_IF_ERROR(enqueue_steps(plan, *b, timed ? &b->timing : nullptr));
  }

  // Pass 4: outputs back on the copy stream once compute is done; wait for them.
  SL_CUDA_RETURN_IF_ERROR(cudaEventRecord(b->compute_done.get(), s0), "outputs");
  SL_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy, b->compute_done.get(), 0), "outputs");
  for (size_t o = 0; o < plan.output_slots.size(); ++o) {
    const plan::TensorSlot& s = plan.slots[static_cast<size_t>(plan.output_slots[o])];
    if (s.kind != plan::SlotKind::kArena || s.bytes == 0) continue;
    SL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b->output_staging[o].data(), static_cast<char*>(b->block_base) + s.offset,
                                            s.bytes, cudaMemcpyDeviceToHost, copy),
                            "output '" + plan.output_names[o] + "'");
  }
  const cudaError_t done = cudaStreamSynchronize(copy);
  if (done != cudaSuccess) {
    // A kernel fault poisons the CUDA context: this executor cannot run anything any more.
    broken_ = internal_error("CUDA device fault during a run: " + std::string(cudaGetErrorName(done)) + ": " +
                             cudaGetErrorString(done) + " (the context cannot be used again)");
    return broken_;
  }
  ++b->runs;
  ++stats_.runs;
  if (timed) SL_RETURN_IF_ERROR(report_step_times(plan, *b, *options.observer, host_start_ns));
  if (options.observer) options.observer->on_run_end(plan);
  if (outputs)  // arena outputs were copied to their staging blocks above
    collect_outputs(plan, inputs, options.copy_outputs, outputs,
                    [b](size_t o, const plan::TensorSlot&) { return b->output_staging[o].data(); });
  return ok_status();
}

}  // namespace streamline::exec::cuda
