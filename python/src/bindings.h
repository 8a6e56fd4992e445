#pragma once
// Shared pieces of the Python extension (_streamline): numpy <-> Tensor conversion, Status -> Python
// exceptions, and owners that keep Python objects alive from C++ threads.
//
// The extension binds the public C++ API only (include/streamline/); it adds no runtime logic of
// its own beyond a pool of Sessions that lets one model be run from many Python threads.
//
// GIL rules: every call into the runtime releases the GIL (runs, submits, stats, shutdowns), so a
// runtime thread that needs the GIL (a Python stage, a completion callback, dropping a tensor that
// borrows a numpy array) never waits on a thread that holds it while waiting for the runtime.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "streamline/pipeline.h"
#include "streamline/serving.h"
#include "streamline/streamline.h"

namespace streamline::python {

namespace py = pybind11;

// Thrown by binding code for a failed Status; translated into the matching streamline.errors class.
// `phase` is "load" for model loading (InvalidArgument becomes InvalidGraph) or "" otherwise.
class StatusError : public std::exception {
 public:
  StatusError(Status status, std::string phase) : status_(std::move(status)), phase_(std::move(phase)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }
  const std::string& phase() const { return phase_; }

 private:
  Status status_;
  std::string phase_;
};

[[noreturn]] void throw_status(const Status& s, const std::string& phase = "");
inline void check(const Status& s, const std::string& phase = "") {
  if (!s.ok()) throw_status(s, phase);
}
template <typename T>
T unwrap(Result<T> r, const std::string& phase = "") {
  if (!r.ok()) throw_status(r.status(), phase);
  return std::move(r).value();
}
// The streamline.errors exception object for `s` (for futures and callbacks). Needs the GIL.
py::object error_object(const Status& s, const std::string& phase = "");
// Registers the translator from StatusError to streamline.errors.
void register_errors(py::module_& m);

// True while the interpreter can run Python code (not finalizing).
bool python_alive();
// Keeps `obj` alive as long as the returned pointer; the last owner drops it under the GIL (from
// any thread), or leaks it when the interpreter is already finalizing.
std::shared_ptr<void> py_owner(py::object obj);

// How a Tensor made from a numpy array holds its memory.
enum class Borrow {
  kForCall,  // a plain view: valid while the caller keeps the array (synchronous runs)
  kShared,   // the Tensor keeps the array alive itself (requests that outlive the call)
};
// numpy array (or anything np.asarray accepts) -> Tensor over the same memory when it is
// C-contiguous, aligned and of native byte order; otherwise over a contiguous copy. With
// Borrow::kForCall the array the Tensor reads (the caller's, a copy, or one made from a list or
// other array-like) goes to `keep`, which the caller holds until the run ends: the GIL is released
// during the run, and another thread may drop the caller's last reference meanwhile.
// InvalidArgument (naming `what`) for dtypes streamline lacks.
Tensor tensor_from_numpy(py::handle obj, const std::string& what, Borrow borrow, std::vector<py::object>* keep);
// Tensor -> numpy array over the same memory; the array owns a copy of the Tensor handle (the
// memory is freed when both are gone). `writeable` false marks the array read-only.
py::array numpy_from_tensor(const Tensor& t, bool writeable = true);
// numpy dtype for a streamline DType; InvalidArgument for dtypes numpy lacks (bfloat16).
py::dtype numpy_dtype(DType t);
// ONNX Runtime's type string: "tensor(float)", "tensor(int64)", ...
std::string ort_type_name(DType t);

// Tensors by name -> dict of numpy arrays.
py::dict dict_from_tensors(const std::map<std::string, Tensor>& tensors, bool writeable = true);
// dict of array-likes -> tensors (Borrow::kShared: safe to hand to another thread).
std::map<std::string, Tensor> tensors_from_dict(const py::dict& d, const std::string& what);

// A Trace with the lock that serialises the runs recorded into it (Trace records one run at a time;
// one Python Trace may be passed to runs on many threads).
struct PyTrace {
  explicit PyTrace(size_t max_slices) : trace(max_slices) {}
  Trace trace;
  std::mutex run_mu;
};

// The C++ model behind a Python streamline.Model (TypeError for anything else).
std::shared_ptr<Model> model_of(py::handle pymodel);
// The C++ serving model behind a Python _ServingModel, for pipeline model stages.
std::shared_ptr<ServingModel> serving_model_of(py::handle pyserving);
// InferRequest from Python arguments; its tensors keep their arrays alive (Borrow::kShared).
InferRequest make_request(const py::dict& inputs, uint64_t id, int priority, int64_t timeout_us,
                          const std::optional<std::vector<std::string>>& outputs);
// Calls `callback(outputs_dict, None)` or `callback(None, error)` for a response, under the GIL,
// on whatever thread answers. Never throws (a failing callback is reported as unraisable).
InferCallback python_callback(py::object callback);
// ServingStats / PipelineStats -> dicts.
py::dict latency_dict(const LatencySummary& l);

// Module sections, each in its own file.
void bind_core(py::module_& m);
void bind_model(py::module_& m);
void bind_serving(py::module_& m);
void bind_pipeline(py::module_& m);

// Sets fields of a bound options struct from keyword arguments: each key must be an attribute of
// the struct (else AttributeError, as for any unknown attribute).
template <typename T>
T from_kwargs(const py::kwargs& kwargs) {
  py::object o = py::cast(T{});
  for (auto item : kwargs) py::setattr(o, item.first, item.second);
  return o.cast<T>();
}

}  // namespace streamline::python
