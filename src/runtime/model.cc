#include <algorithm>
#include <dnnl.hpp>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/cpu_set.h"
#include "core/logging.h"
#include "core/version.h"
#include "exec/backend.h"
#include "exec/execution_context.h"
#include "graph/ir.h"
#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "graph/value_types.h"
#include "ops/eager.h"
#include "ops/evaluator.h"
#include "ops/kernel.h"
#include "plan/execution_plan.h"
#include "plan/kernel_set.h"
#include "plan/planner.h"
#include "runtime/device.h"
#include "streamline/streamline.h"

namespace streamline {
namespace {

TensorDesc describe(const graph::Graph& g, graph::ValueId v) {
  const graph::Value& val = g.value(v);
  TensorDesc d;
  d.name = val.name;
  d.kind = val.kind;
  d.dtype = val.dtype;
  if (val.dims) {
    for (const auto& dim : *val.dims) {
      d.dims.push_back(dim.fixed() ? dim.value : -1);
      d.symbols.push_back(dim.symbol);
    }
  } else if (val.constant) {
    for (int64_t x : val.constant->shape()) {
      d.dims.push_back(x);
      d.symbols.emplace_back();
    }
  }
  return d;
}

ModelMetadata metadata_of(const graph::Graph& g) {
  ModelMetadata md;
  md.producer_name = g.producer_name;
  md.producer_version = g.producer_version;
  md.graph_name = g.name;
  md.domain = g.model_domain;
  md.description = g.model_doc_string;
  md.graph_description = g.doc_string;
  md.version = g.model_version;
  md.custom = g.metadata_props;
  return md;
}

std::string shapes_key(const std::vector<Shape>& shapes) {
  std::string k;
  for (const auto& s : shapes) k += s.to_string() + ";";
  return k;
}

// The graph passes a model's options ask for: the one place the public ModelOptions meets the
// graph layer's PassOptions.
graph::PassOptions pass_options(const ModelOptions& options, bool on_cuda) {
  graph::PassOptions po;
  po.enabled = options.optimize;
  po.split_conv_parts = options.split_convs;
  // oneDNN's direct convolutions take groups of whole multiples of 8 channels (AVX2's vector);
  // narrower ones fall back to a GEMM per group. cuDNN has no such limit.
  if (!on_cuda) po.widen_groups_to = 8;
  if (on_cuda) po.scale_into_conv = false;  // the CUDA convolutions take no x_scale input
  return po;
}

}  // namespace

// What the public header keeps opaque: everything whose type lives below the public API.
struct Model::Impl {
  runtime::DeviceSpec device_;
  std::shared_ptr<exec::DeviceWeights> device_weights_;
  const ops::KernelRegistry* registry_ = nullptr;  // the registry kernels and plans come from
  graph::Graph graph_;
  graph::PassReport report_;
  plan::KernelSet kernels_;
  // Why every shape set runs eagerly ("input 'x' is a sequence of float32: ..."), or "".
  std::string always_eager_;
  // Plans by shape key. An entry is made when a shape set is first asked for and completed when
  // its planning ends; the lock guards only the map, never planning, so a new shape never holds up
  // runs of shapes already planned, and concurrent first runs of one shape set plan it once.
  std::mutex plans_mu_;
  std::unordered_map<std::string, std::shared_future<Result<Prepared>>> plans_;
};

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::~Model() = default;

const graph::Graph& Model::graph() const {
  return impl_->graph_;
}
const graph::PassReport& Model::pass_report() const {
  return impl_->report_;
}
const runtime::DeviceSpec& Model::device() const {
  return impl_->device_;
}
const std::shared_ptr<exec::DeviceWeights>& Model::device_weights() const {
  return impl_->device_weights_;
}
std::string Model::device_name() const {
  return impl_->device_.to_string();
}

StepDesc describe_step(const plan::ExecutionPlan& plan, int step) {
  StepDesc d;
  if (step < 0 || static_cast<size_t>(step) >= plan.steps.size()) return d;
  const plan::Step& st = plan.steps[static_cast<size_t>(step)];
  d.name = st.name;
  d.op = st.op;
  d.provider = st.provider;
  d.stream = st.stream;
  return d;
}

std::string version_string() {
  const dnnl_version_t* v = dnnl_version();
  const std::string cuda = runtime::accelerator_summary();
  return std::string(SL_VERSION_STRING) + " (oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
         "." + std::to_string(v->patch) + ", CPU; " + cuda + ")";
}

Result<std::shared_ptr<Model>> Model::load(const std::string& path, const ModelOptions& options) {
  auto g = graph::import_onnx_file(path);
  if (!g.ok()) return g.status();
  auto m = from_graph(std::move(g).value(), options);
  if (!m.ok()) return m.status().with_context(path);
  return m;
}

Result<std::shared_ptr<Model>> Model::load_bytes(std::string_view bytes, const ModelOptions& options) {
  const std::string what = "model bytes";
  auto g = graph::import_onnx_bytes(bytes, /*base_dir=*/"", {}, what);
  if (!g.ok()) return g.status();
  auto m = from_graph(std::move(g).value(), options);
  if (!m.ok()) return m.status().with_context(what);
  return m;
}

Result<std::shared_ptr<Model>> Model::from_graph(graph::Graph g, const ModelOptions& options) {
  // Every model is made here: the one place the library registers its backends (once).
  SL_RETURN_IF_ERROR(runtime::init_backends());
  if (options.split_convs < 0 || options.split_convs > 64)
    return invalid_argument("split_convs must be 0 (off) or a slice count from 2 to 64, got " +
                            std::to_string(options.split_convs));
  if (options.elastic_threads && options.pin_threads)
    return invalid_argument("elastic_threads and pin_threads cannot be combined: elastic steps use any core");
  std::shared_ptr<Model> m(new Model());
  m->options_ = options;
  if (options.blocked_channels == 0) m->options_.blocked_channels = ops::native_block();
  if (m->options_.blocked_channels != 8 && m->options_.blocked_channels != 16)
    return invalid_argument("blocked_channels must be 0, 8 or 16, got " + std::to_string(options.blocked_channels));
  SL_ASSIGN_OR_RETURN(m->impl_->device_, runtime::parse_device(options.device));
  const bool on_cuda = m->impl_->device_.kind == ops::Device::kCuda;
  if (!on_cuda && options.precision != ops::Precision::kFp32)
    return invalid_argument(std::string("precision ") + ops::precision_name(options.precision) +
                            " needs a GPU device; CPU models run fp32");
  if (on_cuda && options.safe) return invalid_argument("safe mode (canaries, poisoning) runs on the CPU device only");
  SL_ASSIGN_OR_RETURN(exec::Backend * backend, runtime::backend_for(m->impl_->device_));
  SL_ASSIGN_OR_RETURN(m->impl_->registry_, backend->kernels());
  SL_ASSIGN_OR_RETURN(m->impl_->device_weights_, backend->attach_model());
  if (on_cuda) {
    // Activations stay plain (NCHW) on the GPU: the CUDA kernels take that layout.
    m->options_.channels_last = false;
    m->options_.blocked_layout = false;
  }
  m->impl_->graph_ = std::move(g);
  // Kinds (sequence, optional) and element types the graph leaves open, for graphs built by hand
  // (the importer has run the same rules).
  graph::infer_value_types(m->impl_->graph_);
  m->metadata_ = metadata_of(m->impl_->graph_);
  // Pass 1: graph rewrites.
  ops::KernelEvaluator evaluator(ops::default_cpu_registry());
  SL_RETURN_IF_ERROR(
      graph::run_passes(m->impl_->graph_, pass_options(options, on_cuda), &evaluator, &m->impl_->report_));
  if (on_cuda && options.precision == ops::Precision::kFp16) {
    graph::HalfReport hr;
    SL_RETURN_IF_ERROR(graph::convert_to_half(m->impl_->graph_, &hr));
    if (hr.overflowed > 0) {
      SL_LOG(kWarning) << hr.overflowed << " weight elements exceed the float16 range and became infinite";
    }
  }
  // Pass 2: one kernel per node; every unsupported op is reported at once.
  ops::KernelOptions ko;
  static_cast<KernelChoices&>(ko) = m->options_;
  SL_ASSIGN_OR_RETURN(m->impl_->kernels_,
                      plan::create_kernels(m->impl_->graph_, *m->impl_->registry_, ko, m->impl_->device_.kind));
  for (graph::ValueId v : m->impl_->graph_.inputs()) m->inputs_.push_back(describe(m->impl_->graph_, v));
  for (graph::ValueId v : m->impl_->graph_.outputs()) m->outputs_.push_back(describe(m->impl_->graph_, v));
  for (const auto& in : m->inputs_)
    if (!dtype_supported(in.dtype) && in.dtype != DType::kString)
      return unsupported("input '" + in.name + "' has unsupported dtype " + dtype_name(in.dtype));
  // The eager device runs every shape set node by node.
  if (m->impl_->device_.eager()) m->impl_->always_eager_ = "the model was loaded for the eager device";
  // Plans hold tensors of fixed-size elements: models that take or give anything else run eagerly.
  for (const auto* list : {&m->inputs_, &m->outputs_})
    for (const auto& d : *list)
      if (m->impl_->always_eager_.empty() && (d.kind != ValueKind::kTensor || d.dtype == DType::kString))
        m->impl_->always_eager_ = std::string(list == &m->inputs_ ? "input '" : "output '") + d.name + "' is a " +
                                  value_type_name(d.kind, d.dtype) +
                                  ": sequences, optionals and string tensors run node by node";
  SL_LOG(kInfo) << "loaded model: " << m->impl_->graph_.live_node_count()
                << " nodes; passes: " << m->impl_->report_.to_string();
  return m;
}

int Model::default_threads() const {
  return options_.num_threads > 0 ? options_.num_threads : core::usable_cores();
}

Result<std::vector<Shape>> Model::input_shapes(const std::vector<std::optional<Shape>>& known, int64_t batch) const {
  if (known.size() > inputs_.size())
    return invalid_argument("model has " + std::to_string(inputs_.size()) + " inputs, got " +
                            std::to_string(known.size()) + " shapes");
  std::vector<Shape> shapes;
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const TensorDesc& in = inputs_[k];
    const std::string declared = "declared [" + [&] {
      std::string d;
      for (size_t i = 0; i < in.dims.size(); ++i)
        d += (i ? "," : "") + (in.dims[i] >= 0         ? std::to_string(in.dims[i])
                               : in.symbols[i].empty() ? "?"
                                                       : in.symbols[i]);
      return d;
    }() + "]";
    if (k < known.size() && known[k]) {
      // A tensor the caller holds is the truth; it only has to fit what the model fixes.
      const Shape& s = *known[k];
      if (!in.dims.empty() && s.rank() != in.dims.size())
        return invalid_argument("input '" + in.name + "' is " + declared + ", got shape " + s.to_string());
      for (size_t i = 0; i < in.dims.size(); ++i)
        if (in.dims[i] >= 0 && s[i] != in.dims[i])
          return invalid_argument("input '" + in.name + "' is " + declared + ", got shape " + s.to_string());
      shapes.push_back(s);
      continue;
    }
    Shape s;
    for (size_t i = 0; i < in.dims.size(); ++i) {
      if (in.dims[i] >= 0) {
        s.push_back(in.dims[i]);
      } else if (!in.symbols[i].empty()) {
        s.push_back(i == 0 ? batch : 1);
      } else if (i == 0) {
        s.push_back(batch);
      } else {
        return invalid_argument("input '" + in.name + "' (" + declared + ") has no size for dimension " +
                                std::to_string(i) + " and no tensor or shape was given for it");
      }
    }
    shapes.push_back(s);
  }
  return shapes;
}

Result<std::vector<Shape>> Model::default_shapes(int64_t batch) const {
  return input_shapes({}, batch);
}

int Model::threads_per_stream() const {
  if (options_.threads_per_stream > 0) return options_.threads_per_stream;
  return std::max(1, default_threads() / std::max(1, options_.num_streams));
}

int Model::elastic_threads() const {
  return options_.elastic_threads && options_.num_streams > 1 ? default_threads() : 0;
}

const char* execution_mode_name(ExecutionMode m) {
  switch (m) {
    case ExecutionMode::kPlanned:
      return "planned";
    case ExecutionMode::kEager:
      return "eager";
  }
  return "?";
}

Result<Model::Prepared> Model::prepare(const std::vector<Shape>& shapes) const {
  const std::string key = shapes_key(shapes);
  std::optional<std::promise<Result<Prepared>>> promise;  // made only by the thread that plans
  std::shared_future<Result<Prepared>> pending;
  {
    std::lock_guard<std::mutex> lock(impl_->plans_mu_);
    auto [it, inserted] = impl_->plans_.try_emplace(key);
    if (inserted) {
      promise.emplace();
      it->second = promise->get_future().share();
    } else {
      pending = it->second;
    }
  }
  // Cached, or being planned by another thread: wait for that entry alone, outside the lock.
  if (pending.valid()) return pending.get();
  Result<Prepared> r = plan_shapes(shapes, key);
  if (!r.ok()) {
    // Failures are not cached: the next request for these shapes tries again (and sees the same
    // error unless something changed); threads already waiting get this one.
    std::lock_guard<std::mutex> lock(impl_->plans_mu_);
    impl_->plans_.erase(key);
  }
  promise->set_value(r);
  return r;
}

namespace {

// Where eager runs keep activations: the layouts the model's kernels were made for.
ops::EagerLayouts eager_layouts(const ModelOptions& options) {
  ops::KernelOptions ko;
  static_cast<KernelChoices&>(ko) = options;
  return ops::EagerLayouts::of(ko);
}

}  // namespace

Result<Model::Prepared> Model::plan_shapes(const std::vector<Shape>& shapes, const std::string& key) const {
  if (shapes.size() != inputs_.size())
    return invalid_argument("model has " + std::to_string(inputs_.size()) + " inputs, got " +
                            std::to_string(shapes.size()) + " shapes");
  if (options_.on_planning) options_.on_planning(shapes);
  if (!impl_->always_eager_.empty()) {
    if (impl_->device_.kind != ops::Device::kCpu)
      return unsupported(impl_->always_eager_ + ", on the CPU only").with_context(impl_->device_.to_string());
    Prepared eager;
    SL_ASSIGN_OR_RETURN(eager.plan, plan::make_eager_plan(impl_->graph_, impl_->kernels_.kernels, shapes,
                                                          impl_->always_eager_, eager_layouts(options_)));
    return eager;
  }
  plan::InputShapes in;
  for (size_t i = 0; i < shapes.size(); ++i) in.emplace_back(inputs_[i].name, shapes[i]);
  plan::PlannerOptions po;
  static_cast<PlanChoices&>(po) = options_;  // layouts and streams, whole
  po.num_streams = std::max(1, options_.num_streams);
  po.num_threads = elastic_threads() > 0 ? elastic_threads() : threads_per_stream();
  po.guard_bytes = options_.safe ? 64 : 0;
  po.device = impl_->device_.kind;
  po.registry = impl_->registry_;
  auto p = plan::make_plan(impl_->graph_, impl_->kernels_, in, po);
  Prepared prepared;
  if (p.ok()) {
    prepared.plan = std::move(p).value();
  } else if (impl_->device_.kind != ops::Device::kCpu) {
    return p.status().with_context(impl_->device_.to_string());  // eager execution runs on the CPU only
  } else {
    // Planning needs every shape before the run. When it failed for want of run-time values, the
    // shape set runs eagerly; any other failure stays an error.
    if (p.status().code() != StatusCode::kUnsupported) return p.status();
    auto probe = ops::probe_shapes(impl_->graph_, impl_->kernels_.kernels, shapes);
    if (!probe.ok() || !probe->value_dependent) return p.status();
    SL_ASSIGN_OR_RETURN(prepared.plan, plan::make_eager_plan(impl_->graph_, impl_->kernels_.kernels, shapes,
                                                             probe->reason, eager_layouts(options_)));
    SL_LOG(kInfo) << "shapes " << key << " run eagerly: " << probe->reason;
  }
  return prepared;
}

Result<std::shared_ptr<const plan::ExecutionPlan>> Model::plan_for(const std::vector<Shape>& shapes) const {
  SL_ASSIGN_OR_RETURN(Prepared p, prepare(shapes));
  if (p.plan->eager)
    return unsupported("no plan for shapes " + shapes_key(shapes) + ": they run eagerly because " +
                       p.plan->eager->reason);
  return p.plan;
}

Result<ExecutionMode> Model::execution_mode(const std::vector<Shape>& shapes) const {
  SL_ASSIGN_OR_RETURN(Prepared p, prepare(shapes));
  return p.plan->eager ? ExecutionMode::kEager : ExecutionMode::kPlanned;
}

std::string Model::eager_reason(const std::vector<Shape>& shapes) const {
  std::shared_future<Result<Prepared>> entry;
  {
    std::lock_guard<std::mutex> lock(impl_->plans_mu_);
    auto it = impl_->plans_.find(shapes_key(shapes));
    if (it == impl_->plans_.end()) return {};
    entry = it->second;
  }
  // Not decided yet (still being planned): nothing to say.
  if (entry.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return {};
  const Result<Prepared>& r = entry.get();
  return r.ok() && r->plan->eager ? r->plan->eager->reason : std::string();
}

namespace {

exec::ContextOptions context_options(const Model& m) {
  exec::ContextOptions co;
  co.device = m.device().ordinal;
  co.cuda_graphs = m.options().cuda_graphs;
  if (!m.options().pin_threads) return co;
  const int t = m.threads_per_stream();
  for (int s = 0; s < std::max(1, m.options().num_streams); ++s) co.stream_cores.push_back(core::core_block(s * t, t));
  return co;
}

// The executor's options for one run: the caller's RunOptions (0 threads = the model's per-stream
// default) with the model's own run-time choices. The one place the public RunOptions meets
// exec::RunOptions; eager runs read only the threads and the observer.
exec::RunOptions exec_run_options(const Model& m, const RunOptions& options) {
  exec::RunOptions ro;
  ro.num_threads = options.num_threads > 0 ? options.num_threads : m.threads_per_stream();
  ro.observer = options.observer;
  ro.adapt_threads = options.adapt_threads;
  ro.elastic_threads = m.elastic_threads();
  ro.safe = m.options().safe;
  return ro;
}

}  // namespace

Session::Session(std::shared_ptr<const Model> model) : model_(std::move(model)) {}

Session::~Session() = default;

size_t Session::arena_bytes() const {
  return context_ ? context_->arena_bytes() : 0;
}

Result<std::vector<Tensor>> Session::run(const std::vector<Tensor>& inputs, const RunOptions& options) {
  for (size_t i = 0; i < inputs.size() && i < model_->inputs().size(); ++i)
    if (model_->inputs()[i].kind != ValueKind::kTensor)
      return invalid_argument("input '" + model_->inputs()[i].name + "' is a " +
                              value_type_name(model_->inputs()[i].kind, model_->inputs()[i].dtype) +
                              "; give it with Session::run_values");
  std::vector<Shape> shapes;
  for (const auto& t : inputs) shapes.push_back(t.shape());
  SL_RETURN_IF_ERROR(make_context());
  SL_ASSIGN_OR_RETURN(Model::Prepared prepared, model_->prepare(shapes));
  const plan::ExecutionPlan& plan = *prepared.plan;
  const exec::RunOptions ro = exec_run_options(*model_, options);
  if (plan.eager) {
    std::vector<AnyValue> values;
    SL_RETURN_IF_ERROR(context_->run_values(plan, std::vector<AnyValue>(inputs.begin(), inputs.end()), &values, ro));
    std::vector<Tensor> outs;
    for (size_t i = 0; i < values.size(); ++i) {
      if (!values[i].is_tensor())
        return invalid_argument("output '" + model_->outputs()[i].name + "' is a " +
                                value_type_name(values[i].kind(), values[i].elem_dtype()) +
                                "; take it with Session::run_values");
      outs.push_back(values[i].tensor());
    }
    return outs;
  }
  std::vector<Tensor> outs;
  SL_RETURN_IF_ERROR(context_->run(plan, inputs, &outs, ro));
  return outs;
}

Status Session::make_context() {
  // Made on the first run, so that a missing GPU is an error of run(), not of construction.
  if (!context_) {
    SL_ASSIGN_OR_RETURN(context_, model_->device_weights()->make_context(context_options(*model_)));
  }
  return ok_status();
}

Result<std::vector<AnyValue>> Session::run_values(const std::vector<AnyValue>& inputs, const RunOptions& options) {
  const bool tensors_only =
      std::all_of(inputs.begin(), inputs.end(), [](const AnyValue& v) { return v.is_tensor(); }) &&
      std::all_of(model_->inputs().begin(), model_->inputs().end(),
                  [](const TensorDesc& d) { return d.kind == ValueKind::kTensor; }) &&
      std::all_of(model_->outputs().begin(), model_->outputs().end(),
                  [](const TensorDesc& d) { return d.kind == ValueKind::kTensor; });
  if (tensors_only) {
    std::vector<Tensor> ts;
    for (const AnyValue& v : inputs) ts.push_back(v.tensor());
    SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run(ts, options));
    return std::vector<AnyValue>(std::make_move_iterator(outs.begin()), std::make_move_iterator(outs.end()));
  }
  if (inputs.size() != model_->inputs().size())
    return invalid_argument("model has " + std::to_string(model_->inputs().size()) + " inputs, got " +
                            std::to_string(inputs.size()));
  // The eager decision is cached per shape set; values that are not tensors count as shapeless.
  std::vector<Shape> shapes;
  for (const AnyValue& v : inputs) shapes.push_back(v.is_tensor() ? v.tensor().shape() : Shape{});
  SL_ASSIGN_OR_RETURN(Model::Prepared prepared, model_->prepare(shapes));
  if (!prepared.plan->eager)
    return internal_error("a model with sequence or optional inputs or outputs got a planned plan");
  SL_RETURN_IF_ERROR(make_context());
  std::vector<AnyValue> outs;
  SL_RETURN_IF_ERROR(context_->run_values(*prepared.plan, inputs, &outs, exec_run_options(*model_, options)));
  return outs;
}

Result<std::map<std::string, Tensor>> Session::run(const std::map<std::string, Tensor>& inputs,
                                                   const RunOptions& options) {
  std::vector<Tensor> ordered;
  for (const auto& in : model_->inputs()) {
    auto it = inputs.find(in.name);
    if (it == inputs.end()) return invalid_argument("missing input '" + in.name + "'");
    ordered.push_back(it->second);
  }
  for (const auto& [name, t] : inputs)
    if (std::none_of(model_->inputs().begin(), model_->inputs().end(),
                     [&name = name](const TensorDesc& d) { return d.name == name; }))
      return invalid_argument("model has no input named '" + name + "'");
  SL_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run(ordered, options));
  std::map<std::string, Tensor> named;
  for (size_t i = 0; i < outs.size(); ++i) named.emplace(model_->outputs()[i].name, std::move(outs[i]));
  return named;
}

}  // namespace streamline
