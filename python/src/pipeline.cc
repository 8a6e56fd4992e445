// Pipelines of stages: Python callables as stages (the GIL taken only while the callable runs),
// the ready-made image stages, and model stages over serving models.
#include <algorithm>

#include "bindings.h"

namespace streamline::python {
namespace {

struct PyStage {
  std::shared_ptr<Stage> stage;
};

// Owns the C++ Pipeline; the destructor drains it with the GIL released (Python stages need it).
struct PyPipeline {
  std::unique_ptr<Pipeline> pipeline;
  ~PyPipeline() {
    py::gil_scoped_release nogil;
    pipeline.reset();
  }
};

// Holds a Python callable for a C++ stage; dropped under the GIL.
std::shared_ptr<py::object> hold_callable(py::object fn) {
  return std::shared_ptr<py::object>(new py::object(std::move(fn)), [](py::object* o) {
    if (python_alive()) {
      py::gil_scoped_acquire gil;
      delete o;
    }
  });
}

StageFunction python_stage(py::object fn, std::vector<std::string> outputs) {
  auto held = hold_callable(std::move(fn));
  return [held, outputs](const TensorMap& in, TensorMap& out) -> Status {
    if (!python_alive()) return unavailable("the Python interpreter is shutting down");
    py::gil_scoped_acquire gil;
    try {
      py::object r = (*held)(dict_from_tensors(in, /*writeable=*/false));
      if (!py::isinstance<py::dict>(r))
        return invalid_argument("the Python stage returned " + py::str(py::type::handle_of(r)).cast<std::string>() +
                                ", not a dict of output name -> array");
      py::dict d = py::reinterpret_borrow<py::dict>(r);
      for (auto item : d) {
        const std::string name = py::str(item.first);
        if (std::find(outputs.begin(), outputs.end(), name) == outputs.end())
          return invalid_argument("the Python stage returned '" + name + "', which is not one of its outputs");
        out[name] = tensor_from_numpy(item.second, "output '" + name + "'", Borrow::kShared, nullptr);
      }
      for (const auto& name : outputs)
        if (!out.count(name)) return invalid_argument("the Python stage returned no '" + name + "'");
      return ok_status();
    } catch (py::error_already_set& e) {
      return internal_error(std::string("the Python stage raised ") + e.what());
    } catch (const StatusError& e) {
      return e.status();
    }
  };
}

StageSpec make_spec(std::string name, std::vector<std::string> inputs, std::vector<std::string> outputs, int instances,
                    int queue_capacity, bool serial = false, int max_instances = 0) {
  StageSpec s;
  s.name = std::move(name);
  s.inputs = std::move(inputs);
  s.outputs = std::move(outputs);
  s.instances = instances;
  s.queue_capacity = queue_capacity;
  s.serial = serial;
  s.max_instances = max_instances;
  return s;
}

py::dict move_dict(const RebalanceMove& m) {
  py::dict d;
  d["from"] = m.from;
  d["to"] = m.to;
  d["from_workers"] = m.from_workers;
  d["to_workers"] = m.to_workers;
  d["reason"] = m.reason;
  d["time_us"] = m.time_us;
  return d;
}

py::dict pipeline_stats_dict(const PipelineStats& s) {
  py::dict d;
  d["accepted"] = s.accepted;
  d["succeeded"] = s.succeeded;
  d["failed"] = s.failed;
  py::dict failures;
  for (const auto& [code, n] : s.failures) failures[py::str(status_code_name(code))] = n;
  d["failures"] = failures;
  d["total"] = latency_dict(s.total);
  d["in_flight"] = s.in_flight;
  py::list stages;
  for (const StageStats& st : s.stages) {
    py::dict x;
    x["name"] = st.name;
    x["model"] = st.model;
    x["instances"] = st.instances;
    x["queue_capacity"] = st.queue_capacity;
    x["processed"] = st.processed;
    x["failed"] = st.failed;
    x["skipped"] = st.skipped;
    x["queue"] = latency_dict(st.queue);
    x["process"] = latency_dict(st.process);
    x["queue_depth"] = st.queue_depth;
    x["max_queue_depth"] = st.max_queue_depth;
    x["blocked_producers"] = st.blocked_producers;
    x["in_flight"] = st.in_flight;
    x["workers"] = st.workers;
    x["max_workers"] = st.max_workers;
    x["capacity_per_s"] = st.capacity_per_s;
    x["busy_fraction"] = st.busy_fraction;
    stages.append(x);
  }
  d["stages"] = stages;
  const RebalanceStats& rb = s.rebalance;
  py::dict r;
  r["enabled"] = rb.enabled;
  r["worker_budget"] = rb.worker_budget;
  r["workers"] = rb.workers;
  r["windows"] = rb.windows;
  r["moves"] = rb.moves;
  r["bottleneck"] = rb.bottleneck;
  r["imbalance"] = rb.imbalance;
  r["last_hold"] = rb.last_hold;
  py::list recent;
  for (const RebalanceMove& m : rb.recent) recent.append(move_dict(m));
  r["recent"] = recent;
  d["rebalance"] = r;
  return d;
}

}  // namespace

void bind_pipeline(py::module_& m) {
  py::class_<PyStage>(m, "Stage", "A ready-made stage (streamline.stages).");
  py::module_ st = m.def_submodule("stages", "Ready-made pipeline stages (see namespace stages in pipeline.h).");
  st.def(
      "decode_image",
      [](int channels, int64_t max_pixels) {
        return PyStage{stages::decode_image({.channels = channels, .max_pixels = max_pixels})};
      },
      py::arg("channels") = 3, py::arg("max_pixels") = int64_t{1} << 26);
  st.def(
      "resize_image",
      [](int64_t height, int64_t width, int64_t shorter_side) {
        return PyStage{stages::resize_image({.height = height, .width = width, .shorter_side = shorter_side})};
      },
      py::arg("height") = 224, py::arg("width") = 224, py::arg("shorter_side") = 0);
  const stages::NormalizeImageOptions nd;
  st.def(
      "normalize_image",
      [](std::vector<float> mean, std::vector<float> std, float scale) {
        return PyStage{stages::normalize_image({.mean = mean, .std = std, .scale = scale})};
      },
      py::arg("mean") = nd.mean, py::arg("std") = nd.std, py::arg("scale") = nd.scale);
  st.def("hwc_to_nchw", [] { return PyStage{stages::hwc_to_nchw()}; });
  st.def(
      "preprocess_image",
      [](int64_t height, int64_t width, int64_t shorter_side, std::vector<float> mean, std::vector<float> std,
         float scale) {
        stages::ImagePreprocessOptions o;
        o.resize = {.height = height, .width = width, .shorter_side = shorter_side};
        o.normalize = {.mean = mean, .std = std, .scale = scale};
        return PyStage{stages::preprocess_image(o)};
      },
      py::arg("height") = 224, py::arg("width") = 224, py::arg("shorter_side") = 0, py::arg("mean") = nd.mean,
      py::arg("std") = nd.std, py::arg("scale") = nd.scale);
  st.def(
      "top_k", [](int k, bool softmax) { return PyStage{stages::top_k({.k = k, .softmax = softmax})}; },
      py::arg("k") = 5, py::arg("softmax") = true);

  py::class_<PipelineBuilder>(m, "_PipelineBuilder")
      .def(py::init<>())
      .def(
          "input", [](PipelineBuilder& b, std::string name) { b.input(std::move(name)); }, py::arg("name"))
      .def(
          "output", [](PipelineBuilder& b, std::string name) { b.output(std::move(name)); }, py::arg("name"))
      .def(
          "add_function",
          [](PipelineBuilder& b, std::string name, std::vector<std::string> inputs, std::vector<std::string> outputs,
             py::object fn, int instances, int queue_capacity, bool serial, int max_instances) {
            if (!PyCallable_Check(fn.ptr()))
              throw_status(invalid_argument("stage '" + name + "': fn must be callable"));
            StageFunction f = python_stage(std::move(fn), outputs);
            b.add_function(make_spec(std::move(name), std::move(inputs), std::move(outputs), instances, queue_capacity,
                                     serial, max_instances),
                           std::move(f));
          },
          py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::arg("fn"), py::arg("instances") = 1,
          py::arg("queue_capacity") = 16, py::arg("serial") = false, py::arg("max_instances") = 0)
      .def(
          "add_stage",
          [](PipelineBuilder& b, std::string name, std::vector<std::string> inputs, std::vector<std::string> outputs,
             const PyStage& stage, int instances, int queue_capacity, bool serial, int max_instances) {
            b.add_stage(make_spec(std::move(name), std::move(inputs), std::move(outputs), instances, queue_capacity,
                                  serial, max_instances),
                        stage.stage);
          },
          py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::arg("stage"), py::arg("instances") = 1,
          py::arg("queue_capacity") = 16, py::arg("serial") = false, py::arg("max_instances") = 0)
      .def(
          "add_model",
          [](PipelineBuilder& b, std::string name, std::vector<std::string> inputs, std::vector<std::string> outputs,
             py::handle serving, std::vector<std::string> model_inputs, std::vector<std::string> model_outputs,
             int max_in_flight, int queue_capacity, int max_replicas) {
            ModelStageOptions mo;
            mo.model_inputs = std::move(model_inputs);
            mo.model_outputs = std::move(model_outputs);
            mo.max_in_flight = max_in_flight;
            mo.max_replicas = max_replicas;
            b.add_model(make_spec(std::move(name), std::move(inputs), std::move(outputs), 1, queue_capacity),
                        serving_model_of(serving), std::move(mo));
          },
          py::arg("name"), py::arg("inputs"), py::arg("outputs"), py::arg("model"),
          py::arg("model_inputs") = std::vector<std::string>{}, py::arg("model_outputs") = std::vector<std::string>{},
          py::arg("max_in_flight") = 0, py::arg("queue_capacity") = 16, py::arg("max_replicas") = 1)
      .def(
          "build",
          [](const PipelineBuilder& b, int64_t entry_timeout_us, int stats_window, bool rebalance, int worker_budget,
             int64_t rebalance_window_us) {
            PipelineOptions po;
            po.entry_timeout_us = entry_timeout_us;
            po.stats_window = stats_window;
            po.rebalance.enabled = rebalance;
            po.rebalance.worker_budget = worker_budget;
            po.rebalance.window_us = rebalance_window_us;
            Result<std::unique_ptr<Pipeline>> r = Status(StatusCode::kInternal, "");
            {
              py::gil_scoped_release nogil;
              r = b.build(po);
            }
            auto p = std::make_unique<PyPipeline>();
            p->pipeline = unwrap(std::move(r));
            return p;
          },
          py::arg("entry_timeout_us") = PipelineOptions{}.entry_timeout_us,
          py::arg("stats_window") = PipelineOptions{}.stats_window, py::arg("rebalance") = false,
          py::arg("worker_budget") = 0, py::arg("rebalance_window_us") = RebalanceOptions{}.window_us);

  py::class_<PyPipeline>(m, "_Pipeline")
      .def(
          "submit",
          [](PyPipeline& p, const py::dict& inputs, py::object callback, uint64_t id, int64_t timeout_us,
             std::optional<std::vector<std::string>> outputs) {
            InferRequest req = make_request(inputs, id, -1, timeout_us, outputs);
            InferCallback done = python_callback(std::move(callback));
            py::gil_scoped_release nogil;
            p.pipeline->submit(std::move(req), std::move(done));
          },
          py::arg("inputs"), py::arg("callback"), py::arg("id") = 0, py::arg("timeout_us") = 0,
          py::arg("outputs") = py::none())
      .def(
          "infer",
          [](PyPipeline& p, const py::dict& inputs, uint64_t id, int64_t timeout_us,
             std::optional<std::vector<std::string>> outputs) {
            InferRequest req = make_request(inputs, id, -1, timeout_us, outputs);
            InferResponse r;
            {
              py::gil_scoped_release nogil;
              r = p.pipeline->infer(std::move(req));
            }
            check(r.status);
            return dict_from_tensors(r.outputs);
          },
          py::arg("inputs"), py::arg("id") = 0, py::arg("timeout_us") = 0, py::arg("outputs") = py::none())
      .def("stats",
           [](PyPipeline& p) {
             PipelineStats s;
             {
               py::gil_scoped_release nogil;
               s = p.pipeline->stats();
             }
             return pipeline_stats_dict(s);
           })
      .def("step_rebalancer",
           [](PyPipeline& p) {
             std::vector<RebalanceMove> moves;
             {
               py::gil_scoped_release nogil;
               moves = p.pipeline->step_rebalancer();
             }
             py::list out;
             for (const RebalanceMove& m : moves) out.append(move_dict(m));
             return out;
           })
      .def(
          "shutdown",
          [](PyPipeline& p, const std::string& mode) {
            if (mode != "drain" && mode != "cancel")
              throw_status(invalid_argument("shutdown mode must be 'drain' or 'cancel', got '" + mode + "'"));
            py::gil_scoped_release nogil;
            p.pipeline->shutdown(mode == "drain" ? ShutdownMode::kDrain : ShutdownMode::kCancel);
          },
          py::arg("mode") = "drain")
      .def_property_readonly("input_names", [](PyPipeline& p) { return p.pipeline->input_names(); })
      .def_property_readonly("output_names", [](PyPipeline& p) { return p.pipeline->output_names(); });
}

}  // namespace streamline::python
