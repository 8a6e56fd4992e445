// ServingModel: validation at submit, plans and instances at load, glue between the scheduler
// (queue, batcher, threads) and the instance pool (concat, run, split).

#include <algorithm>
#include <set>
#include <string>
#include <thread>

#include "core/cpu_set.h"
#include "core/logging.h"
#include "plan/execution_plan.h"
#include "runtime/control_loop.h"
#include "runtime/instance_pool.h"
#include "runtime/scheduler.h"
#include "streamline/serving.h"

namespace streamline {
namespace {

Status check_options(const ServingOptions& o) {
  if (o.instances < 1 || o.instances > runtime::kMaxInstances)
    return invalid_argument("instances must be in [1, " + std::to_string(runtime::kMaxInstances) + "], got " +
                            std::to_string(o.instances));
  if (o.threads_per_instance < 0) return invalid_argument("threads_per_instance must be >= 0");
  if (o.stats_window < 1) return invalid_argument("stats_window must be >= 1");
  if (!o.clock) return invalid_argument("clock must not be null");
  if (o.controller.enabled && o.controller.window_us <= 0)
    return invalid_argument("controller.window_us must be > 0, got " + std::to_string(o.controller.window_us));
  for (size_t i = 0; i < o.latency_buckets_us.size(); ++i)
    if (!(o.latency_buckets_us[i] > 0) || (i > 0 && !(o.latency_buckets_us[i] > o.latency_buckets_us[i - 1])))
      return invalid_argument("latency_buckets_us must be positive and increasing");
  return runtime::validate_policy(o.batching);
}

// Whether the online controller runs for these options.
bool controlled(const ServingOptions& o) {
  return o.controller.enabled && o.batching.queue.latency_objective_us > 0;
}

// Batch sizes to plan at load: the preferred sizes plus 1 and the maximum, else (or when the
// controller may pick any preferred size) 1..max.
std::vector<int> batch_sizes_to_plan(const BatchPolicy& p, bool every_size) {
  std::set<int> sizes{1, p.max_batch_size};
  if (p.preferred_batch_sizes.empty() || every_size) {
    for (int b = 1; b <= p.max_batch_size; ++b) sizes.insert(b);
  } else {
    sizes.insert(p.preferred_batch_sizes.begin(), p.preferred_batch_sizes.end());
  }
  return {sizes.begin(), sizes.end()};
}

}  // namespace

Result<std::unique_ptr<ServingModel>> ServingModel::load(const std::string& path, const ServingOptions& options,
                                                         const ModelOptions& model_options) {
  SL_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, Model::load(path, model_options));
  return create(std::move(model), options);
}

Result<std::unique_ptr<ServingModel>> ServingModel::create(std::shared_ptr<const Model> model,
                                                           const ServingOptions& options) {
  if (!model) return invalid_argument("no model");
  SL_RETURN_IF_ERROR(check_options(options));
  std::unique_ptr<ServingModel> m(new ServingModel());
  m->model_ = std::move(model);
  m->options_ = options;
  const Model& mdl = *m->model_;
  m->threads_per_instance_ = core::share_threads(options.threads_per_instance, 0, options.instances);
  const BatchPolicy& bp = options.batching;
  const bool batching = bp.max_batch_size > 1;

  // Pass 1: requests carry tensors only (KServe has no sequence or optional type); a batched model
  // needs a free first dimension on every input.
  for (const std::vector<TensorDesc>* descs : {&mdl.inputs(), &mdl.outputs()})
    for (const TensorDesc& d : *descs)
      if (d.kind != ValueKind::kTensor)
        return unsupported(std::string(descs == &mdl.inputs() ? "input '" : "output '") + d.name + "' is a " +
                           value_type_name(d.kind, d.dtype) +
                           "; serving carries tensors only (run the model with Session::run_values)");
  for (const auto& in : mdl.inputs()) {
    if (!batching) break;
    if (in.dims.empty() || in.dims[0] >= 0)
      return invalid_argument("cannot batch input '" + in.name + "': its first dimension is " +
                              (in.dims.empty() ? std::string("missing") : std::to_string(in.dims[0])) +
                              "; serve it with max_batch_size = 1");
  }
  // Pass 2: plans for the configured batch sizes, made now; outputs must follow the batch.
  std::vector<Shape> warm;
  for (int b : batching ? batch_sizes_to_plan(bp, controlled(options)) : std::vector<int>{1}) {
    auto shapes = mdl.default_shapes(b);
    if (!shapes.ok()) {
      SL_LOG(kWarning) << "no plans made at load (" << shapes.status().to_string() << "); they are made on first use";
      m->planned_.clear();
      warm.clear();
      break;
    }
    SL_ASSIGN_OR_RETURN(ExecutionMode mode, mdl.execution_mode(*shapes));
    if (mode == ExecutionMode::kEager) {
      // String tensors, If/Loop, computed shapes: each request runs node by node, nothing to plan.
      SL_LOG(kInfo) << "no plans made at load: " << mdl.eager_reason(*shapes);
      m->planned_.clear();
      warm.clear();
      break;
    }
    SL_ASSIGN_OR_RETURN(auto plan, mdl.plan_for(*shapes));
    for (size_t o = 0; batching && o < plan->output_slots.size(); ++o) {
      const Shape& s = plan->slots[static_cast<size_t>(plan->output_slots[o])].shape;
      if (s.rank() == 0 || s[0] != b)
        return invalid_argument("cannot batch output '" + plan->output_names[o] + "': at batch " + std::to_string(b) +
                                " its shape is " + s.to_string() + "; serve it with max_batch_size = 1");
    }
    m->planned_.push_back(b);
    warm = *shapes;  // the largest size comes last
  }
  // Pass 3: batching keys need building only when some non-batch dim is free.
  for (const auto& in : mdl.inputs())
    for (size_t d = 1; d < in.dims.size(); ++d)
      if (in.dims[d] < 0) m->free_shape_ = true;

  // Pass 4: instances and their threads; each pins itself and sizes its arena before serving.
  runtime::InstancePoolOptions po;
  po.serving = options;
  po.threads_per_instance = m->threads_per_instance_;
  m->pool_ = std::make_unique<runtime::InstancePool>(m->model_, po);
  runtime::SchedulerOptions so;
  so.serving = options;
  so.active_instances = controlled(options) ? 1 : 0;  // the controller adds instances as the load needs
  runtime::InstancePool* pool = m->pool_.get();
  const bool do_warm = options.warmup && !warm.empty();
  so.on_instance_start = [pool, warm, do_warm](int i) { return pool->start_instance(i, do_warm ? &warm : nullptr); };
  m->scheduler_ =
      std::make_unique<runtime::Scheduler>(so, [pool](int i, std::span<const InferRequest* const> reqs,
                                                      std::span<InferResponse> out) { pool->run_batch(i, reqs, out); });
  SL_RETURN_IF_ERROR(m->scheduler_->start());
  // Pass 5: the online controller, over every instance started.
  if (controlled(options)) {
    const ControllerOptions& co = options.controller;
    runtime::ControlLoopOptions lo;
    lo.controller = co;
    lo.limits.latency_objective_us = bp.queue.latency_objective_us;
    lo.limits.max_batch = bp.max_batch_size;
    lo.limits.max_instances = options.instances;
    lo.limits.threads_per_instance = m->threads_per_instance_;
    // Plans are sized for the Model's threads: an instance runs on at most that many.
    lo.limits.max_threads_per_instance = std::max(m->threads_per_instance_, mdl.default_threads());
    if (!options.pin) lo.set_threads = [pool](int t) { pool->set_threads(t); };
    m->control_ = std::make_unique<runtime::ControlLoop>(*m->scheduler_, std::move(lo));
    if (co.thread) m->control_->start();
  }
  return m;
}

ServingModel::~ServingModel() {
  if (control_) control_->stop();
  if (scheduler_) scheduler_->shutdown(ShutdownMode::kDrain);
}

Status ServingModel::check_request(const InferRequest& r, int* rows, uint32_t* key) {
  const BatchPolicy& bp = options_.batching;
  const bool batching = bp.max_batch_size > 1;
  const auto& descs = model_->inputs();
  for (const auto& [name, t] : r.inputs)
    if (std::none_of(descs.begin(), descs.end(), [&name = name](const TensorDesc& d) { return d.name == name; }))
      return invalid_argument("model has no input named '" + name + "'");
  int64_t batch_rows = -1;
  std::string signature;
  for (const auto& d : descs) {
    auto it = r.inputs.find(d.name);
    if (it == r.inputs.end()) return invalid_argument("missing input '" + d.name + "'");
    const Tensor& t = it->second;
    const std::string where = "input '" + d.name + "': ";
    if (t.dtype() != d.dtype)
      return invalid_argument(where + "expected " + dtype_name(d.dtype) + ", got " + dtype_name(t.dtype()));
    if (t.layout() != Layout::kPlain) return invalid_argument(where + "must have the plain layout");
    if (!t.raw() && t.numel() > 0) return invalid_argument(where + "has no data");
    const Shape& s = t.shape();
    if (!d.dims.empty()) {
      if (s.rank() != d.dims.size())
        return invalid_argument(where + "expected rank " + std::to_string(d.dims.size()) + ", got " + t.describe());
      for (size_t i = batching ? 1 : 0; i < s.rank(); ++i)
        if (d.dims[i] >= 0 && s[i] != d.dims[i])
          return invalid_argument(where + "dimension " + std::to_string(i) + " must be " + std::to_string(d.dims[i]) +
                                  ", got " + t.describe());
    }
    const int64_t n = s.rank() == 0 ? 1 : s[0];
    if (batching) {
      if (s.rank() == 0) return invalid_argument(where + "a batched model needs a first dimension");
      if (batch_rows >= 0 && n != batch_rows)
        return invalid_argument(where + "has " + std::to_string(n) + " rows but another input has " +
                                std::to_string(batch_rows));
      if (n < 1 || n > bp.max_batch_size)
        return invalid_argument(where + std::to_string(n) +
                                " rows is outside [1, max_batch_size=" + std::to_string(bp.max_batch_size) + "]");
      if (free_shape_) {
        signature += dtype_name(t.dtype());
        for (size_t i = 1; i < s.rank(); ++i) {
          signature += ',';
          signature += std::to_string(s[i]);
        }
        signature += ";";
      }
    }
    if (batch_rows < 0) batch_rows = n;
  }
  for (const auto& name : r.requested_outputs) {
    const auto& outs = model_->outputs();
    if (std::none_of(outs.begin(), outs.end(), [&](const TensorDesc& d) { return d.name == name; }))
      return invalid_argument("model has no output named '" + name + "'");
  }
  if (r.timeout_us < 0)
    return invalid_argument("timeout_us must be >= 0 (0 = the queue policy's default), got " +
                            std::to_string(r.timeout_us));
  *rows = static_cast<int>(std::clamp<int64_t>(batch_rows < 0 ? 1 : batch_rows, 1, 1 << 30));
  *key = 0;
  if (!signature.empty()) {
    std::lock_guard<std::mutex> lock(keys_mu_);
    auto [it, inserted] = keys_.emplace(signature, static_cast<uint32_t>(keys_.size()));
    *key = it->second;
  }
  return ok_status();
}

void ServingModel::submit(InferRequest request, InferCallback done) {
  int rows = 1;
  uint32_t key = 0;
  Status s = check_request(request, &rows, &key);
  if (!s.ok()) {
    scheduler_->refuse(request, std::move(s), done);
    return;
  }
  scheduler_->enqueue(std::move(request), rows, key, std::move(done));
}

std::future<InferResponse> ServingModel::submit(InferRequest request) {
  auto promise = std::make_shared<std::promise<InferResponse>>();
  std::future<InferResponse> f = promise->get_future();
  submit(std::move(request), [promise](InferResponse r) { promise->set_value(std::move(r)); });
  return f;
}

InferResponse ServingModel::infer(InferRequest request) {
  return submit(std::move(request)).get();
}

void ServingModel::shutdown(ShutdownMode mode) {
  if (control_) control_->stop();
  scheduler_->shutdown(mode);
}

ServingStats ServingModel::stats() const {
  ServingStats s = scheduler_->stats();
  if (control_) {
    s.controller = control_->stats();
  } else {
    runtime::ControlSettings c = scheduler_->control_settings();
    c.threads_per_instance = threads_per_instance_;  // fixed without a controller; the scheduler does not know it
    runtime::report_settings(c, &s.controller);
  }
  return s;
}

std::vector<ControllerDecision> ServingModel::step_controller() {
  return control_ ? control_->step() : std::vector<ControllerDecision>{};
}

std::vector<size_t> ServingModel::arena_bytes() const {
  std::vector<size_t> out;
  for (int i = 0; i < pool_->size(); ++i) out.push_back(pool_->arena_bytes(i));
  return out;
}

}  // namespace streamline
