// The _streamline extension module: the public C++ API of streamline for Python. The package
// streamline (python/streamline/) wraps it: the native surface plus an ONNX Runtime-compatible one.
#include "bindings.h"

PYBIND11_MODULE(_streamline, m) {
  namespace sp = streamline::python;
  m.doc() = "streamline's C++ runtime (bindings over include/streamline/)";
  sp::register_errors(m);
  sp::bind_core(m);
  sp::bind_model(m);
  sp::bind_serving(m);
  sp::bind_pipeline(m);
}
