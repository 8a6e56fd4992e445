#include "runtime/instance_pool.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/cpu_set.h"
#include "core/logging.h"
#include "exec/stream_pool.h"

namespace streamline::runtime {
namespace {

bool wanted(const InferRequest& r, const std::string& name) {
  return r.requested_outputs.empty() ||
         std::find(r.requested_outputs.begin(), r.requested_outputs.end(), name) != r.requested_outputs.end();
}

int64_t rows_of(const Tensor& t) {
  return t.shape().rank() == 0 ? 1 : t.shape()[0];
}

// Records every step of one run, per stream (each stream calls from its own thread).
class StepCollector final : public exec::ExecObserver {
 public:
  void on_run_begin(const plan::ExecutionPlan& plan) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (streams_.size() < static_cast<size_t>(plan.num_streams)) streams_.resize(static_cast<size_t>(plan.num_streams));
  }
  void on_step_begin(const plan::ExecutionPlan&, int, int stream) override {
    streams_[static_cast<size_t>(stream)].begin = now_ns();
  }
  void on_step_end(const plan::ExecutionPlan& plan, int step, int stream) override {
    PerStream& p = streams_[static_cast<size_t>(stream)];
    const plan::Step& st = plan.steps[static_cast<size_t>(step)];
    p.spans.push_back({st.name, st.op, stream, p.begin, now_ns()});
  }
  bool wants_step_times() const override { return true; }
  void on_step_timed(const plan::ExecutionPlan& plan, int step, int stream, int64_t begin_ns, int64_t end_ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (streams_.size() <= static_cast<size_t>(stream)) streams_.resize(static_cast<size_t>(stream) + 1);
    const plan::Step& st = plan.steps[static_cast<size_t>(step)];
    streams_[static_cast<size_t>(stream)].spans.push_back({st.name, st.op, stream, begin_ns, end_ns});
  }
  std::vector<StepSpan> take() {
    std::vector<StepSpan> all;
    for (auto& p : streams_)
      for (auto& s : p.spans) all.push_back(std::move(s));
    std::sort(all.begin(), all.end(), [](const StepSpan& a, const StepSpan& b) { return a.begin_ns < b.begin_ns; });
    return all;
  }

 private:
  struct PerStream {
    int64_t begin = 0;
    std::vector<StepSpan> spans;
  };
  std::mutex mu_;
  std::vector<PerStream> streams_;
};

}  // namespace

InstancePool::InstancePool(std::shared_ptr<const Model> model, InstancePoolOptions options)
    : model_(std::move(model)), options_(options) {
  options_.serving.instances = std::max(1, options_.serving.instances);
  options_.threads_per_instance = std::max(1, options_.threads_per_instance);
  const int streams = std::max(1, model_->options().num_streams);
  streams_ = streams;
  threads_.store(options_.threads_per_instance, std::memory_order_relaxed);
  const int per_stream = std::max(1, options_.threads_per_instance / streams);
  for (int i = 0; i < options_.serving.instances; ++i) {
    exec::ContextOptions co;
    if (options_.serving.pin) {
      // Stream s of instance i takes its share of the instance's cores.
      const std::vector<int> cores = cores_of(i);
      for (int s = 0; s < streams; ++s) {
        std::vector<int> set;
        for (int k = 0; k < per_stream; ++k)
          set.push_back(cores[static_cast<size_t>((s * per_stream + k) % static_cast<int>(cores.size()))]);
        co.stream_cores.push_back(std::move(set));
      }
    }
    // "cuda" without an ordinal spreads instances over every visible GPU.
    const runtime::DeviceSpec& dev = model_->device();
    const int gpus = dev.kind == ops::Device::kCuda && dev.all_gpus ? std::max(1, cuda_device_count()) : 1;
    co.device = dev.all_gpus ? i % gpus : dev.ordinal;
    co.cuda_graphs = model_->options().cuda_graphs;
    auto in = std::make_unique<Instance>(std::move(co));
    in->index = i;
    in->staging.resize(model_->inputs().size());
    instances_.push_back(std::move(in));
  }
}

std::vector<int> InstancePool::cores_of(int instance) const {
  if (!options_.serving.pin) return {};
  const int t = options_.threads_per_instance;
  return core::core_block(instance * t, t);
}

Status InstancePool::start_instance(int instance, const std::vector<Shape>* warm_shapes) {
  if (instance < 0 || instance >= size()) return internal_error("no instance " + std::to_string(instance));
  Instance& in = *instances_[static_cast<size_t>(instance)];
  if (options_.serving.pin && !core::pin_current_thread(cores_of(instance))) {
    SL_LOG(kWarning) << "could not pin instance " << instance << "; it runs unpinned";
  }
  if (!warm_shapes) return ok_status();
  const auto& descs = model_->inputs();
  if (warm_shapes->size() != descs.size()) return internal_error("warm-up shapes do not match the model's inputs");
  std::vector<Tensor> zeros;
  for (size_t k = 0; k < descs.size(); ++k) zeros.push_back(Tensor::empty(descs[k].dtype, (*warm_shapes)[k]));
  SL_ASSIGN_OR_RETURN(auto plan, model_->plan_for(*warm_shapes));
  const exec::RunOptions ro = run_options(threads());
  SL_ASSIGN_OR_RETURN(exec::ExecutionContext * context, context_of(in));
  SL_RETURN_IF_ERROR(context->run(*plan, zeros, &in.outputs, ro).with_context("warm-up run"));
  in.outputs.clear();
  in.arena.store(context->arena_bytes(), std::memory_order_relaxed);
  return ok_status();
}

exec::RunOptions InstancePool::run_options(int threads) const {
  exec::RunOptions ro;
  ro.num_threads = std::max(1, threads / streams_);
  ro.elastic_threads = std::min(model_->elastic_threads(), threads);
  ro.copy_outputs = false;
  ro.safe = model_->options().safe;
  return ro;
}

void InstancePool::set_threads(int threads) {
  threads_.store(std::max(1, threads), std::memory_order_relaxed);
}

Result<exec::ExecutionContext*> InstancePool::context_of(Instance& in) const {
  if (!in.context) {
    SL_ASSIGN_OR_RETURN(in.context, model_->device_weights()->make_context(in.options));
  }
  return in.context.get();
}

size_t InstancePool::arena_bytes(int instance) const {
  if (instance < 0 || instance >= size()) return 0;
  return instances_[static_cast<size_t>(instance)]->arena.load(std::memory_order_relaxed);
}

void InstancePool::run_batch(int instance, std::span<const InferRequest* const> requests,
                             std::span<InferResponse> responses) {
  Status s = instance >= 0 && instance < size() ? run(*instances_[static_cast<size_t>(instance)], requests, responses)
                                                : internal_error("no instance " + std::to_string(instance));
  if (!s.ok())
    for (auto& r : responses) {
      r.status = s;
      r.outputs.clear();
    }
}

Status InstancePool::run(Instance& in, std::span<const InferRequest* const> requests,
                         std::span<InferResponse> responses) {
  if (requests.empty()) return ok_status();
  const auto& descs = model_->inputs();
  const size_t n = requests.size();
  const int64_t t_begin = now_ns();
  // Pass 1: inputs. One request runs on its own tensors; several are concatenated along dim 0
  // into this instance's staging buffers (grown to the largest batch seen, then reused).
  in.inputs.clear();
  in.shapes.clear();
  int64_t total_rows = 0;
  for (size_t k = 0; k < descs.size(); ++k) {
    const Tensor* first = nullptr;
    {
      auto it = requests[0]->inputs.find(descs[k].name);
      if (it == requests[0]->inputs.end()) return invalid_argument("missing input '" + descs[k].name + "'");
      first = &it->second;
    }
    if (n == 1) {
      in.inputs.push_back(*first);
      in.shapes.push_back(first->shape());
      if (k == 0) total_rows = rows_of(*first);
      continue;
    }
    if (first->shape().rank() == 0) return internal_error("cannot batch scalar input '" + descs[k].name + "'");
    Shape shape = first->shape();
    int64_t rows = 0;
    for (const InferRequest* r : requests) rows += rows_of(r->inputs.at(descs[k].name));
    shape[0] = rows;
    if (k == 0) total_rows = rows;
    for (const InferRequest* r : requests) {
      const Tensor& t = r->inputs.at(descs[k].name);
      if (t.dtype() != first->dtype() || t.shape().rank() != shape.rank() ||
          !std::equal(t.shape().begin() + 1, t.shape().end(), shape.begin() + 1))
        return internal_error("requests with different shapes for input '" + descs[k].name + "' share a batch");
    }
    if (first->dtype() == DType::kString) {
      // String tensors hold std::string objects: copied one by one into a tensor of this batch.
      Tensor batch = Tensor::empty(DType::kString, shape);
      std::string* dst = batch.strings();
      for (const InferRequest* r : requests) {
        const Tensor& t = r->inputs.at(descs[k].name);
        dst = std::copy(t.strings(), t.strings() + t.numel(), dst);
      }
      in.inputs.push_back(std::move(batch));
      in.shapes.push_back(shape);
      continue;
    }
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(first->dtype());
    Tensor& buf = in.staging[k];
    if (!buf.defined() || buf.dtype() != first->dtype() || buf.nbytes() < bytes)
      buf = Tensor::empty(first->dtype(), Shape{shape.numel()});
    char* dst = static_cast<char*>(buf.raw());
    for (const InferRequest* r : requests) {
      const Tensor& t = r->inputs.at(descs[k].name);
      std::memcpy(dst, t.raw(), t.nbytes());
      dst += t.nbytes();
    }
    in.inputs.push_back(Tensor::view(first->dtype(), shape, buf.raw()));
    in.shapes.push_back(shape);
  }
  // Pass 2: how these shapes run: a plan (made at load for the configured batch sizes), or node
  // by node (string tensors, If/Loop, shapes computed from values).
  SL_ASSIGN_OR_RETURN(Model::Prepared prepared, model_->prepare(in.shapes));
  const std::shared_ptr<const plan::ExecutionPlan>& plan = prepared.plan;
  const int threads = this->threads();  // this batch's, whatever set_threads does meanwhile
  std::vector<std::string> names;
  const int64_t t_inputs = now_ns();
  // A traced request in the batch: its steps are recorded (the observer costs nothing otherwise;
  // node-by-node runs record one step per node).
  const bool traced = std::any_of(requests.begin(), requests.end(), [](const InferRequest* r) { return r->trace; });
  std::optional<StepCollector> steps;
  if (traced) steps.emplace();
  SL_ASSIGN_OR_RETURN(exec::ExecutionContext * context, context_of(in));
  if (plan->eager) {
    std::vector<AnyValue> values(in.inputs.begin(), in.inputs.end());
    std::vector<AnyValue> outs;
    exec::RunOptions ro = run_options(threads);  // eager runs read the thread count and the observer
    if (traced) ro.observer = &*steps;
    SL_RETURN_IF_ERROR(context->run_values(*plan, values, &outs, ro));
    in.outputs.clear();
    for (size_t o = 0; o < outs.size(); ++o) {
      if (!outs[o].is_tensor())
        return unsupported("output '" + model_->outputs()[o].name + "' is a " + outs[o].describe() +
                           "; serving carries tensors only");
      in.outputs.push_back(outs[o].tensor());
    }
    for (const TensorDesc& d : model_->outputs()) names.push_back(d.name);
  } else {
    names = plan->output_names;
    // Pass 3: run; a batch's outputs stay in the arena until they are split, a lone request's are
    // its own (written straight into their own memory where the plan allows: no copy).
    exec::RunOptions ro = run_options(threads);
    ro.copy_outputs = n == 1;
    if (traced) ro.observer = &*steps;
    SL_RETURN_IF_ERROR(context->run(*plan, in.inputs, &in.outputs, ro));
    in.arena.store(context->arena_bytes(), std::memory_order_relaxed);
  }
  const int64_t t_run = now_ns();
  // Pass 4: split the outputs back per request, copying only what each request asked for.
  for (size_t o = 0; o < in.outputs.size(); ++o) {
    const Tensor& t = in.outputs[o];
    const std::string& name = names[o];
    if (n > 1 && (t.shape().rank() == 0 || t.shape()[0] != total_rows))
      return internal_error("output '" + name + "' has shape " + t.shape().to_string() + " for a batch of " +
                            std::to_string(total_rows) + " rows; it cannot be split per request");
    // Per row: bytes, or elements for string tensors (copied as std::string objects).
    const bool strings = t.dtype() == DType::kString;
    const size_t row_size =
        n > 1 ? (strings ? static_cast<size_t>(t.numel()) : t.nbytes()) / static_cast<size_t>(total_rows) : 0;
    size_t at = 0;  // bytes or elements of the rows already handed out
    for (size_t i = 0; i < n; ++i) {
      const int64_t rows = n > 1 ? rows_of(requests[i]->inputs.at(descs[0].name)) : 0;
      const size_t size = static_cast<size_t>(rows) * row_size;
      if (wanted(*requests[i], name)) {
        if (n == 1) {
          responses[i].outputs.emplace(name, plan->eager ? t.clone() : t);
        } else {
          Shape s = t.shape();
          s[0] = rows;
          Tensor part = Tensor::for_overwrite(t.dtype(), s);  // filled whole below
          if (strings)
            std::copy(t.strings() + at, t.strings() + at + size, part.strings());
          else
            std::memcpy(part.raw(), static_cast<const char*>(t.raw()) + at, size);
          responses[i].outputs.emplace(name, std::move(part));
        }
      }
      at += size;
    }
  }
  in.outputs.clear();
  // Every request of the batch reports the batch's times, as Triton does.
  const int64_t t_end = now_ns();
  std::shared_ptr<RunTrace> trace;
  if (traced) {
    trace = std::make_shared<RunTrace>();
    trace->instance = in.index;
    trace->rows = static_cast<int>(total_rows);
    trace->requests = static_cast<int>(n);
    trace->begin_ns = t_begin;
    trace->inputs_done_ns = t_inputs;
    trace->run_done_ns = t_run;
    trace->end_ns = t_end;
    trace->steps = steps->take();
  }
  for (size_t i = 0; i < n; ++i) {
    if (requests[i]->trace) responses[i].trace = trace;
    responses[i].status = ok_status();
    responses[i].compute_input_us = (t_inputs - t_begin) / 1000;
    responses[i].compute_infer_us = (t_run - t_inputs) / 1000;
    responses[i].compute_output_us = (t_end - t_run) / 1000;
  }
  return ok_status();
}

}  // namespace streamline::runtime
