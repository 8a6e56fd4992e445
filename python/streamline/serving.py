"""In-process serving: ServingModel (instances, dynamic batching) and Pipeline (stages).

Both take requests from any thread. ``submit`` returns a :class:`concurrent.futures.Future`;
``infer_async`` is its asyncio form; ``infer`` blocks. Results are dicts of output name ->
numpy array. Errors are streamline.errors exceptions (raised by ``infer``, set on futures).

Futures are completed on a runtime thread: their done-callbacks run there and must not call
``infer`` (use ``submit``, or asyncio).
"""

import asyncio
import atexit
import concurrent.futures
import os
import weakref

from . import _streamline as _native

_SERVING_FIELDS = {"instances", "threads_per_instance", "pin", "warmup", "stats_window"}
_BATCH_FIELDS = {"max_batch_size", "preferred_batch_sizes", "max_queue_delay_us", "priority_levels",
                 "default_priority", "preserve_ordering"}
_QUEUE_FIELDS = {"max_queue_size", "default_timeout_us", "timeout_action", "allow_timeout_override"}

# Live serving models and pipelines, shut down (drained) at interpreter exit while Python can
# still run their callbacks; pipelines first, since they feed models.
_live_pipelines = weakref.WeakSet()
_live_models = weakref.WeakSet()


@atexit.register
def _shutdown_all():
    for p in list(_live_pipelines):
        p.shutdown()
    for m in list(_live_models):
        m.shutdown()


def _future_and_callback():
    fut = concurrent.futures.Future()
    fut.set_running_or_notify_cancel()  # runtime requests cannot be cancelled once submitted

    def done(outputs, error):
        if error is None:
            fut.set_result(outputs)
        else:
            fut.set_exception(error)

    return fut, done


class ServingModel:
    """A model served in process: ``instances`` execution contexts sharing one copy of the weights,
    and a dynamic batcher that merges concurrent requests (first dimension = rows).

    ``model`` is a :class:`streamline.Model`, or a path / bytes to load with ``model_options``.
    ``options`` is a :class:`streamline.ServingOptions`; keyword arguments set its fields, those of
    its ``batching`` (max_batch_size, preferred_batch_sizes, max_queue_delay_us, priority_levels,
    default_priority, preserve_ordering) and of ``batching.queue`` (max_queue_size,
    default_timeout_us, timeout_action, allow_timeout_override)::

        served = streamline.ServingModel("model.onnx", instances=2, max_batch_size=8,
                                         max_queue_delay_us=2000)
        fut = served.submit({"x": x})         # concurrent.futures.Future -> {"y": array}
        y = served.infer({"x": x})["y"]
    """

    def __init__(self, model, options=None, model_options=None, **kwargs):
        if not isinstance(model, _native.Model):
            if not isinstance(model, (str, bytes, bytearray, memoryview, os.PathLike)):
                raise TypeError(f"model must be a streamline.Model, a path or bytes, not {type(model).__name__}")
            model = _native.Model.load(model, model_options)
        elif model_options is not None:
            raise TypeError("model_options apply only when ServingModel loads the model itself")
        options = options if options is not None else _native.ServingOptions()
        for key, value in kwargs.items():
            if key in _SERVING_FIELDS:
                setattr(options, key, value)
            elif key in _BATCH_FIELDS:
                setattr(options.batching, key, value)
            elif key in _QUEUE_FIELDS:
                setattr(options.batching.queue, key, value)
            else:
                raise TypeError(f"ServingModel got an unexpected keyword argument '{key}'")
        self.model = model
        self._impl = _native._ServingModel(model, options)
        _live_models.add(self)

    def submit(self, inputs, *, priority=-1, timeout_us=0, outputs=None, id=0):
        """Queues a request; the future gets the outputs dict or the error."""
        fut, done = _future_and_callback()
        self._impl.submit(inputs, done, id=id, priority=priority, timeout_us=timeout_us, outputs=outputs)
        return fut

    async def infer_async(self, inputs, **kwargs):
        """``await``-able submit (same keyword arguments)."""
        return await asyncio.wrap_future(self.submit(inputs, **kwargs))

    def infer(self, inputs, *, priority=-1, timeout_us=0, outputs=None, id=0):
        """Submits and waits; returns the outputs dict or raises."""
        return self._impl.infer(inputs, id=id, priority=priority, timeout_us=timeout_us, outputs=outputs)

    def stats(self):
        """Counters since load: accepted, succeeded, failed, latencies, batch sizes, ..."""
        return self._impl.stats()

    def shutdown(self, mode="drain"):
        """Stops taking requests, then drains ('drain') or cancels ('cancel') the queue. Idempotent."""
        self._impl.shutdown(mode)

    @property
    def options(self):
        return self._impl.options

    @property
    def planned_batch_sizes(self):
        return self._impl.planned_batch_sizes

    @property
    def threads_per_instance(self):
        return self._impl.threads_per_instance

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


class Pipeline:
    """A running pipeline (made by :meth:`PipelineBuilder.build`)."""

    def __init__(self, impl, models):
        self._impl = impl
        self._models = models  # the ServingModels its model stages use, kept alive with it
        _live_pipelines.add(self)

    def submit(self, inputs, *, timeout_us=0, outputs=None, id=0):
        fut, done = _future_and_callback()
        self._impl.submit(inputs, done, id=id, timeout_us=timeout_us, outputs=outputs)
        return fut

    async def infer_async(self, inputs, **kwargs):
        return await asyncio.wrap_future(self.submit(inputs, **kwargs))

    def infer(self, inputs, *, timeout_us=0, outputs=None, id=0):
        return self._impl.infer(inputs, id=id, timeout_us=timeout_us, outputs=outputs)

    def stats(self):
        return self._impl.stats()

    def step_rebalancer(self):
        """Runs one rebalancing window now; the moves made (dicts with from, to, reason...)."""
        return self._impl.step_rebalancer()

    def shutdown(self, mode="drain"):
        self._impl.shutdown(mode)

    @property
    def input_names(self):
        return self._impl.input_names

    @property
    def output_names(self):
        return self._impl.output_names

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


class PipelineBuilder:
    """Stages connected by the names of the tensors they read and write::

        b = streamline.PipelineBuilder()
        b.input("raw")
        b.add_function("pre", ["raw"], ["x"], lambda t: {"x": t["raw"].astype("float32") / 255})
        b.add_model("model", ["x"], ["y"], served)             # a ServingModel
        b.add_stage("top", ["y"], ["classes", "scores"], streamline.stages.top_k(k=5))
        pipe = b.build()

    A Python stage gets a dict of read-only numpy arrays and returns a dict with exactly its
    outputs; it runs on a stage thread holding the GIL only while it runs.
    """

    def __init__(self):
        self._impl = _native._PipelineBuilder()
        self._models = []

    def input(self, name):
        self._impl.input(name)
        return self

    def output(self, name):
        self._impl.output(name)
        return self

    def add_function(self, name, inputs, outputs, fn, *, instances=1, queue_capacity=16, serial=False,
                     max_instances=0):
        """serial: fn never runs twice at once (one worker, never rebalanced); max_instances: most
        workers rebalancing may give it (0 = the budget). A Python stage holds the GIL while it
        runs, so more workers help only where fn releases it (numpy, I/O, time.sleep)."""
        self._impl.add_function(name, list(inputs), list(outputs), fn, instances=instances,
                                queue_capacity=queue_capacity, serial=serial, max_instances=max_instances)
        return self

    def add_stage(self, name, inputs, outputs, stage, *, instances=1, queue_capacity=16, serial=False,
                  max_instances=0):
        self._impl.add_stage(name, list(inputs), list(outputs), stage, instances=instances,
                             queue_capacity=queue_capacity, serial=serial, max_instances=max_instances)
        return self

    def add_model(self, name, inputs, outputs, model, *, model_inputs=(), model_outputs=(), max_in_flight=0,
                  queue_capacity=16, max_replicas=1):
        """max_replicas: with rebalancing, how many serving models over the same weights the stage
        may spread its requests over (each one more instance)."""
        if not isinstance(model, ServingModel):
            raise TypeError(f"a model stage needs a streamline.ServingModel, not {type(model).__name__}")
        self._impl.add_model(name, list(inputs), list(outputs), model._impl, model_inputs=list(model_inputs),
                             model_outputs=list(model_outputs), max_in_flight=max_in_flight,
                             queue_capacity=queue_capacity, max_replicas=max_replicas)
        self._models.append(model)
        return self

    def build(self, *, entry_timeout_us=1_000_000, stats_window=4096, rebalance=False, worker_budget=0,
              rebalance_window_us=500_000):
        """rebalance / worker_budget: move workers to the slowest stage under load (a budget > 0
        turns it on; rebalance=True keeps the total the stages start with). Moves and their
        reasons are in stats()["rebalance"]."""
        impl = self._impl.build(entry_timeout_us=entry_timeout_us, stats_window=stats_window, rebalance=rebalance,
                                worker_budget=worker_budget, rebalance_window_us=rebalance_window_us)
        return Pipeline(impl, list(self._models))
