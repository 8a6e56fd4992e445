// The in-process serving model: instances sharing one model's weights, the dynamic batcher, and
// completion callbacks that the Python layer turns into futures.
#include "bindings.h"

namespace streamline::python {
namespace {

// Owns the C++ ServingModel; the destructor drains it with the GIL released, since instance
// threads may need the GIL to finish their callbacks.
struct PyServing {
  std::shared_ptr<ServingModel> model;
  ~PyServing() {
    py::gil_scoped_release nogil;
    model.reset();
  }
};

py::dict stats_dict(const ServingStats& s) {
  py::dict d;
  d["accepted"] = s.accepted;
  d["succeeded"] = s.succeeded;
  d["failed"] = s.failed;
  py::dict failures;
  for (const auto& [code, n] : s.failures) failures[py::str(status_code_name(code))] = n;
  d["failures"] = failures;
  d["queue"] = latency_dict(s.queue);
  d["compute"] = latency_dict(s.compute);
  d["total"] = latency_dict(s.total);
  d["batch_size_hist"] = s.batch_size_hist;
  d["batches"] = s.batches;
  d["in_flight"] = s.in_flight;
  d["queued"] = s.queued;
  d["instance_busy_us"] = s.instance_busy_us;
  return d;
}

ShutdownMode shutdown_mode(const std::string& mode) {
  if (mode == "drain") return ShutdownMode::kDrain;
  if (mode == "cancel") return ShutdownMode::kCancel;
  throw_status(invalid_argument("shutdown mode must be 'drain' or 'cancel', got '" + mode + "'"));
}

}  // namespace

py::dict latency_dict(const LatencySummary& l) {
  py::dict d;
  d["count"] = l.count;
  d["sum_us"] = l.sum_us;
  d["p50_us"] = l.p50_us;
  d["p90_us"] = l.p90_us;
  d["p99_us"] = l.p99_us;
  return d;
}

InferRequest make_request(const py::dict& inputs, uint64_t id, int priority, int64_t timeout_us,
                          const std::optional<std::vector<std::string>>& outputs) {
  InferRequest r;
  r.id = id;
  r.priority = priority;
  r.timeout_us = timeout_us;
  r.inputs = tensors_from_dict(inputs, "request input");
  if (outputs) r.requested_outputs = *outputs;
  return r;
}

InferCallback python_callback(py::object callback) {
  // The callable is dropped under the GIL: after its call, or by whichever thread drops the last
  // copy of the std::function if it never ran.
  std::shared_ptr<py::object> cb(new py::object(std::move(callback)), [](py::object* o) {
    if (!o->ptr()) {
      delete o;
    } else if (python_alive()) {
      py::gil_scoped_acquire gil;
      delete o;
    }
  });
  return [cb](InferResponse r) {
    if (!python_alive()) return;
    py::gil_scoped_acquire gil;
    try {
      py::object outputs = py::none(), error = py::none();
      if (r.status.ok()) {
        try {
          outputs = dict_from_tensors(r.outputs);
        } catch (const StatusError& e) {
          error = error_object(e.status());
        }
      } else {
        error = error_object(r.status);
      }
      r.outputs.clear();
      (*cb)(outputs, error);
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("streamline completion callback");
    }
    cb->release().dec_ref();
  };
}

std::shared_ptr<ServingModel> serving_model_of(py::handle pyserving) {
  return pyserving.cast<PyServing&>().model;
}

void bind_serving(py::module_& m) {
  py::enum_<TimeoutAction>(m, "TimeoutAction")
      .value("REJECT", TimeoutAction::kReject)
      .value("DELAY", TimeoutAction::kDelay);

  py::class_<QueuePolicy>(m, "QueuePolicy", "Queue limits and timeouts (see QueuePolicy in serving.h).")
      .def(py::init(&from_kwargs<QueuePolicy>))
      .def_readwrite("max_queue_size", &QueuePolicy::max_queue_size)
      .def_readwrite("default_timeout_us", &QueuePolicy::default_timeout_us)
      .def_readwrite("timeout_action", &QueuePolicy::timeout_action)
      .def_readwrite("allow_timeout_override", &QueuePolicy::allow_timeout_override);

  py::class_<BatchPolicy>(m, "BatchPolicy", "How requests are merged into batches (see BatchPolicy in serving.h).")
      .def(py::init(&from_kwargs<BatchPolicy>))
      .def_readwrite("max_batch_size", &BatchPolicy::max_batch_size)
      .def_readwrite("preferred_batch_sizes", &BatchPolicy::preferred_batch_sizes)
      .def_readwrite("max_queue_delay_us", &BatchPolicy::max_queue_delay_us)
      .def_readwrite("priority_levels", &BatchPolicy::priority_levels)
      .def_readwrite("default_priority", &BatchPolicy::default_priority)
      .def_readwrite("queue", &BatchPolicy::queue)
      .def_readwrite("preserve_ordering", &BatchPolicy::preserve_ordering);

  py::class_<ServingOptions>(m, "ServingOptions", "Instances, batching and threads (see ServingOptions in serving.h).")
      .def(py::init(&from_kwargs<ServingOptions>))
      .def_readwrite("instances", &ServingOptions::instances)
      .def_readwrite("batching", &ServingOptions::batching)
      .def_readwrite("threads_per_instance", &ServingOptions::threads_per_instance)
      .def_readwrite("pin", &ServingOptions::pin)
      .def_readwrite("warmup", &ServingOptions::warmup)
      .def_readwrite("stats_window", &ServingOptions::stats_window);

  py::class_<PyServing>(m, "_ServingModel")
      .def(py::init([](py::object model, const ServingOptions& options) {
             std::shared_ptr<Model> shared = model_of(model);
             Result<std::unique_ptr<ServingModel>> r = Status(StatusCode::kInternal, "");
             {
               py::gil_scoped_release nogil;
               r = ServingModel::create(shared, options);
             }
             auto p = std::make_unique<PyServing>();
             p->model = unwrap(std::move(r), "load");
             return p;
           }),
           py::arg("model"), py::arg("options"))
      .def(
          "submit",
          [](PyServing& s, const py::dict& inputs, py::object callback, uint64_t id, int priority, int64_t timeout_us,
             std::optional<std::vector<std::string>> outputs) {
            InferRequest req = make_request(inputs, id, priority, timeout_us, outputs);
            InferCallback done = python_callback(std::move(callback));
            py::gil_scoped_release nogil;
            s.model->submit(std::move(req), std::move(done));
          },
          py::arg("inputs"), py::arg("callback"), py::arg("id") = 0, py::arg("priority") = -1,
          py::arg("timeout_us") = 0, py::arg("outputs") = py::none())
      .def(
          "infer",
          [](PyServing& s, const py::dict& inputs, uint64_t id, int priority, int64_t timeout_us,
             std::optional<std::vector<std::string>> outputs) {
            InferRequest req = make_request(inputs, id, priority, timeout_us, outputs);
            InferResponse r;
            {
              py::gil_scoped_release nogil;
              r = s.model->infer(std::move(req));
            }
            check(r.status);
            return dict_from_tensors(r.outputs);
          },
          py::arg("inputs"), py::arg("id") = 0, py::arg("priority") = -1, py::arg("timeout_us") = 0,
          py::arg("outputs") = py::none())
      .def("stats",
           [](PyServing& s) {
             ServingStats st;
             {
               py::gil_scoped_release nogil;
               st = s.model->stats();
             }
             return stats_dict(st);
           })
      .def(
          "shutdown",
          [](PyServing& s, const std::string& mode) {
            const ShutdownMode sm = shutdown_mode(mode);
            py::gil_scoped_release nogil;
            s.model->shutdown(sm);
          },
          py::arg("mode") = "drain")
      .def_property_readonly("threads_per_instance", [](PyServing& s) { return s.model->threads_per_instance(); })
      .def_property_readonly("planned_batch_sizes", [](PyServing& s) { return s.model->planned_batch_sizes(); })
      .def_property_readonly("options", [](PyServing& s) { return s.model->options(); });
}

}  // namespace streamline::python
