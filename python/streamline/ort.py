"""The ONNX Runtime-compatible surface: ``import streamline as onnxruntime`` runs code written for
``onnxruntime.InferenceSession``.

What maps to what:

* ``SessionOptions.intra_op_num_threads``: intra-op threads per stream (0 = the machine's cores
  divided among the streams). ``execution_mode``: ORT_SEQUENTIAL runs one stream; ORT_PARALLEL
  runs independent branches on ``inter_op_num_threads`` streams (0 = 2).
* ``graph_optimization_level``: ORT_DISABLE_ALL turns every graph rewrite and layout change off;
  ORT_ENABLE_BASIC and ORT_ENABLE_EXTENDED run the graph rewrites (folding, fusion, elimination);
  ORT_ENABLE_LAYOUT adds channels-last and blocked layouts; ORT_ENABLE_ALL adds Winograd.
* ``enable_profiling``: every run is recorded as Chrome trace events (Perfetto,
  chrome://tracing); ``end_profiling()`` writes ``<profile_file_prefix>_<date>_<time>.json``
  and returns its name.
* ``log_severity_level`` (0 verbose .. 4 fatal), when set, sets streamline's process-wide log
  threshold.
* Providers: 'CPUExecutionProvider' -> device "cpu"; 'CUDAExecutionProvider' with
  ``device_id`` N -> "cuda:N" (options ``enable_cuda_graph``, ``use_tf32`` map to CUDA graphs and
  TF32 precision). A provider listed first but unusable here is skipped with a warning when a later
  one can run; when none can, the session fails.

Anything else fails loudly: unknown options, provider names, provider options and config keys
raise, and attributes ONNX Runtime has but streamline does not are simply absent.
"""

import concurrent.futures
import enum
import threading
import time
import warnings

from . import _streamline as _native
from .errors import Fail, InvalidArgument, NotImplemented

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
_PROVIDERS = (CUDA, CPU)


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


def _int_at_least(lo):
    def check(name, v):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise InvalidArgument(f"{name} must be an integer >= {lo}, got {v!r}")
        return v
    return check


def _boolean(name, v):
    if not isinstance(v, bool):
        raise InvalidArgument(f"{name} must be True or False, got {v!r}")
    return v


def _string(name, v):
    if not isinstance(v, str):
        raise InvalidArgument(f"{name} must be a string, got {v!r}")
    return v


def _enum(cls):
    def check(name, v):
        try:
            return cls(v)
        except ValueError:
            raise InvalidArgument(f"{name} must be one of {[m.name for m in cls]}, got {v!r}") from None
    return check


def _severity(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or not -1 <= v <= 4:
        raise InvalidArgument(f"{name} must be -1 (default) or 0 (verbose) .. 4 (fatal), got {v!r}")
    return v


class _Options:
    """Attributes with checked values; setting an attribute not in _FIELDS raises AttributeError."""

    _FIELDS = {}

    def __init__(self):
        object.__setattr__(self, "_values", {k: default for k, (default, _) in self._FIELDS.items()})
        object.__setattr__(self, "_set", set())
        object.__setattr__(self, "_config", {})

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        if name not in self._FIELDS:
            raise AttributeError(f"'{type(self).__name__}' has no option '{name}' in streamline "
                                 f"(its options: {', '.join(sorted(self._FIELDS))})")
        self._values[name] = self._FIELDS[name][1](name, value)
        self._set.add(name)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"


class SessionOptions(_Options):
    """ONNX Runtime's SessionOptions; see the module's documentation for what each option does."""

    _FIELDS = {
        "intra_op_num_threads": (0, _int_at_least(0)),
        "inter_op_num_threads": (0, _int_at_least(0)),
        "execution_mode": (ExecutionMode.ORT_SEQUENTIAL, _enum(ExecutionMode)),
        "graph_optimization_level": (GraphOptimizationLevel.ORT_ENABLE_ALL, _enum(GraphOptimizationLevel)),
        "enable_profiling": (False, _boolean),
        "profile_file_prefix": ("onnxruntime_profile_", _string),
        "log_severity_level": (-1, _severity),
        "log_verbosity_level": (0, _int_at_least(0)),
        "logid": ("", _string),
        # Memory planning is always on in streamline (one arena per context, sized when the plan
        # is made); these are accepted only at their defaults.
        "enable_cpu_mem_arena": (True, _boolean),
        "enable_mem_pattern": (True, _boolean),
        "enable_mem_reuse": (True, _boolean),
        # streamline's runs are deterministic: the same inputs give the same bits.
        "use_deterministic_compute": (False, _boolean),
        "optimized_model_filepath": ("", _string),
    }
    # Session config entries streamline understands: key -> (ModelOptions field, parser).
    _CONFIG = {
        "streamline.safe": ("safe", {"0": False, "1": True}),
        "streamline.pin_threads": ("pin_threads", {"0": False, "1": True}),
    }

    def add_session_config_entry(self, key, value):
        if key not in self._CONFIG:
            raise InvalidArgument(f"unknown session config entry '{key}' (streamline knows: "
                                  f"{', '.join(sorted(self._CONFIG))})")
        if str(value) not in self._CONFIG[key][1]:
            raise InvalidArgument(f"session config entry '{key}' must be one of "
                                  f"{sorted(self._CONFIG[key][1])}, got {value!r}")
        self._config[key] = str(value)

    def get_session_config_entry(self, key):
        if key not in self._config:
            raise InvalidArgument(f"session config entry '{key}' is not set")
        return self._config[key]


class RunOptions(_Options):
    """ONNX Runtime's RunOptions. ``terminate`` set before a run makes it fail at once."""

    _FIELDS = {
        "log_severity_level": (-1, _severity),
        "log_verbosity_level": (0, _int_at_least(0)),
        "logid": ("", _string),
        "terminate": (False, _boolean),
        # Every output is computed in any case; the flag changes nothing visible.
        "only_execute_path_to_fetches": (False, _boolean),
    }

    def add_run_config_entry(self, key, value):
        raise InvalidArgument(f"unknown run config entry '{key}': streamline has no run config entries")

    def get_run_config_entry(self, key):
        raise InvalidArgument(f"run config entry '{key}' is not set")


class NodeArg:
    """An input or output: ``name``, ``shape`` (ints, symbol names, None where unknown), ``type``."""

    __slots__ = ("name", "shape", "type")

    def __init__(self, desc):
        self.name = desc.name
        self.shape = desc.shape
        self.type = desc.type

    def __repr__(self):
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


ModelMetadata = _native.ModelMetadata


def get_available_providers():
    """'CUDAExecutionProvider' (when a GPU is usable here) and 'CPUExecutionProvider'."""
    gpus = [d for d in _native.available_devices() if d.startswith("cuda")]
    return [CUDA, CPU] if gpus else [CPU]


def get_all_providers():
    return list(_PROVIDERS)


def get_device():
    """'GPU' when a GPU is usable here, else 'CPU'."""
    return "GPU" if CUDA in get_available_providers() else "CPU"


_SEVERITY = {0: _native.LogSeverity.DEBUG, 1: _native.LogSeverity.INFO, 2: _native.LogSeverity.WARNING,
             3: _native.LogSeverity.ERROR, 4: _native.LogSeverity.ERROR}


def set_default_logger_severity(level):
    """Sets streamline's process-wide log threshold (0 verbose .. 4 fatal)."""
    _severity("level", level)
    if level >= 0:
        _native.set_log_severity(_SEVERITY[level])


def _bool_option(provider, key, value):
    text = str(value).lower()
    if text in ("1", "true"):
        return True
    if text in ("0", "false"):
        return False
    raise InvalidArgument(f"{provider} option '{key}' must be 0 or 1, got {value!r}")


def _parse_providers(providers, provider_options):
    """[(name, {option: value})] in priority order; unknown names and options raise."""
    if providers is None:
        providers = [CPU]
    if isinstance(providers, str):
        raise InvalidArgument("providers must be a list of provider names, e.g. ['CPUExecutionProvider']")
    parsed = []
    for p in providers:
        if isinstance(p, (tuple, list)) and len(p) == 2:
            name, opts = p
        else:
            name, opts = p, {}
        if name not in _PROVIDERS:
            raise InvalidArgument(f"unknown execution provider '{name}'; streamline provides "
                                  f"{', '.join(_PROVIDERS)}")
        if not isinstance(opts, dict):
            raise InvalidArgument(f"options of {name} must be a dict, got {opts!r}")
        parsed.append((name, dict(opts)))
    if provider_options is not None:
        if len(provider_options) != len(parsed):
            raise InvalidArgument(f"{len(provider_options)} provider_options for {len(parsed)} providers")
        parsed = [(n, {**o, **dict(extra)}) for (n, o), extra in zip(parsed, provider_options)]
    if not parsed:
        raise InvalidArgument("providers is empty")
    allowed = {CPU: set(), CUDA: {"device_id", "enable_cuda_graph", "use_tf32"}}
    for name, opts in parsed:
        unknown = sorted(set(opts) - allowed[name])
        if unknown:
            raise InvalidArgument(f"unknown {name} option(s) {', '.join(unknown)}; streamline knows: "
                                  f"{', '.join(sorted(allowed[name])) or 'none'}")
    return parsed


def _choose_provider(parsed):
    """The first usable provider: (name, options, ModelOptions fields)."""
    devices = set(_native.available_devices())
    skipped = []
    for name, opts in parsed:
        if name == CPU:
            fields = {"device": "cpu"}
        else:
            try:
                device_id = int(opts.get("device_id", 0))
            except (TypeError, ValueError):
                raise InvalidArgument(f"{CUDA} device_id must be an integer, got {opts['device_id']!r}") from None
            fields = {"device": f"cuda:{device_id}"}
            if "enable_cuda_graph" in opts:
                fields["cuda_graphs"] = _bool_option(name, "enable_cuda_graph", opts["enable_cuda_graph"])
            if "use_tf32" in opts and _bool_option(name, "use_tf32", opts["use_tf32"]):
                fields["precision"] = _native.Precision.TF32
            if fields["device"] not in devices:
                skipped.append(f"{name} (no {fields['device']} here: {_native.version_string()})")
                continue
        if skipped:
            warnings.warn(f"streamline: skipping {'; '.join(skipped)}; running on {name}", RuntimeWarning,
                          stacklevel=3)
        return name, opts, fields
    raise Fail(f"none of the requested providers can run here: {'; '.join(skipped)}")


def _model_options(so, fields):
    """ModelOptions for SessionOptions `so` and the chosen provider's fields."""
    if not so.enable_cpu_mem_arena or not so.enable_mem_pattern or not so.enable_mem_reuse:
        raise NotImplemented("streamline always plans memory into one arena per context: "
                             "enable_cpu_mem_arena, enable_mem_pattern and enable_mem_reuse must stay True")
    if so.optimized_model_filepath:
        raise NotImplemented("streamline does not write optimized models (optimized_model_filepath)")
    mo = _native.ModelOptions(**fields)
    streams = 1
    if so.execution_mode == ExecutionMode.ORT_PARALLEL:
        streams = so.inter_op_num_threads or 2
    mo.num_streams = streams
    if so.intra_op_num_threads > 0:
        mo.threads_per_stream = so.intra_op_num_threads
        mo.num_threads = so.intra_op_num_threads * streams
    level = so.graph_optimization_level
    mo.optimize = level >= GraphOptimizationLevel.ORT_ENABLE_BASIC
    layout = level >= GraphOptimizationLevel.ORT_ENABLE_LAYOUT
    mo.channels_last = layout
    mo.blocked_layout = layout
    mo.winograd = level >= GraphOptimizationLevel.ORT_ENABLE_ALL
    for key, value in so._config.items():
        field, parse = SessionOptions._CONFIG[key]
        setattr(mo, field, parse[value])
    return mo


_async_pool = None
_async_lock = threading.Lock()


def _async_executor():
    global _async_pool
    with _async_lock:
        if _async_pool is None:
            # The cores this process may use (affinity, cgroup quota), not the machine's: a
            # container limited to 2 CPUs on a 64-core host gets 2 workers, not 64.
            _async_pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=max(2, _native.usable_cores()), thread_name_prefix="streamline-run-async")
        return _async_pool


class InferenceSession:
    """ONNX Runtime's InferenceSession over a streamline Model.

    ``path_or_bytes``: a path to an .onnx file or its bytes. ``sess_options``: a SessionOptions.
    ``providers``: names or (name, options) pairs in priority order (default CPU).
    ``run`` is thread-safe: concurrent runs each use an execution context of their own and run in
    parallel (the GIL is released while the model runs).
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        if kwargs:
            raise TypeError(f"InferenceSession got unexpected keyword argument(s): {', '.join(sorted(kwargs))}")
        if sess_options is None:
            sess_options = SessionOptions()
        elif not isinstance(sess_options, SessionOptions):
            raise InvalidArgument(f"sess_options must be a SessionOptions, got {type(sess_options).__name__}")
        self._sess_options = sess_options
        parsed = _parse_providers(providers, provider_options)
        self._provider, self._provider_opts, fields = _choose_provider(parsed)
        if "log_severity_level" in sess_options._set:
            set_default_logger_severity(sess_options.log_severity_level)
        self._model = _native.Model.load(path_or_bytes, _model_options(sess_options, fields))
        self._inputs = [NodeArg(d) for d in self._model.inputs]
        self._outputs = [NodeArg(d) for d in self._model.outputs]
        self._trace = None
        self._profiling_start_ns = 0
        if sess_options.enable_profiling:
            self._trace = _native.Trace()
            self._profiling_start_ns = time.time_ns()
        self._run_list = self._model._run_list

    def run(self, output_names, input_feed, run_options=None):
        """Runs once; returns the outputs named by ``output_names`` (None or [] = all) as a list."""
        if run_options is not None:
            _check_run_options(run_options)
        return self._run_list(output_names, input_feed, self._trace, 0)

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None):
        """Runs on a worker thread, then calls ``callback(outputs, user_data, error_message)``
        there (outputs [] and a non-empty message when the run failed)."""
        if not callable(callback):
            raise InvalidArgument("callback must be callable")

        def job():
            try:
                outputs, err = self.run(output_names, input_feed, run_options), ""
            except Exception as e:  # noqa: BLE001 (handed to the callback, as ONNX Runtime does)
                outputs, err = [], str(e) or type(e).__name__
            callback(outputs, user_data, err)

        _async_executor().submit(job)

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []

    def get_modelmeta(self):
        return self._model.metadata

    def get_providers(self):
        return [self._provider] if self._provider == CPU else [self._provider, CPU]

    def get_provider_options(self):
        opts = {CPU: {}}
        if self._provider == CUDA:
            opts = {CUDA: {k: str(v) for k, v in {"device_id": 0, **self._provider_opts}.items()}, **opts}
        return opts

    def get_session_options(self):
        return self._sess_options

    def get_profiling_start_time_ns(self):
        return self._profiling_start_ns

    def end_profiling(self):
        """Writes the trace of the runs so far and stops profiling; returns the file name ('' when
        profiling was off)."""
        if self._trace is None:
            return ""
        name = (f"{self._sess_options.profile_file_prefix}_"
                f"{time.strftime('%Y-%m-%d_%H-%M-%S', time.localtime(self._profiling_start_ns / 1e9))}.json")
        self._trace.write(name)
        self._trace = None
        return name


def _check_run_options(ro):
    if not isinstance(ro, RunOptions):
        raise InvalidArgument(f"run_options must be a RunOptions, got {type(ro).__name__}")
    if ro.terminate:
        raise Fail("Exiting due to terminate flag being set to true.")
    if "log_severity_level" in ro._set:
        set_default_logger_severity(ro.log_severity_level)
