"""One script written against ONNX Runtime's Python API, run with either package:

    python ort_script.py --backend onnxruntime --model M.onnx --out OUT     # the reference
    python ort_script.py --backend streamline  --model M.onnx --out OUT     # import streamline as onnxruntime

It exercises the common calls (sessions from a path and from bytes, SessionOptions, providers,
get_inputs/get_outputs, get_modelmeta, run with all and with named outputs, RunOptions,
run_async) and writes what it saw to OUT.npz (arrays) and OUT.json (everything else), which the
test compares between the two backends.
"""

import argparse
import json
import threading

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--backend", choices=["onnxruntime", "streamline"], required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--out", required=True)
args = ap.parse_args()

if args.backend == "streamline":
    import streamline as onnxruntime
else:
    import onnxruntime

arrays, info = {}, {}

so = onnxruntime.SessionOptions()
so.intra_op_num_threads = 1
so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
sess = onnxruntime.InferenceSession(args.model, sess_options=so, providers=["CPUExecutionProvider"])
info["providers"] = sess.get_providers()
info["inputs"] = [[i.name, i.shape, i.type] for i in sess.get_inputs()]
info["outputs"] = [[o.name, o.shape, o.type] for o in sess.get_outputs()]
meta = sess.get_modelmeta()
info["meta"] = {
    "producer_name": meta.producer_name,
    "graph_name": meta.graph_name,
    "domain": meta.domain,
    "description": meta.description,
    "graph_description": meta.graph_description,
    "version": meta.version,
    "custom_metadata_map": dict(meta.custom_metadata_map),
}

rng = np.random.default_rng(0)
x1 = rng.standard_normal((1, 3, 12, 12), dtype=np.float32)
x4 = rng.standard_normal((4, 3, 20, 16), dtype=np.float32)
name = sess.get_inputs()[0].name

outs = sess.run(None, {name: x1})
arrays["all_logits"], arrays["all_probs"] = outs
arrays["named_probs"] = sess.run(["probs"], {name: x4})[0]
arrays["empty_names"] = sess.run([], {name: x4})[0]
ro = onnxruntime.RunOptions()
ro.log_severity_level = 3
arrays["with_run_options"] = sess.run(None, {name: x4}, ro)[1]
# Non-contiguous input (a transposed view).
xt = np.ascontiguousarray(x4.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
arrays["non_contiguous"] = sess.run(["logits"], {name: xt})[0]

with open(args.model, "rb") as f:
    from_bytes = onnxruntime.InferenceSession(f.read(), providers=["CPUExecutionProvider"])
arrays["from_bytes"] = from_bytes.run(None, {name: x4})[0]

par = onnxruntime.SessionOptions()
par.execution_mode = onnxruntime.ExecutionMode.ORT_PARALLEL
par.inter_op_num_threads = 2
par.intra_op_num_threads = 1
arrays["parallel"] = onnxruntime.InferenceSession(args.model, par, providers=["CPUExecutionProvider"]).run(
    None, {name: x4})[0]

basic = onnxruntime.SessionOptions()
basic.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
arrays["unoptimized"] = onnxruntime.InferenceSession(args.model, basic, providers=["CPUExecutionProvider"]).run(
    None, {name: x4})[0]

done = threading.Event()
got = {}


def callback(results, user_data, err):
    got["results"], got["user_data"], got["err"] = results, user_data, err
    done.set()


# ONNX Runtime's run_async runs on the intra-op pool, which needs two threads or more.
so_async = onnxruntime.SessionOptions()
so_async.intra_op_num_threads = 2
onnxruntime.InferenceSession(args.model, so_async, providers=["CPUExecutionProvider"]).run_async(
    ["logits"], {name: x4}, callback, "token-7")
if not done.wait(60):
    raise SystemExit("run_async never called back")
arrays["async"] = got["results"][0]
info["async"] = {"user_data": got["user_data"], "err": got["err"]}

np.savez(args.out + ".npz", **arrays)
with open(args.out + ".json", "w") as f:
    json.dump(info, f, indent=1, sort_keys=True)
