// A configuration tied to its model: derived from the model, completed and checked against it,
// turned into the runtime's options, and written back as Triton's JSON (model_config.h).

#include <algorithm>

#include "runtime/device.h"
#include "serve/config_params.h"
#include "serve/json_util.h"
#include "serve/model_config.h"
#include "serve/priority.h"

namespace streamline::serve {
namespace {

int int_param(const ModelConfig& c, const char* key, int fallback) {
  auto it = c.parameters.find(key);
  if (it == c.parameters.end()) return fallback;
  const auto v = parse_config_int(it->second);
  return v ? static_cast<int>(std::clamp<int64_t>(*v, 0, 1 << 20)) : fallback;
}

bool bool_param(const ModelConfig& c, const char* key, bool fallback) {
  auto it = c.parameters.find(key);
  if (it == c.parameters.end()) return fallback;
  return parse_config_bool(it->second).value_or(fallback);
}

}  // namespace

ModelConfig derive_model_config(const std::string& name, const Model& model) {
  ModelConfig c;
  c.name = name;
  c.platform = "onnxruntime_onnx";
  c.backend = "streamline";
  bool batchable = !model.inputs().empty();
  for (const auto& in : model.inputs())
    if (in.dims.empty() || in.dims[0] >= 0) batchable = false;
  c.max_batch_size = batchable ? 8 : 0;
  auto strip = [&](const TensorDesc& d) {
    TensorConfig t;
    t.name = d.name;
    t.dtype = d.dtype;
    t.dims = d.dims;
    if (batchable && !t.dims.empty()) t.dims.erase(t.dims.begin());
    return t;
  };
  for (const auto& d : model.inputs()) c.inputs.push_back(strip(d));
  for (const auto& d : model.outputs()) c.outputs.push_back(strip(d));
  return c;
}

Status complete_config(ModelConfig& config, const Model& model) {
  const bool batch = config.max_batch_size > 0;
  auto complete = [&](std::vector<TensorConfig>& cfg, const std::vector<TensorDesc>& descs,
                      const std::string& kind) -> Status {
    for (TensorConfig& t : cfg) {
      const std::string what = kind + " '" + t.name + "'";
      auto d = std::find_if(descs.begin(), descs.end(), [&](const TensorDesc& x) { return x.name == t.name; });
      if (d == descs.end()) {
        std::string names;
        for (const auto& x : descs) names += (names.empty() ? "" : ", ") + x.name;
        return invalid_argument(what + ": the model has no " + kind + " of that name (it has: " + names + ")");
      }
      if (t.dtype == DType::kUndefined) {
        t.dtype = d->dtype;
      } else if (t.dtype != d->dtype) {
        return invalid_argument(what + ": the config says " + dtype_to_config(t.dtype) + ", the model has " +
                                dtype_to_config(d->dtype));
      }
      if (d->dims.empty()) continue;  // rank unknown to the model: the config's dims stand
      std::vector<int64_t> dims = d->dims;
      if (batch) {
        if (kind == "input" && dims[0] >= 0)
          return invalid_argument(what + ": max_batch_size is " + std::to_string(config.max_batch_size) +
                                  " but the model's first dimension is " + std::to_string(dims[0]) +
                                  ", not variable; set max_batch_size: 0");
        dims.erase(dims.begin());
      }
      if (t.dims.empty() && !dims.empty()) {
        t.dims = dims;
        continue;
      }
      bool same = t.dims.size() == dims.size();
      for (size_t i = 0; same && i < dims.size(); ++i) same = t.dims[i] == -1 || dims[i] == -1 || t.dims[i] == dims[i];
      if (!same) {
        auto str = [](const std::vector<int64_t>& v) {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i) {
            if (i) s += ',';
            s += std::to_string(v[i]);
          }
          return s + "]";
        };
        return invalid_argument(what + ": the config's dims " + str(t.dims) + " do not fit the model's " + str(dims) +
                                (batch ? " (without the batch dimension)" : ""));
      }
    }
    for (const auto& d : descs) {
      if (std::any_of(cfg.begin(), cfg.end(), [&](const TensorConfig& t) { return t.name == d.name; })) continue;
      TensorConfig t;
      t.name = d.name;
      t.dtype = d.dtype;
      t.dims = d.dims;
      if (batch && !t.dims.empty()) {
        if (kind == "input" && t.dims[0] >= 0)
          return invalid_argument(kind + " '" + d.name + "': max_batch_size is " +
                                  std::to_string(config.max_batch_size) + " but the model's first dimension is " +
                                  std::to_string(t.dims[0]) + ", not variable; set max_batch_size: 0");
        t.dims.erase(t.dims.begin());
      }
      cfg.push_back(std::move(t));
    }
    return ok_status();
  };
  SL_RETURN_IF_ERROR(complete(config.inputs, model.inputs(), "input"));
  return complete(config.outputs, model.outputs(), "output");
}

ServingOptions serving_options(const ModelConfig& config) {
  ServingOptions so;
  so.instances = std::max(1, config.instance_count);
  so.batching = config.batching;
  so.batching.max_batch_size = config.dynamic_batching ? std::max(1, config.max_batch_size) : 1;
  so.threads_per_instance = int_param(config, "threads", 0);
  so.pin = bool_param(config, "pin", false);
  so.warmup = bool_param(config, "warmup", true);
  so.batching.queue.admission = bool_param(config, "admission", true);
  if (auto it = config.parameters.find(kLatencySloParam); it != config.parameters.end())
    if (auto ms = parse_config_ms(it->second))
      so.batching.queue.latency_objective_us = static_cast<int64_t>(*ms * 1000);
  so.controller.enabled = so.batching.queue.latency_objective_us > 0 && bool_param(config, kControllerParam, true);
  if (auto it = config.parameters.find(kControlWindowParam); it != config.parameters.end())
    if (auto ms = parse_config_ms(it->second))
      so.controller.window_us = std::max<int64_t>(1, static_cast<int64_t>(*ms * 1000));
  so.controller.name = config.name;
  return so;
}

ModelOptions model_options(const ModelConfig& config) {
  ModelOptions mo;
  mo.num_streams = std::max(1, int_param(config, "streams", 1));
  mo.num_threads = int_param(config, "threads", 0);
  mo.threads_per_stream = int_param(config, "threads_per_stream", 0);
  mo.pin_threads = bool_param(config, "pin", false);
  mo.elastic_threads = bool_param(config, "elastic_threads", false);
  mo.split_convs = int_param(config, "split_convs", 0);
  if (config.instance_kind == "KIND_GPU") {
    // One GPU listed: every instance there; none: instances spread over all GPUs. Several listed:
    // the first (instances of one model share one weights copy per GPU they run on).
    mo.device = config.gpus.empty() ? "cuda" : "cuda:" + std::to_string(config.gpus.front());
  }
  auto it = config.parameters.find("precision");
  if (it != config.parameters.end()) {
    auto p = runtime::parse_precision(it->second);
    if (p.ok()) mo.precision = *p;
  }
  mo.cuda_graphs = bool_param(config, "cuda_graphs", true);
  mo.winograd = bool_param(config, "winograd", true);
  return mo;
}

std::string model_config_json(const ModelConfig& c) {
  JsonOut out;
  JsonWriter& w = out.w;
  auto tensors = [&](const char* key, const std::vector<TensorConfig>& ts) {
    json_key(w, key);
    w.StartArray();
    for (const auto& t : ts) {
      w.StartObject();
      json_key_string(w, "name", t.name);
      json_key_string(w, "data_type", dtype_to_config(t.dtype));
      json_key(w, "dims");
      json_int_array(w, t.dims);
      if (!t.label_filename.empty()) json_key_string(w, "label_filename", t.label_filename);
      w.EndObject();
    }
    w.EndArray();
  };
  w.StartObject();
  json_key_string(w, "name", c.name);
  json_key_string(w, "platform", c.platform);
  json_key_string(w, "backend", c.backend);
  json_key(w, "version_policy");
  w.StartObject();
  if (c.version_policy == VersionPolicyKind::kAll) {
    json_key(w, "all");
    w.StartObject();
    w.EndObject();
  } else if (c.version_policy == VersionPolicyKind::kSpecific) {
    json_key(w, "specific");
    w.StartObject();
    json_key(w, "versions");
    json_int_array(w, c.specific_versions);
    w.EndObject();
  } else {
    json_key(w, "latest");
    w.StartObject();
    json_key_int(w, "num_versions", c.latest_versions);
    w.EndObject();
  }
  w.EndObject();
  json_key_int(w, "max_batch_size", c.max_batch_size);
  tensors("input", c.inputs);
  tensors("output", c.outputs);
  json_key(w, "instance_group");
  w.StartArray();
  w.StartObject();
  json_key_string(w, "name", c.name + "_0");
  json_key_string(w, "kind", c.instance_kind);
  json_key_int(w, "count", c.instance_count);
  w.EndObject();
  w.EndArray();
  if (c.dynamic_batching) {
    const BatchPolicy& b = c.batching;
    const bool priorities = b.priority_levels > 1;
    json_key(w, "dynamic_batching");
    w.StartObject();
    json_key(w, "preferred_batch_size");
    w.StartArray();
    for (int s : b.preferred_batch_sizes) w.Int(s);
    w.EndArray();
    json_key_int(w, "max_queue_delay_microseconds", b.max_queue_delay_us);
    json_key(w, "preserve_ordering");
    w.Bool(b.preserve_ordering);
    json_key_int(w, "priority_levels", priorities ? b.priority_levels : 0);
    json_key_int(w, "default_priority_level",
                 priorities ? static_cast<int64_t>(priority_to_wire(b.default_priority)) : 0);
    json_key(w, "default_queue_policy");
    w.StartObject();
    json_key_string(w, "timeout_action", b.queue.timeout_action == TimeoutAction::kDelay ? "DELAY" : "REJECT");
    json_key_int(w, "default_timeout_microseconds", b.queue.default_timeout_us);
    json_key(w, "allow_timeout_override");
    w.Bool(b.queue.allow_timeout_override);
    json_key_int(w, "max_queue_size", b.queue.max_queue_size);
    w.EndObject();
    w.EndObject();
  }
  json_key(w, "model_transaction_policy");
  w.StartObject();
  json_key(w, "decoupled");
  w.Bool(c.decoupled);
  w.EndObject();
  json_key(w, "parameters");
  w.StartObject();
  for (const auto& [k, v] : c.parameters) {
    json_key(w, k);
    w.StartObject();
    json_key_string(w, "string_value", v);
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  return out.str();
}

}  // namespace streamline::serve
