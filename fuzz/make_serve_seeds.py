#!/usr/bin/python3
"""Writes seed inputs for the server's fuzz targets, one folder per target.

Usage: python3 fuzz/make_serve_seeds.py OUT_DIR
Makes OUT_DIR/{http_request,json_decode,binary_decode,grpc_decode,config}/ with small valid (and a
few nearly valid) inputs covering each decoder's features: every KServe datatype, flat, nested
and scalar data, the binary extension, pipelined and chunked HTTP, typed and raw gRPC contents,
and config.pbtxt with every field streamline reads. The standard library only: gRPC messages are
encoded here by hand (the protobuf wire format is a few lines), so no generated module is needed.
The inputs are the same on every run.
"""
import json
import os
import struct
import sys

DTYPES = {  # KServe name -> (struct code, JSON sample values)
    "BOOL": ("?", [True, False, True, False]),
    "INT8": ("b", [-128, 0, 1, 127]), "INT16": ("h", [-32768, 0, 1, 32767]),
    "INT32": ("i", [-2147483648, 0, 1, 2147483647]),
    "INT64": ("q", [-9223372036854775808, 0, 1, 9223372036854775807]),
    "UINT8": ("B", [0, 1, 2, 255]), "UINT16": ("H", [0, 1, 2, 65535]),
    "UINT32": ("I", [0, 1, 2, 4294967295]), "UINT64": ("Q", [0, 1, 2, 18446744073709551615]),
    "FP16": ("e", [0.5, -1.0, 65504.0, 1e-5]), "FP32": ("f", [0.5, -1.5, 3.25, 1e30]),
    "FP64": ("d", [0.5, -1.5, 3.25, 1e300]),
}


def infer_doc(inputs, **extra):
    return json.dumps({**extra, "inputs": inputs}, separators=(",", ":"))


def json_seeds():
    out = {}
    for dt, (_, vals) in DTYPES.items():
        out[f"flat_{dt}"] = infer_doc([{"name": "x", "datatype": dt, "shape": [2, 2], "data": vals}])
        out[f"nested_{dt}"] = infer_doc([{"name": "x", "datatype": dt, "shape": [2, 2], "data": [vals[:2], vals[2:]]}])
    out["scalar"] = infer_doc([{"name": "x", "datatype": "FP32", "shape": [1], "data": 2.5}])
    out["empty"] = infer_doc([{"name": "x", "datatype": "FP32", "shape": [0, 3], "data": []}])
    out["rank0"] = infer_doc([{"name": "x", "datatype": "INT64", "shape": [], "data": [7]}])
    out["params"] = infer_doc(
        [{"name": "x", "datatype": "FP32", "shape": [1, 2], "data": [1, 2], "parameters": {"unknown": "kept"}}],
        id="req-1", parameters={"priority": 2, "timeout": 1000, "binary_data_output": True},
        outputs=[{"name": "y", "parameters": {"binary_data": False}}, {"name": "z"}])
    out["data_first"] = '{"inputs":[{"data":[[1,2,3]],"name":"a","shape":[1,3],"datatype":"INT32"}]}'
    out["two_inputs"] = infer_doc([{"name": "a", "datatype": "FP32", "shape": [1], "data": [1]},
                                   {"name": "b", "datatype": "BOOL", "shape": [2], "data": [True, False]}])
    out["nan_inf"] = '{"inputs":[{"name":"x","datatype":"FP64","shape":[3],"data":[NaN,Infinity,-Infinity]}]}'
    out["unknown_members"] = ('{"x":{"deep":[[[{"a":null}]]]},"inputs":[{"name":"x","datatype":"FP32",'
                              '"shape":[1],"data":[1e-7],"extra":[1,2,{"b":"c"}]}],"trailing":true}')
    out["ragged"] = infer_doc([{"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [[1, 2], [3]]}])
    out["escapes"] = '{"id":"\\u00e9\\n\\"q\\"","inputs":[{"name":"\\u0078","datatype":"FP32","shape":[1],"data":[1]}]}'
    return out


def binary_body(header_inputs, raws, **extra):
    header = json.dumps({**extra, "inputs": header_inputs}, separators=(",", ":")).encode()
    return f"{len(header)}\n".encode() + header + b"".join(raws)


def binary_seeds():
    out = {}
    for dt, (code, vals) in DTYPES.items():
        raw = struct.pack("<" + code * len(vals), *vals)
        out[f"raw_{dt}"] = binary_body(
            [{"name": "x", "datatype": dt, "shape": [2, 2], "parameters": {"binary_data_size": len(raw)}}], [raw])
    f = struct.pack("<3f", 1.0, 2.0, 3.0)
    q = struct.pack("<q", -42)
    out["mixed"] = binary_body(
        [{"name": "a", "datatype": "FP32", "shape": [3], "parameters": {"binary_data_size": 12}},
         {"name": "j", "datatype": "INT32", "shape": [1], "data": [7]},
         {"name": "b", "datatype": "INT64", "shape": [1], "parameters": {"binary_data_size": 8}}], [f, q],
        outputs=[{"name": "y", "parameters": {"binary_data": True}}])
    out["json_only"] = b"\n" + json_seeds()["flat_FP32"].encode()
    out["short_raw"] = binary_body(
        [{"name": "x", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}}], [f])
    return out


def http_request(method, target, body=b"", headers=(), version="1.1"):
    lines = [f"{method} {target} HTTP/{version}", "Host: x", *headers]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def chunked(target, body, trailer=""):
    chunks = b"".join(b"%x\r\n" % len(body[i:i + 7]) + body[i:i + 7] + b"\r\n" for i in range(0, len(body), 7))
    return (f"POST {target} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").encode() + chunks + \
        b"0\r\n" + trailer.encode() + b"\r\n"


def http_seeds():
    doc = json_seeds()["flat_FP32"].encode()
    binary = binary_seeds()["mixed"]
    header_len, _, bin_body = binary.partition(b"\n")
    reqs = {
        "health": http_request("GET", "/v2/health/live"),
        "infer_json": http_request("POST", "/v2/models/tiny/infer", doc, ["Content-Type: application/json"]),
        "infer_binary": http_request("POST", "/v2/models/tiny/versions/1/infer", bin_body,
                                     [f"Inference-Header-Content-Length: {header_len.decode()}"]),
        "pipelined": http_request("GET", "/v2") + http_request("POST", "/v2/models/tiny/infer", doc) +
        http_request("GET", "/v2/models/tiny/ready", headers=["Connection: close"]),
        "chunked": chunked("/v2/models/tiny/infer", doc, "X-Trailer: 1\r\n"),
        "expect": http_request("POST", "/v2/models/tiny/infer", doc, ["Expect: 100-continue"]),
        "http10": http_request("GET", "/v2/models/tiny/config", version="1.0"),
        "escapes": http_request("GET", "/v2/models/a%2Fb%20c/versions/%31/stats?x=1"),
        "index": http_request("POST", "/v2/repository/index", b'{"ready":true}'),
        "encoding": http_request("POST", "/v2/models/m/infer", doc, ["Content-Encoding: gzip"]),
        "two_lengths": http_request("POST", "/v2/models/m/infer", bin_body,
                                    ["Inference-Header-Content-Length: 5", "Inference-Header-Content-Length: 6"]),
    }
    out = {}
    for name, data in reqs.items():
        out[name] = bytes([7]) + data  # whole reads, default limits
        out[name + "_small"] = bytes([8 | 2]) + data  # 3-byte reads, small limits
    return out


def varint(n):
    n &= (1 << 64) - 1
    b = bytearray()
    while True:
        if n < 0x80:
            b.append(n)
            return bytes(b)
        b.append((n & 0x7F) | 0x80)
        n >>= 7


def field(num, wire, payload):
    key = varint((num << 3) | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 1:
        return key + struct.pack("<d", payload)
    if wire == 2:
        return key + varint(len(payload)) + payload
    raise ValueError(wire)


def string_field(num, s):
    return field(num, 2, s.encode() if isinstance(s, str) else s)


def packed(num, values, enc):
    return field(num, 2, b"".join(enc(v) for v in values))


def parameter(key, kind, value):
    if kind == "int64":
        p = field(2, 0, value)
    elif kind == "uint64":
        p = field(5, 0, value)
    elif kind == "bool":
        p = field(1, 0, int(value))
    elif kind == "double":
        p = field(4, 1, value)
    else:
        p = string_field(3, value)
    return string_field(1, key) + string_field(2, p)


def input_tensor(name, dt, shape, contents=b"", params=()):
    m = string_field(1, name) + string_field(2, dt) + packed(3, shape, varint)
    for p in params:
        m += string_field(4, p)
    if contents:
        m += string_field(5, contents)
    return m


def typed_contents(dt, vals):
    if dt == "BOOL":
        return packed(1, vals, lambda v: varint(int(v)))
    if dt in ("INT8", "INT16", "INT32"):
        return packed(2, vals, varint)
    if dt == "INT64":
        return packed(3, vals, varint)
    if dt in ("UINT8", "UINT16", "UINT32"):
        return packed(4, vals, varint)
    if dt == "UINT64":
        return packed(5, vals, varint)
    if dt == "FP64":
        return packed(7, vals, lambda v: struct.pack("<d", v))
    return packed(6, vals, lambda v: struct.pack("<f", v))


def grpc_request(inputs, raws=(), params=(), outputs=(), model="tiny", version="", rid=""):
    m = string_field(1, model)
    if version:
        m += string_field(2, version)
    if rid:
        m += string_field(3, rid)
    for p in params:
        m += string_field(4, p)
    for i in inputs:
        m += string_field(5, i)
    for o in outputs:
        m += string_field(6, o)
    for r in raws:
        m += string_field(7, r)
    return m


def grpc_seeds():
    out = {}
    for dt, (code, vals) in DTYPES.items():
        raw = struct.pack("<" + code * len(vals), *vals)
        out[f"raw_{dt}"] = grpc_request([input_tensor("x", dt, [2, 2])], [raw])
        if dt != "FP16":
            out[f"typed_{dt}"] = grpc_request([input_tensor("x", dt, [2, 2], typed_contents(dt, vals))])
    out["params"] = grpc_request(
        [input_tensor("x", "FP32", [1, 2], typed_contents("FP32", [1, 2]), [parameter("shm", "string", "no")])],
        params=[parameter("priority", "int64", 1), parameter("timeout", "uint64", 2500),
                parameter("flag", "bool", True), parameter("ratio", "double", 0.5)],
        outputs=[string_field(1, "y") + string_field(2, parameter("binary_data", "bool", True))],
        version="1", rid="r1")
    out["two_raw"] = grpc_request([input_tensor("a", "FP32", [1]), input_tensor("b", "INT64", [2])],
                                  [struct.pack("<f", 1.0), struct.pack("<2q", 3, -4)])
    out["empty_shape"] = grpc_request([input_tensor("x", "FP32", [0, 4])], [b""])
    out["negative_dim"] = grpc_request([input_tensor("x", "FP32", [-1, 4])], [b""])
    # The first byte cuts the message into 1 to 4 slices.
    return {f"{name}_{k}": bytes([k]) + msg for name, msg in out.items() for k in (0, 3)}


CONFIG_FULL = """name: "resnet"
platform: "onnxruntime_onnx"
backend: "streamline"
max_batch_size: 8
input [
  { name: "x" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] reshape: { shape: [ 1, 3 ] } },
  { name: "mask", data_type: TYPE_BOOL, dims: [ 4 ] }
]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 1000 ] } ]
instance_group [ { count: 2 kind: KIND_CPU }, { kind: KIND_AUTO } ]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
  preserve_ordering: true
  priority_levels: 3
  default_priority_level: 2
  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 5000
                         allow_timeout_override: false max_queue_size: 16 }
}
parameters { key: "threads" value: { string_value: "4" } }
parameters { key: "streams" value: { string_value: "2" } }
parameters { key: "threads_per_stream" value: { string_value: "2" } }
parameters { key: "elastic_threads" value: { string_value: "true" } }
parameters { key: "split_convs" value: { string_value: "2" } }
parameters { key: "winograd" value: { string_value: "false" } }
parameters { key: "cuda_graphs" value: { string_value: "true" } }
parameters { key: "precision" value: { string_value: "fp32" } }
parameters { key: "pin" value: { string_value: "0" } }
parameters { key: "warmup" value: { string_value: "1" } }
"""


def config_seeds():
    return {
        "full": CONFIG_FULL,
        "minimal": "max_batch_size: 0\n",
        "comments": "# a comment\nname: 'm' # trailing\nmax_batch_size: 4\ndynamic_batching { }\n",
        "no_colon_lists": "input [ { name: \"x\" data_type: TYPE_INT64 dims [ 2 ] } ]\noutput { name: \"y\" dims [-1] }\n",
        "angle": "instance_group < count: 1 kind: KIND_CPU >\nparameters: { key: \"k\" value: { string_value: \"v\" } }\n",
        "unknown": "model_warmup [ { name: \"w\" batch_size: 1 inputs { key: \"x\" value: { zero_data: true } } } ]\n"
                   "optimization { graph { level: 1 } }\nversion_policy: { latest: { num_versions: 1 } }\n",
        "gpu": "instance_group [ { kind: KIND_GPU gpus: [ 0, 1 ] } ]\n",
        "deep": "max_batch_size: 1\n" + "u { " * 70 + "} " * 70 + "\n",
        "strings": 'name: "a\\"b\\n\\x41\\101"\nplatform: \'streamline_onnx\'\n',
        "numbers": "max_batch_size: 0x10\ninput [ { name: \"x\" dims: [ -1, 0x7fffffffffffffff ] } ]\n",
    }


def main():
    root = sys.argv[1]
    sets = {"json_decode": json_seeds(), "binary_decode": binary_seeds(), "http_request": http_seeds(),
            "grpc_decode": grpc_seeds(), "config": config_seeds()}
    for target, seeds in sets.items():
        d = os.path.join(root, target)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data if isinstance(data, bytes) else data.encode())


if __name__ == "__main__":
    main()
