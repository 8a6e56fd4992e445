// numpy <-> Tensor, Status -> exceptions, and the process-level API (version, devices, log, traces).
#include <cstring>

#include "bindings.h"

namespace streamline::python {
namespace {

constexpr int kNpyArrayAligned = 0x0100;  // NPY_ARRAY_ALIGNED

// The streamline.errors module, imported on first use (it is pure Python, next to the extension).
py::object errors_module() {
  static py::object* mod = new py::object(py::module_::import("streamline.errors"));  // never freed: lives
  return *mod;                                                                        // as long as the process
}

DType dtype_of(const py::dtype& dt) {
  const auto* d = py::detail::array_descriptor_proxy(dt.ptr());
  const size_t size = static_cast<size_t>(d->elsize);
  switch (d->kind) {
    case 'f':
      return size == 4   ? DType::kFloat32
             : size == 8 ? DType::kFloat64
             : size == 2 ? DType::kFloat16
                         : DType::kUndefined;
    case 'i':
      return size == 1   ? DType::kInt8
             : size == 2 ? DType::kInt16
             : size == 4 ? DType::kInt32
             : size == 8 ? DType::kInt64
                         : DType::kUndefined;
    case 'u':
      return size == 1   ? DType::kUInt8
             : size == 2 ? DType::kUInt16
             : size == 4 ? DType::kUInt32
             : size == 8 ? DType::kUInt64
                         : DType::kUndefined;
    case 'b':
      return size == 1 ? DType::kBool : DType::kUndefined;
    default:
      return DType::kUndefined;
  }
}

bool native_order(const py::dtype& dt) {
  const char order = py::detail::array_descriptor_proxy(dt.ptr())->byteorder;
  return order == '=' || order == '|' || order == '<';  // x86-64 and aarch64 Linux are little-endian
}

}  // namespace

void throw_status(const Status& s, const std::string& phase) {
  throw StatusError(s, phase);
}

py::object error_object(const Status& s, const std::string& phase) {
  return errors_module().attr("from_status")(status_code_name(s.code()), s.to_string(), phase);
}

void register_errors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object err = error_object(e.status(), e.phase());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
    }
  });
}

bool python_alive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

std::shared_ptr<void> py_owner(py::object obj) {
  auto* held = new py::object(std::move(obj));
  return std::shared_ptr<void>(held, [](void* p) {
    auto* o = static_cast<py::object*>(p);
    if (!python_alive()) return;  // the interpreter is going away: leak rather than touch it
    py::gil_scoped_acquire gil;
    delete o;
  });
}

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::kFloat32:
      return py::dtype("float32");
    case DType::kFloat64:
      return py::dtype("float64");
    case DType::kFloat16:
      return py::dtype("float16");
    case DType::kInt8:
      return py::dtype("int8");
    case DType::kInt16:
      return py::dtype("int16");
    case DType::kInt32:
      return py::dtype("int32");
    case DType::kInt64:
      return py::dtype("int64");
    case DType::kUInt8:
      return py::dtype("uint8");
    case DType::kUInt16:
      return py::dtype("uint16");
    case DType::kUInt32:
      return py::dtype("uint32");
    case DType::kUInt64:
      return py::dtype("uint64");
    case DType::kBool:
      return py::dtype("bool");
    default:
      break;
  }
  throw_status(unsupported(std::string("tensors of ") + dtype_name(t) + " have no numpy dtype"));
}

std::string ort_type_name(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "tensor(float)";
    case DType::kFloat64:
      return "tensor(double)";
    case DType::kFloat16:
      return "tensor(float16)";
    case DType::kBFloat16:
      return "tensor(bfloat16)";
    case DType::kInt8:
      return "tensor(int8)";
    case DType::kInt16:
      return "tensor(int16)";
    case DType::kInt32:
      return "tensor(int32)";
    case DType::kInt64:
      return "tensor(int64)";
    case DType::kUInt8:
      return "tensor(uint8)";
    case DType::kUInt16:
      return "tensor(uint16)";
    case DType::kUInt32:
      return "tensor(uint32)";
    case DType::kUInt64:
      return "tensor(uint64)";
    case DType::kBool:
      return "tensor(bool)";
    case DType::kString:
      return "tensor(string)";
    default:
      return "tensor(undefined)";
  }
}

namespace {

// A string tensor from a numpy array of str ('U'), bytes ('S') or objects that are each str or
// bytes; str is stored as UTF-8. Always a copy (std::string elements cannot alias numpy's).
Tensor string_tensor_from_numpy(const py::array& arr, const std::string& what) {
  Shape shape;
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) shape.push_back(static_cast<int64_t>(arr.shape(i)));
  const py::list items = py::module_::import("numpy").attr("ravel")(arr).attr("tolist")();
  Tensor t = Tensor::empty(DType::kString, shape);
  for (size_t i = 0; i < items.size(); ++i) {
    py::handle v = items[i];
    if (py::isinstance<py::str>(v)) {
      t.strings()[i] = v.cast<std::string>();
    } else if (py::isinstance<py::bytes>(v)) {
      t.strings()[i] = std::string(py::reinterpret_borrow<py::bytes>(v));
    } else {
      throw_status(invalid_argument(what + ": element " + std::to_string(i) + " is a " +
                                    py::str(py::type::handle_of(v)).cast<std::string>() +
                                    "; a string tensor takes str or bytes"));
    }
  }
  return t;
}

}  // namespace

Tensor tensor_from_numpy(py::handle obj, const std::string& what, Borrow borrow, std::vector<py::object>* keep) {
  py::array arr;
  if (py::isinstance<py::array>(obj)) {
    arr = py::reinterpret_borrow<py::array>(obj);
  } else {
    arr = py::array(py::module_::import("numpy").attr("asarray")(obj));
  }
  const char kind = py::detail::array_descriptor_proxy(arr.dtype().ptr())->kind;
  if (kind == 'U' || kind == 'S' || kind == 'O') return string_tensor_from_numpy(arr, what);
  const DType dtype = dtype_of(arr.dtype());
  if (dtype == DType::kUndefined)
    throw_status(invalid_argument(what + ": numpy dtype " + py::str(arr.dtype()).cast<std::string>() +
                                  " has no streamline tensor type"));
  const int flags = arr.flags();
  const bool usable = (flags & py::array::c_style) && (flags & kNpyArrayAligned) && native_order(arr.dtype());
  if (!usable) {
    arr = py::array(py::module_::import("numpy").attr("ascontiguousarray")(arr, arr.dtype().attr("newbyteorder")("=")));
  }
  Shape shape;
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) shape.push_back(static_cast<int64_t>(arr.shape(i)));
  Tensor t = Tensor::view(dtype, shape, const_cast<void*>(arr.data()));
  if (borrow == Borrow::kShared) {
    t.set_owner(py_owner(arr));
  } else if (keep) {
    keep->push_back(arr);
  }
  return t;
}

py::array numpy_from_tensor(const Tensor& t, bool writeable) {
  if (t.layout() != Layout::kPlain)
    throw_status(internal_error("tensor " + t.describe() + " is in the " + layout_name(t.layout()) +
                                " layout, not plain row-major"));
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  if (t.dtype() == DType::kString) {
    // An object array of str, as ONNX Runtime gives string outputs; bytes that are not UTF-8 are
    // replaced (U+FFFD) rather than failing the call.
    py::list items;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const std::string& e = t.strings()[i];
      PyObject* u = PyUnicode_DecodeUTF8(e.data(), static_cast<Py_ssize_t>(e.size()), "replace");
      if (!u) throw py::error_already_set();
      items.append(py::reinterpret_steal<py::object>(u));
    }
    py::module_ np = py::module_::import("numpy");
    py::array out = np.attr("array")(items, py::arg("dtype") = py::dtype("O")).attr("reshape")(shape);
    if (!writeable) out.attr("flags").attr("writeable") = false;
    return out;
  }
  py::dtype dt = numpy_dtype(t.dtype());
  py::array out;
  if (t.numel() == 0 || t.raw() == nullptr) {
    out = py::array(dt, shape);
  } else {
    auto* owner = new Tensor(t);
    py::capsule cap(owner, [](void* p) { delete static_cast<Tensor*>(p); });
    out = py::array(dt, shape, {}, owner->raw(), cap);
  }
  if (!writeable) out.attr("flags").attr("writeable") = false;
  return out;
}

py::dict dict_from_tensors(const std::map<std::string, Tensor>& tensors, bool writeable) {
  py::dict d;
  for (const auto& [name, t] : tensors) d[py::str(name)] = numpy_from_tensor(t, writeable);
  return d;
}

std::map<std::string, Tensor> tensors_from_dict(const py::dict& d, const std::string& what) {
  std::map<std::string, Tensor> out;
  for (auto item : d) {
    if (!py::isinstance<py::str>(item.first))
      throw_status(
          invalid_argument(what + ": tensor names must be strings, got " + py::repr(item.first).cast<std::string>()));
    const std::string name = item.first.cast<std::string>();
    out.emplace(name, tensor_from_numpy(item.second, what + " '" + name + "'", Borrow::kShared, nullptr));
  }
  return out;
}

void bind_core(py::module_& m) {
  m.def("version_string", &version_string, "Version of the runtime and its backends.");
  m.def("available_devices", &available_devices, py::call_guard<py::gil_scoped_release>(),
        "Devices models can run on here: 'cpu', then 'cuda:N' for each usable GPU.");
  m.def("usable_cores", &usable_cores,
        "Threads this process can run at once: its CPU affinity, capped by a cgroup CPU quota.");
  py::enum_<LogSeverity>(m, "LogSeverity")
      .value("DEBUG", LogSeverity::kDebug)
      .value("INFO", LogSeverity::kInfo)
      .value("WARNING", LogSeverity::kWarning)
      .value("ERROR", LogSeverity::kError);
  m.def("set_log_severity", &set_log_severity, py::arg("severity"),
        "Process-wide threshold of streamline's log on stderr.");
  m.def("log_severity", &log_severity);

  // A view of a tensor: Tensor(array) borrows the array's memory (the Tensor keeps it alive);
  // numpy() gives an array over the Tensor's memory. Neither copies when the layout allows.
  py::class_<Tensor>(m, "Tensor")
      .def(py::init([](py::object a) { return tensor_from_numpy(a, "tensor", Borrow::kShared, nullptr); }),
           py::arg("array"))
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(dtype_name(t.dtype())); })
      .def_property_readonly("shape", [](const Tensor& t) { return t.shape().to_vector(); })
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("numpy", [](const Tensor& t) { return numpy_from_tensor(t); })
      .def("__repr__", [](const Tensor& t) { return "Tensor(" + t.describe() + ")"; });

  py::class_<PyTrace>(m, "Trace", "Chrome trace events of planned runs (Perfetto, chrome://tracing).")
      .def(py::init<size_t>(), py::arg("max_slices") = 100000)
      .def_property_readonly("slices",
                             [](PyTrace& t) {
                               py::gil_scoped_release nogil;
                               std::lock_guard<std::mutex> lock(t.run_mu);
                               return t.trace.slices();
                             })
      .def("to_json",
           [](PyTrace& t) {
             std::string json;
             {
               py::gil_scoped_release nogil;
               std::lock_guard<std::mutex> lock(t.run_mu);
               json = t.trace.to_json();
             }
             return json;
           })
      .def(
          "write",
          [](PyTrace& t, const std::string& path) {
            Status s;
            {
              py::gil_scoped_release nogil;
              std::lock_guard<std::mutex> lock(t.run_mu);
              s = t.trace.write(path);
            }
            check(s);
          },
          py::arg("path"));
}

}  // namespace streamline::python
