"""streamline: an ONNX inference runtime.

Two surfaces over the same runtime:

* ONNX Runtime-compatible: ``import streamline as onnxruntime`` and keep using
  ``InferenceSession(path).run(None, {"x": x})`` (see streamline.ort).
* Native: :class:`Model` / :class:`Session` with streams, threads per stream, safe mode,
  precision and device; :class:`ServingModel` (instances sharing weights, the dynamic batcher,
  futures and asyncio); :class:`PipelineBuilder` (stages, Python callables among them);
  :class:`Trace` (Chrome trace events of runs).

Arrays go in and come out without copies where the layout allows: inputs that are C-contiguous,
aligned and of native byte order are read in place during the run; outputs are numpy arrays over
the runtime's own buffers. The GIL is released while models run.
"""

from . import _streamline
from ._streamline import (  # noqa: F401 (re-exported)
    BatchPolicy,
    LogSeverity,
    Model,
    ModelMetadata,
    ModelOptions,
    Precision,
    QueuePolicy,
    ServingOptions,
    Session,
    Tensor,
    TensorDesc,
    TimeoutAction,
    Trace,
    available_devices,
    log_severity,
    set_log_severity,
    stages,
    usable_cores,
    version_string,
)
from .errors import (  # noqa: F401
    Cancelled,
    DeadlineExceeded,
    Error,
    Fail,
    InvalidArgument,
    InvalidGraph,
    NoSuchFile,
    NotImplemented,
    ResourceExhausted,
    RuntimeException,
    Unavailable,
)
from .ort import (  # noqa: F401
    ExecutionMode,
    GraphOptimizationLevel,
    InferenceSession,
    NodeArg,
    RunOptions,
    SessionOptions,
    get_all_providers,
    get_available_providers,
    get_device,
    set_default_logger_severity,
)
from .serving import Pipeline, PipelineBuilder, ServingModel  # noqa: F401

__version__ = version_string().split()[0]
