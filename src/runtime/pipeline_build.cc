// PipelineBuilder: collects stages, checks the graph (names, producers, cycles, model wiring) and
// turns it into a PipelineImpl with dense tensor ids and stages in topological order.

#include <algorithm>
#include <set>
#include <string>

#include "runtime/instance_pool.h"
#include "runtime/pipeline_impl.h"

namespace streamline {
namespace {

constexpr int kMaxQueueCapacity = 1 << 20;

// Adapts a StageFunction (tensors by name) to the positional Stage interface.
class FunctionStage final : public Stage {
 public:
  FunctionStage(std::vector<std::string> inputs, std::vector<std::string> outputs, StageFunction fn)
      : inputs_(std::move(inputs)), outputs_(std::move(outputs)), fn_(std::move(fn)) {}

  Status validate(const StageSpec&) const override { return fn_ ? ok_status() : invalid_argument("no function given"); }

  Status process(StageIO& io) override {
    TensorMap in;
    for (size_t i = 0; i < inputs_.size() && i < io.inputs.size(); ++i) in.emplace(inputs_[i], io.inputs[i]);
    TensorMap out;
    SL_RETURN_IF_ERROR(fn_(in, out));
    for (const auto& [name, t] : out)
      if (std::find(outputs_.begin(), outputs_.end(), name) == outputs_.end())
        return internal_error("wrote '" + name + "', which is not one of its outputs");
    for (size_t i = 0; i < outputs_.size(); ++i) {
      auto it = out.find(outputs_[i]);
      if (it == out.end()) return internal_error("did not write its output '" + outputs_[i] + "'");
      io.outputs[i] = std::move(it->second);
    }
    return ok_status();
  }

 private:
  std::vector<std::string> inputs_, outputs_;
  StageFunction fn_;
};

std::string quoted_list(const std::vector<std::string>& names, const char* sep) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? sep : "") + ("'" + names[i] + "'");
  return s;
}

Status check_spec(const StageSpec& s) {
  const std::string where = "stage '" + s.name + "': ";
  if (s.name.empty()) return invalid_argument("a stage has no name");
  if (s.inputs.empty()) return invalid_argument(where + "reads no tensor");
  if (s.outputs.empty()) return invalid_argument(where + "writes no tensor");
  if (s.instances < 1 || s.instances > runtime::kMaxInstances)
    return invalid_argument(where + "instances must be in [1, " + std::to_string(runtime::kMaxInstances) + "], got " +
                            std::to_string(s.instances));
  if (s.serial && s.instances != 1)
    return invalid_argument(where + "a serial stage has one worker, got instances " + std::to_string(s.instances));
  if (s.max_instances != 0 && (s.max_instances < s.instances || s.max_instances > runtime::kMaxInstances))
    return invalid_argument(where + "max_instances must be 0 or in [instances, " +
                            std::to_string(runtime::kMaxInstances) + "], got " + std::to_string(s.max_instances));
  if (s.queue_capacity < 1 || s.queue_capacity > kMaxQueueCapacity)
    return invalid_argument(where + "queue_capacity must be in [1, " + std::to_string(kMaxQueueCapacity) + "], got " +
                            std::to_string(s.queue_capacity));
  std::set<std::string> seen;
  for (const auto* list : {&s.inputs, &s.outputs})
    for (const auto& n : *list) {
      if (n.empty()) return invalid_argument(where + "has an empty tensor name");
      if (!seen.insert(n).second) return invalid_argument(where + "names tensor '" + n + "' twice");
    }
  return ok_status();
}

// Model stage wiring: names resolved against the model's declared inputs and outputs.
Status resolve_model_names(const StageSpec& s, const ServingModel* model, const ModelStageOptions& o,
                           std::vector<std::string>* ins, std::vector<std::string>* outs) {
  const std::string where = "stage '" + s.name + "': ";
  if (!model) return invalid_argument(where + "no model given");
  if (!o.model_inputs.empty() && o.model_inputs.size() != s.inputs.size())
    return invalid_argument(where + "model_inputs names " + std::to_string(o.model_inputs.size()) + " tensors for " +
                            std::to_string(s.inputs.size()) + " inputs");
  if (!o.model_outputs.empty() && o.model_outputs.size() != s.outputs.size())
    return invalid_argument(where + "model_outputs names " + std::to_string(o.model_outputs.size()) + " tensors for " +
                            std::to_string(s.outputs.size()) + " outputs");
  if (o.max_in_flight < 0) return invalid_argument(where + "max_in_flight must be >= 0");
  if (o.max_replicas < 1 || o.max_replicas > runtime::kMaxInstances)
    return invalid_argument(where + "max_replicas must be in [1, " + std::to_string(runtime::kMaxInstances) +
                            "], got " + std::to_string(o.max_replicas));
  *ins = o.model_inputs.empty() ? s.inputs : o.model_inputs;
  *outs = o.model_outputs.empty() ? s.outputs : o.model_outputs;
  const auto& mi = model->model().inputs();
  const auto& mo = model->model().outputs();
  auto has = [](const std::vector<TensorDesc>& d, const std::string& n) {
    return std::any_of(d.begin(), d.end(), [&](const TensorDesc& x) { return x.name == n; });
  };
  for (const auto& n : *ins)
    if (!has(mi, n)) return invalid_argument(where + "the model has no input named '" + n + "'");
  for (const auto& d : mi)
    if (std::find(ins->begin(), ins->end(), d.name) == ins->end())
      return invalid_argument(where + "nothing feeds the model input '" + d.name + "'");
  for (const auto& n : *outs)
    if (!has(mo, n)) return invalid_argument(where + "the model has no output named '" + n + "'");
  if (std::set<std::string>(ins->begin(), ins->end()).size() != ins->size())
    return invalid_argument(where + "model_inputs names a model input twice");
  return ok_status();
}

// Names the stages of one cycle among `left` (stages Kahn's algorithm could not order).
std::string describe_cycle(const std::vector<std::vector<int>>& next, const std::vector<bool>& left,
                           const std::vector<std::string>& names) {
  // Every stage left over has a predecessor left over, so walking predecessors must repeat.
  std::vector<std::vector<int>> prev(next.size());
  for (size_t a = 0; a < next.size(); ++a)
    for (int b : next[a]) prev[static_cast<size_t>(b)].push_back(static_cast<int>(a));
  int cur = static_cast<int>(std::find(left.begin(), left.end(), true) - left.begin());
  std::vector<int> order;
  std::vector<int> pos(next.size(), -1);
  while (pos[static_cast<size_t>(cur)] < 0) {
    pos[static_cast<size_t>(cur)] = static_cast<int>(order.size());
    order.push_back(cur);
    for (int p : prev[static_cast<size_t>(cur)])
      if (left[static_cast<size_t>(p)]) {
        cur = p;
        break;
      }
  }
  std::vector<std::string> cycle;
  for (size_t i = order.size(); i-- > static_cast<size_t>(pos[static_cast<size_t>(cur)]);)
    cycle.push_back(names[static_cast<size_t>(order[i])]);
  cycle.push_back(cycle.front());
  return quoted_list(cycle, " -> ");
}

Status check_rebalance(const RebalanceOptions& r) {
  const std::string where = "rebalance: ";
  if (r.worker_budget < 0) return invalid_argument(where + "worker_budget must be >= 0");
  if (r.window_us < 1000) return invalid_argument(where + "window_us must be >= 1000");
  if (r.confirm_windows < 1) return invalid_argument(where + "confirm_windows must be >= 1");
  if (r.cooldown_windows < 0) return invalid_argument(where + "cooldown_windows must be >= 0");
  if (!(r.margin >= 0 && r.margin <= 1)) return invalid_argument(where + "margin must be in [0, 1]");
  if (r.min_items < 1) return invalid_argument(where + "min_items must be >= 1");
  return ok_status();
}

}  // namespace

PipelineBuilder& PipelineBuilder::input(std::string name) {
  inputs_.push_back(std::move(name));
  return *this;
}

PipelineBuilder& PipelineBuilder::output(std::string name) {
  outputs_.push_back(std::move(name));
  return *this;
}

PipelineBuilder& PipelineBuilder::add_stage(StageSpec spec, std::shared_ptr<Stage> stage) {
  Entry e;
  e.spec = std::move(spec);
  e.shared = std::move(stage);
  entries_.push_back(std::move(e));
  return *this;
}

PipelineBuilder& PipelineBuilder::add_stage_per_instance(StageSpec spec,
                                                         std::function<std::unique_ptr<Stage>()> factory) {
  Entry e;
  e.spec = std::move(spec);
  e.factory = std::move(factory);
  entries_.push_back(std::move(e));
  return *this;
}

PipelineBuilder& PipelineBuilder::add_function(StageSpec spec, StageFunction fn) {
  auto stage = std::make_shared<FunctionStage>(spec.inputs, spec.outputs, std::move(fn));
  return add_stage(std::move(spec), std::move(stage));
}

PipelineBuilder& PipelineBuilder::add_model(StageSpec spec, std::shared_ptr<ServingModel> model,
                                            ModelStageOptions options) {
  Entry e;
  e.spec = std::move(spec);
  e.model = std::move(model);
  e.model_options = std::move(options);
  e.is_model = true;
  entries_.push_back(std::move(e));
  return *this;
}

Result<std::unique_ptr<Pipeline>> PipelineBuilder::build(const PipelineOptions& options) const {
  using runtime::StageRuntime;
  if (options.entry_timeout_us < 0) return invalid_argument("entry_timeout_us must be >= 0");
  if (options.stats_window < 1) return invalid_argument("stats_window must be >= 1");
  SL_RETURN_IF_ERROR(check_rebalance(options.rebalance));
  if (entries_.empty()) return invalid_argument("the pipeline has no stages");
  if (inputs_.empty()) return invalid_argument("the pipeline declares no inputs");
  auto impl = std::make_unique<runtime::PipelineImpl>();
  impl->options = options;
  const size_t window = static_cast<size_t>(options.stats_window);
  impl->total_window_ = runtime::LatencyWindow(window);

  // Pass 1: names. Tensor ids: pipeline inputs first, then stage outputs in stage order.
  std::map<std::string, int> tensor_id;
  std::vector<int> producer;  // by tensor id: stage index, -1 for pipeline inputs
  for (const auto& n : inputs_) {
    if (n.empty()) return invalid_argument("a pipeline input has an empty name");
    if (!tensor_id.emplace(n, static_cast<int>(producer.size())).second)
      return invalid_argument("pipeline input '" + n + "' is declared twice");
    impl->tensor_names.push_back(n);
    producer.push_back(-1);
  }
  const size_t n_stages = entries_.size();
  std::vector<std::string> stage_names;
  for (size_t s = 0; s < n_stages; ++s) {
    const StageSpec& spec = entries_[s].spec;
    SL_RETURN_IF_ERROR(check_spec(spec));
    if (std::find(stage_names.begin(), stage_names.end(), spec.name) != stage_names.end())
      return invalid_argument("two stages are named '" + spec.name + "'");
    stage_names.push_back(spec.name);
    for (const auto& out : spec.outputs) {
      auto [it, fresh] = tensor_id.emplace(out, static_cast<int>(producer.size()));
      if (!fresh) {
        const int p = producer[static_cast<size_t>(it->second)];
        return invalid_argument("tensor '" + out + "' is written by stage '" + spec.name + "' and " +
                                (p < 0 ? std::string("is a pipeline input")
                                       : "also by stage '" + stage_names[static_cast<size_t>(p)] + "'"));
      }
      impl->tensor_names.push_back(out);
      producer.push_back(static_cast<int>(s));
    }
  }
  // Pass 2: every read has a producer; stage edges.
  std::vector<std::vector<int>> next(n_stages);
  std::vector<int> indegree(n_stages, 0);
  std::vector<std::vector<int>> in_ids(n_stages);
  for (size_t s = 0; s < n_stages; ++s) {
    std::set<int> from;
    for (const auto& in : entries_[s].spec.inputs) {
      auto it = tensor_id.find(in);
      if (it == tensor_id.end())
        return invalid_argument("stage '" + stage_names[s] + "' reads '" + in +
                                "', which no stage writes and no pipeline input declares");
      in_ids[s].push_back(it->second);
      const int p = producer[static_cast<size_t>(it->second)];
      if (p >= 0) from.insert(p);
    }
    for (int p : from) {
      next[static_cast<size_t>(p)].push_back(static_cast<int>(s));
      ++indegree[s];
    }
  }
  // Pass 3: topological order (Kahn, ties by the order stages were added); leftovers are cycles.
  std::vector<int> topo;
  {
    std::vector<int> deg = indegree;
    std::vector<bool> done(n_stages, false);
    while (topo.size() < n_stages) {
      int pick = -1;
      for (size_t s = 0; s < n_stages && pick < 0; ++s)
        if (!done[s] && deg[s] == 0) pick = static_cast<int>(s);
      if (pick < 0) {
        std::vector<bool> left(n_stages);
        for (size_t s = 0; s < n_stages; ++s) left[s] = !done[s];
        return invalid_argument("the stages form a cycle: " + describe_cycle(next, left, stage_names));
      }
      done[static_cast<size_t>(pick)] = true;
      topo.push_back(pick);
      for (int c : next[static_cast<size_t>(pick)]) --deg[static_cast<size_t>(c)];
    }
  }
  std::vector<int> topo_pos(n_stages);
  for (size_t i = 0; i < n_stages; ++i) topo_pos[static_cast<size_t>(topo[i])] = static_cast<int>(i);
  // Pass 4: outputs; by default the stage outputs nobody reads.
  std::vector<bool> read(producer.size(), false);
  for (const auto& ids : in_ids)
    for (int t : ids) read[static_cast<size_t>(t)] = true;
  impl->input_names = inputs_;
  for (const auto& n : inputs_) impl->input_ids.push_back(tensor_id.at(n));
  if (outputs_.empty()) {
    for (int s : topo)
      for (const auto& out : entries_[static_cast<size_t>(s)].spec.outputs)
        if (!read[static_cast<size_t>(tensor_id.at(out))]) impl->output_names.push_back(out);
  } else {
    for (const auto& n : outputs_) {
      if (!tensor_id.count(n)) return invalid_argument("pipeline output '" + n + "' is not a tensor of the pipeline");
      if (std::find(impl->output_names.begin(), impl->output_names.end(), n) != impl->output_names.end())
        return invalid_argument("pipeline output '" + n + "' is declared twice");
      impl->output_names.push_back(n);
    }
  }
  for (const auto& n : impl->output_names) impl->output_ids.push_back(tensor_id.at(n));
  impl->readers.assign(producer.size(), 0);
  impl->is_output.assign(producer.size(), false);
  for (const auto& ids : in_ids)
    for (int t : ids) ++impl->readers[static_cast<size_t>(t)];
  for (int t : impl->output_ids) impl->is_output[static_cast<size_t>(t)] = true;
  // Pass 5: stage objects, checked against their wiring; runtime state in topological order.
  for (int s : topo) {
    const Entry& e = entries_[static_cast<size_t>(s)];
    const std::string where = "stage '" + e.spec.name + "': ";
    auto st = std::make_shared<StageRuntime>(e.spec, window);
    st->index = static_cast<int>(impl->stages.size());
    st->is_model = e.is_model;
    if (e.is_model) {
      SL_RETURN_IF_ERROR(
          resolve_model_names(e.spec, e.model.get(), e.model_options, &st->model_inputs, &st->model_outputs));
      st->model = e.model.get();
      impl->models.push_back(e.model);
      const ServingOptions& so = e.model->options();
      st->max_in_flight = e.model_options.max_in_flight > 0
                              ? e.model_options.max_in_flight
                              : 2 * std::max(1, so.batching.max_batch_size) * std::max(1, so.instances);
      st->auto_in_flight = e.model_options.max_in_flight == 0;
      st->replicas = {st->model};
      st->replica_in_flight = {0};
      st->max_replicas = e.model_options.max_replicas;
      st->min_workers = std::max(1, so.instances);
      st->max_workers = st->min_workers + st->max_replicas - 1;
    } else if (e.shared) {
      st->shared = e.shared;
      const Status v = e.shared->validate(e.spec);
      if (!v.ok()) return v.with_context("stage '" + e.spec.name + "'");
    } else if (e.factory) {
      st->factory = e.factory;
      for (int i = 0; i < e.spec.instances; ++i) {
        std::unique_ptr<Stage> obj = e.factory();
        if (!obj) return invalid_argument(where + "its factory returned no stage");
        const Status v = obj->validate(e.spec);
        if (!v.ok()) return v.with_context("stage '" + e.spec.name + "'");
        st->owned.push_back(std::move(obj));
      }
    } else {
      return invalid_argument(where + "no stage object given");
    }
    st->in_ids = in_ids[static_cast<size_t>(s)];
    for (const auto& out : e.spec.outputs) st->out_ids.push_back(tensor_id.at(out));
    st->producers = indegree[static_cast<size_t>(s)];
    for (int c : next[static_cast<size_t>(s)]) st->consumers.push_back(topo_pos[static_cast<size_t>(c)]);
    std::sort(st->consumers.begin(), st->consumers.end());
    if (st->producers == 0) impl->entry_stages.push_back(st->index);
    impl->stages.push_back(std::move(st));
  }
  // Pass 6: rebalancing limits. The budget counts plain stages' workers and model instances.
  const RebalanceOptions& ro = options.rebalance;
  impl->rebalancing_ = ro.enabled || ro.worker_budget > 0 || ro.cores;
  int start_workers = 0;
  std::vector<int> start;
  for (const auto& st : impl->stages) {
    start.push_back(st->is_model ? st->min_workers : st->spec.instances);
    start_workers += start.back();
  }
  impl->worker_budget_ = ro.worker_budget > 0 ? ro.worker_budget : ro.cores ? runtime::kMaxInstances : start_workers;
  if (impl->rebalancing_ && impl->worker_budget_ < start_workers)
    return invalid_argument("rebalance: worker_budget " + std::to_string(impl->worker_budget_) + " is below the " +
                            std::to_string(start_workers) + " workers the stages start with");
  int sum_min = 0;  // every stage keeps one worker (model stages their model's instances)
  for (const auto& st : impl->stages) sum_min += st->is_model ? st->min_workers : 1;
  for (const auto& st : impl->stages) {
    if (st->is_model) {
      if (!impl->rebalancing_) st->max_workers = st->min_workers;
      continue;
    }
    int most = st->spec.instances;
    if (impl->rebalancing_ && !st->spec.serial)
      most = std::min({st->spec.max_instances > 0 ? st->spec.max_instances : runtime::kMaxInstances,
                       impl->worker_budget_ - sum_min + 1, runtime::kMaxInstances});
    st->min_workers = 1;
    st->max_workers = std::max(most, st->spec.instances);
    if (st->factory) st->owned.resize(static_cast<size_t>(st->max_workers));
  }
  if (ro.cores) {
    impl->cores_floor_ = impl->cores_held_ = impl->cores_for(start);
    (void)ro.cores->try_hold(impl.get(), impl->cores_floor_, impl->cores_floor_);  // within the floor: always
  }
  impl->start();
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(impl)));
}

}  // namespace streamline
