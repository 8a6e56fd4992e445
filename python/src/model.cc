// Model, Session and their options. A Python Model runs from any number of threads at once: it
// lends each concurrent run a Session of its own from a pool (a Session is one execution context,
// used by one thread at a time), so threads never wait for each other's runs.
#include <unordered_map>

#include "bindings.h"

namespace streamline::python {
namespace {

// The public options' precision type, by its field: the binding names no namespace below the API.
using Precision = decltype(ModelOptions::precision);

struct PyModel {
  explicit PyModel(std::shared_ptr<Model> m) : model(std::move(m)) {
    for (size_t i = 0; i < model->inputs().size(); ++i) input_index[model->inputs()[i].name] = static_cast<int>(i);
    for (size_t i = 0; i < model->outputs().size(); ++i) output_index[model->outputs()[i].name] = static_cast<int>(i);
  }
  // A free session, or a new one when every session is running. Thread-safe.
  std::unique_ptr<Session> acquire() {
    {
      std::lock_guard<std::mutex> lock(pool_mu);
      if (!free_sessions.empty()) {
        std::unique_ptr<Session> s = std::move(free_sessions.back());
        free_sessions.pop_back();
        return s;
      }
    }
    return std::make_unique<Session>(model);
  }
  // Returns a session to the pool; the pool keeps as many as ever ran at once.
  void release(std::unique_ptr<Session> s) {
    std::lock_guard<std::mutex> lock(pool_mu);
    free_sessions.push_back(std::move(s));
  }

  std::shared_ptr<Model> model;
  std::unordered_map<std::string, int> input_index, output_index;
  std::mutex pool_mu;
  std::vector<std::unique_ptr<Session>> free_sessions;
};

// One execution context of its own; runs of one PySession are serialised by its lock.
struct PySession {
  explicit PySession(std::shared_ptr<PyModel> m) : model(std::move(m)), session(model->model) {}
  std::shared_ptr<PyModel> model;
  Session session;
  std::mutex mu;
};

std::string join_names(const std::vector<TensorDesc>& descs) {
  std::string s;
  for (const auto& d : descs) s += (s.empty() ? "'" : ", '") + d.name + "'";
  return s;
}

// Inputs of a run in model order, from a dict (by name) or a sequence (model order).
std::vector<Tensor> gather_inputs(const PyModel& pm, py::handle feed, std::vector<py::object>* keep) {
  const auto& descs = pm.model->inputs();
  std::vector<Tensor> inputs(descs.size());
  if (py::isinstance<py::dict>(feed)) {
    for (auto item : py::reinterpret_borrow<py::dict>(feed)) {
      const std::string name = py::str(item.first);
      auto it = pm.input_index.find(name);
      if (it == pm.input_index.end())
        throw_status(
            invalid_argument("model has no input named '" + name + "' (its inputs: " + join_names(descs) + ")"));
      inputs[static_cast<size_t>(it->second)] =
          tensor_from_numpy(item.second, "input '" + name + "'", Borrow::kForCall, keep);
    }
    std::string missing;
    for (size_t i = 0; i < descs.size(); ++i)
      if (!inputs[i].defined()) missing += (missing.empty() ? "'" : ", '") + descs[i].name + "'";
    if (!missing.empty()) throw_status(invalid_argument("missing input(s) " + missing + " in the input feed"));
  } else if (py::isinstance<py::list>(feed) || py::isinstance<py::tuple>(feed)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(feed);
    if (seq.size() != descs.size())
      throw_status(invalid_argument("model has " + std::to_string(descs.size()) + " inputs (" + join_names(descs) +
                                    "), got " + std::to_string(seq.size())));
    for (size_t i = 0; i < descs.size(); ++i)
      inputs[i] = tensor_from_numpy(seq[i], "input '" + descs[i].name + "'", Borrow::kForCall, keep);
  } else {
    throw_status(invalid_argument("inputs must be a dict of name -> array or a list in model order, got " +
                                  py::str(py::type::handle_of(feed)).cast<std::string>()));
  }
  for (size_t i = 0; i < descs.size(); ++i) {
    const TensorDesc& d = descs[i];
    if (d.dtype != DType::kUndefined && inputs[i].dtype() != d.dtype)
      throw_status(invalid_argument("input '" + d.name + "': expected " + ort_type_name(d.dtype) + " (" +
                                    dtype_name(d.dtype) + "), got " + ort_type_name(inputs[i].dtype()) + " (" +
                                    dtype_name(inputs[i].dtype()) + ")"));
  }
  return inputs;
}

// Indices of the requested outputs; None or empty = all.
std::vector<int> select_outputs(const PyModel& pm, py::handle names) {
  std::vector<int> idx;
  if (!names.is_none())
    for (auto n : names) {
      const std::string name = py::str(n);
      auto it = pm.output_index.find(name);
      if (it == pm.output_index.end())
        throw_status(invalid_argument("model has no output named '" + name +
                                      "' (its outputs: " + join_names(pm.model->outputs()) + ")"));
      idx.push_back(it->second);
    }
  if (idx.empty())
    for (size_t i = 0; i < pm.model->outputs().size(); ++i) idx.push_back(static_cast<int>(i));
  return idx;
}

// One run. `own` is the session to use (a PySession's, with its lock) or null to borrow one from
// the model's pool. Returns a dict by output name or a list in the requested order.
py::object run(PyModel& pm, PySession* own, py::handle feed, py::handle output_names, PyTrace* trace, int num_threads,
               bool as_dict) {
  std::vector<py::object> keep;
  std::vector<Tensor> inputs = gather_inputs(pm, feed, &keep);
  const std::vector<int> wanted = select_outputs(pm, output_names);
  if (num_threads < 0) throw_status(invalid_argument("num_threads must be >= 0, got " + std::to_string(num_threads)));
  RunOptions ro;
  ro.num_threads = num_threads;
  Result<std::vector<Tensor>> outs = std::vector<Tensor>{};
  {
    py::gil_scoped_release nogil;
    std::unique_lock<std::mutex> trace_lock;
    if (trace) {
      trace_lock = std::unique_lock<std::mutex>(trace->run_mu);
      ro.observer = trace->trace.observer();
    }
    if (own) {
      std::lock_guard<std::mutex> lock(own->mu);
      outs = own->session.run(inputs, ro);
    } else {
      std::unique_ptr<Session> s = pm.acquire();
      outs = s->run(inputs, ro);
      pm.release(std::move(s));
    }
  }
  if (!outs.ok()) throw_status(outs.status());
  if (as_dict) {
    py::dict d;
    for (int i : wanted)
      d[py::str(pm.model->outputs()[static_cast<size_t>(i)].name)] = numpy_from_tensor((*outs)[static_cast<size_t>(i)]);
    return d;
  }
  py::list l(wanted.size());
  for (size_t k = 0; k < wanted.size(); ++k) l[k] = numpy_from_tensor((*outs)[static_cast<size_t>(wanted[k])]);
  return l;
}

// ONNX Runtime's NodeArg.shape: ints where fixed, the symbol's name where symbolic, None where unknown.
py::list ort_shape(const TensorDesc& d) {
  py::list l;
  for (size_t i = 0; i < d.dims.size(); ++i) {
    if (d.dims[i] >= 0)
      l.append(d.dims[i]);
    else if (i < d.symbols.size() && !d.symbols[i].empty())
      l.append(d.symbols[i]);
    else
      l.append(py::none());
  }
  return l;
}

Precision precision_from(py::handle v) {
  if (py::isinstance<Precision>(v)) return v.cast<Precision>();
  const std::string s = py::str(v);
  if (s == "fp32") return Precision::kFp32;
  if (s == "tf32") return Precision::kTf32;
  if (s == "fp16") return Precision::kFp16;
  throw_status(invalid_argument("precision must be 'fp32', 'tf32' or 'fp16', got '" + s + "'"));
}

std::shared_ptr<PyModel> load_model(py::object source, std::optional<ModelOptions> options, const py::kwargs& kw) {
  ModelOptions mo = options.value_or(ModelOptions{});
  if (kw.size() > 0) {
    py::object o = py::cast(mo);
    for (auto item : kw) py::setattr(o, item.first, item.second);
    mo = o.cast<ModelOptions>();
  }
  Result<std::shared_ptr<Model>> m = Status(StatusCode::kInternal, "not loaded");
  if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source) ||
      py::isinstance<py::memoryview>(source)) {
    py::buffer buf = py::reinterpret_borrow<py::buffer>(source);
    py::buffer_info info = buf.request();
    const std::string_view bytes(static_cast<const char*>(info.ptr), static_cast<size_t>(info.size * info.itemsize));
    py::gil_scoped_release nogil;
    m = Model::load_bytes(bytes, mo);
  } else {
    const std::string path = py::str(py::module_::import("os").attr("fspath")(source));
    py::gil_scoped_release nogil;
    m = Model::load(path, mo);
  }
  return std::make_shared<PyModel>(unwrap(std::move(m), "load"));
}

}  // namespace

std::shared_ptr<Model> model_of(py::handle pymodel) {
  return pymodel.cast<PyModel&>().model;
}

void bind_model(py::module_& m) {
  py::enum_<Precision>(m, "Precision")
      .value("FP32", Precision::kFp32)
      .value("TF32", Precision::kTf32)
      .value("FP16", Precision::kFp16);

  py::class_<ModelOptions>(m, "ModelOptions", "How a model is loaded and planned (see ModelOptions in streamline.h).")
      .def(py::init(&from_kwargs<ModelOptions>))
      .def_readwrite("optimize", &ModelOptions::optimize)
      .def_readwrite("channels_last", &ModelOptions::channels_last)
      .def_readwrite("blocked_layout", &ModelOptions::blocked_layout)
      .def_readwrite("winograd", &ModelOptions::winograd)
      .def_readwrite("num_threads", &ModelOptions::num_threads)
      .def_readwrite("num_streams", &ModelOptions::num_streams)
      .def_readwrite("threads_per_stream", &ModelOptions::threads_per_stream)
      .def_readwrite("elastic_threads", &ModelOptions::elastic_threads)
      .def_readwrite("split_convs", &ModelOptions::split_convs)
      .def_readwrite("pinned_streams", &ModelOptions::pinned_streams)
      .def_readwrite("pin_threads", &ModelOptions::pin_threads)
      .def_readwrite("safe", &ModelOptions::safe)
      .def_readwrite("device", &ModelOptions::device)
      .def_property(
          "precision", [](const ModelOptions& o) { return o.precision; },
          [](ModelOptions& o, py::handle v) { o.precision = precision_from(v); })
      .def_readwrite("cuda_graphs", &ModelOptions::cuda_graphs);

  py::class_<TensorDesc>(m, "TensorDesc", "An input or output as the model declares it.")
      .def_readonly("name", &TensorDesc::name)
      .def_property_readonly("dtype", [](const TensorDesc& d) { return std::string(dtype_name(d.dtype)); })
      .def_readonly("dims", &TensorDesc::dims)
      .def_readonly("symbols", &TensorDesc::symbols)
      .def_property_readonly("shape", &ort_shape)
      .def_property_readonly("type", [](const TensorDesc& d) { return ort_type_name(d.dtype); })
      .def("__repr__", [](const TensorDesc& d) {
        return "TensorDesc(name='" + d.name + "', dtype=" + dtype_name(d.dtype) +
               ", shape=" + py::repr(ort_shape(d)).cast<std::string>() + ")";
      });

  py::class_<ModelMetadata>(m, "ModelMetadata", "What the ONNX file says about itself.")
      .def_readonly("producer_name", &ModelMetadata::producer_name)
      .def_readonly("producer_version", &ModelMetadata::producer_version)
      .def_readonly("graph_name", &ModelMetadata::graph_name)
      .def_readonly("domain", &ModelMetadata::domain)
      .def_readonly("description", &ModelMetadata::description)
      .def_readonly("graph_description", &ModelMetadata::graph_description)
      .def_readonly("version", &ModelMetadata::version)
      .def_readonly("custom_metadata_map", &ModelMetadata::custom);

  py::class_<PyModel, std::shared_ptr<PyModel>>(m, "Model",
                                                "A loaded model: immutable, its weights once, runs from any thread.")
      .def_static("load", &load_model, py::arg("source"), py::arg("options") = py::none(),
                  "Loads an ONNX file (a path, or the file's bytes); keyword arguments set ModelOptions fields.")
      .def_property_readonly("inputs", [](const PyModel& p) { return p.model->inputs(); })
      .def_property_readonly("outputs", [](const PyModel& p) { return p.model->outputs(); })
      .def_property_readonly("metadata", [](const PyModel& p) { return p.model->metadata(); })
      .def_property_readonly("options", [](const PyModel& p) { return p.model->options(); })
      .def_property_readonly("device", [](const PyModel& p) { return p.model->options().device; })
      .def_property_readonly("threads_per_stream", [](const PyModel& p) { return p.model->threads_per_stream(); })
      .def(
          "execution_mode",
          [](const PyModel& p, const std::vector<std::vector<int64_t>>& shapes) {
            std::vector<Shape> s;
            for (const auto& d : shapes) s.emplace_back(d);
            Result<ExecutionMode> r = Status(StatusCode::kInternal, "");
            {
              py::gil_scoped_release nogil;
              r = p.model->execution_mode(s);
            }
            return std::string(execution_mode_name(unwrap(std::move(r))));
          },
          py::arg("shapes"), "'planned' or 'eager' for these input shapes (model input order).")
      .def(
          "run",
          [](PyModel& p, py::handle inputs, py::handle outputs, PyTrace* trace, int num_threads) {
            return run(p, nullptr, inputs, outputs, trace, num_threads,
                       /*as_dict=*/!py::isinstance<py::list>(inputs) && !py::isinstance<py::tuple>(inputs));
          },
          py::arg("inputs"), py::arg("outputs") = py::none(), py::arg("trace") = nullptr, py::arg("num_threads") = 0,
          "Runs once: inputs a dict (returns a dict) or a list in model order (returns a list). Thread-safe.")
      .def("_run_list", [](PyModel& p, py::handle outputs, py::handle inputs, PyTrace* trace, int num_threads) {
        return run(p, nullptr, inputs, outputs, trace, num_threads, /*as_dict=*/false);
      });

  py::class_<PySession>(m, "Session", "One execution context of a Model (its own arena); runs one at a time.")
      .def(py::init([](std::shared_ptr<PyModel> p) { return std::make_unique<PySession>(std::move(p)); }),
           py::arg("model"))
      .def_property_readonly("model", [](const PySession& s) { return s.model; })
      .def_property_readonly("arena_bytes",
                             [](PySession& s) {
                               py::gil_scoped_release nogil;
                               std::lock_guard<std::mutex> lock(s.mu);
                               return s.session.arena_bytes();
                             })
      .def(
          "run",
          [](PySession& s, py::handle inputs, py::handle outputs, PyTrace* trace, int num_threads) {
            return run(*s.model, &s, inputs, outputs, trace, num_threads,
                       !py::isinstance<py::list>(inputs) && !py::isinstance<py::tuple>(inputs));
          },
          py::arg("inputs"), py::arg("outputs") = py::none(), py::arg("trace") = nullptr, py::arg("num_threads") = 0);
}

}  // namespace streamline::python
