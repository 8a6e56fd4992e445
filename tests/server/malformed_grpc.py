"""Generators of malformed gRPC requests for the robustness tests (test_robustness.py).

Each kind is a function rng -> Case: the method, the raw message bytes (sent as they are, through
a channel without serializers, so that undecodable bytes reach the server) and the status codes
the server may answer with. Messages are built with Triton's own protobuf module
(tritonclient.grpc.service_pb2) and then broken. The model is conftest's "tiny": x [N, 16] FP32
-> y [N, 8], max_batch_size 8. Deterministic for a given random.Random.
"""

import random
from dataclasses import dataclass

import grpc
import numpy as np
from tritonclient.grpc import service_pb2 as pb

SERVICE = "/inference.GRPCInferenceService/"
C = grpc.StatusCode


@dataclass
class Case:
    kind: str
    method: str
    data: bytes
    expect: frozenset  # grpc.StatusCode values the server may answer with


def good_request(rows=2, rid="") -> pb.ModelInferRequest:
    r = pb.ModelInferRequest(model_name="tiny", id=rid)
    r.inputs.add(name="x", datatype="FP32", shape=[rows, 16])
    r.raw_input_contents.append(np.full((rows, 16), 0.5, np.float32).tobytes())
    return r


def infer(kind, msg, *codes):
    data = msg if isinstance(msg, bytes) else msg.SerializeToString()
    return Case(kind, "ModelInfer", data, frozenset(codes))


def garbage(rng):
    return infer("garbage", bytes(rng.randrange(256) for _ in range(rng.randint(1, 400))), C.INVALID_ARGUMENT, C.NOT_FOUND)


def truncated(rng):
    data = good_request().SerializeToString()
    return infer("truncated", data[: rng.randrange(1, len(data) - 1)], C.INVALID_ARGUMENT, C.NOT_FOUND)


def flipped(rng):
    b = bytearray(good_request().SerializeToString())
    for _ in range(rng.randint(1, 6)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    # A flip may land in the tensor bytes (still valid) or anywhere in the framing.
    return infer("flipped", bytes(b), C.OK, C.INVALID_ARGUMENT, C.NOT_FOUND)


def wire_types(rng):
    """A field before the message proper: a known field with the wrong wire type is read as an
    unknown field and skipped (protobuf's rule), a field number 0, a wire type 6 or 7 or an
    unterminated group is not protobuf at all."""
    field, expect = rng.choice([
        (b"\x08\x01", {C.OK}), (b"\x0d\x00\x00\x00\x00", {C.OK}), (b"\x29" + b"\x00" * 8, {C.OK}),
        (b"\x3b\x3c", {C.OK}), (b"\xf8\xff\xff\xff\x0f\x01", {C.OK}),
        (b"\x00\x01", {C.INVALID_ARGUMENT}), (b"\x07\x01", {C.INVALID_ARGUMENT}), (b"\x0e\x01", {C.INVALID_ARGUMENT}),
        (b"\x0f", {C.INVALID_ARGUMENT}), (b"\x3b\x08\x01", {C.INVALID_ARGUMENT}), (b"\x0a\x7f", {C.INVALID_ARGUMENT}),
        (b"\x08" + b"\xff" * 11, {C.INVALID_ARGUMENT}),
    ])
    return infer("wire_types", field + good_request().SerializeToString(), *expect)


def bad_utf8(rng):
    data = good_request().SerializeToString().replace(b"tiny", b"t\xffny").replace(b"FP32", b"FP\xc332")
    return infer("bad_utf8", data, C.INVALID_ARGUMENT)


def datatype(rng):
    r = good_request()
    r.inputs[0].datatype = rng.choice(["INT64", "FP16", "BOOL", "BYTES", "XYZ", "", "fp32"])
    return infer("datatype", r, C.INVALID_ARGUMENT)


def shape(rng):
    r = good_request()
    del r.inputs[0].shape[:]
    r.inputs[0].shape.extend(rng.choice([[2, 15], [32], [2, 16, 1], [9, 16], [-1, 16], [2, -16], []]))
    return infer("shape", r, C.INVALID_ARGUMENT)


def raw_size(rng):
    r = good_request()
    raw = r.raw_input_contents[0]  # 128 bytes
    r.raw_input_contents[0] = raw[: rng.choice([0, 4, 127])] if rng.random() < 0.5 else raw + b"\x00" * rng.randint(1, 64)
    return infer("raw_size", r, C.INVALID_ARGUMENT)


def raw_count(rng):
    r = good_request()
    if rng.random() < 0.5:
        r.raw_input_contents.append(b"\x00" * 16)
    else:
        del r.raw_input_contents[:]
        r.raw_input_contents.append(b"")
        r.raw_input_contents.append(b"")
    return infer("raw_count", r, C.INVALID_ARGUMENT)


def typed(rng):
    r = good_request()
    del r.raw_input_contents[:]
    c = r.inputs[0].contents
    choice = rng.randrange(4)
    if choice == 0:
        c.fp32_contents.extend([0.5] * rng.choice([0, 31, 33]))  # wrong count
    elif choice == 1:
        c.fp64_contents.extend([0.5] * 32)  # the field of another datatype
    elif choice == 2:
        c.int_contents.extend([1] * 32)
    else:  # typed contents and raw contents together
        c.fp32_contents.extend([0.5] * 32)
        r.raw_input_contents.append(np.zeros(32, np.float32).tobytes())
    return infer("typed", r, C.INVALID_ARGUMENT)


def huge_dims(rng):
    r = good_request()
    del r.inputs[0].shape[:]
    r.inputs[0].shape.extend(rng.choice([[1 << 40, 16], [2**63 - 1, 2**63 - 1], [2] * rng.randint(33, 100000)]))
    return infer("huge_dims", r, C.INVALID_ARGUMENT)


def unknown(rng):
    r = good_request()
    choice = rng.randrange(4)
    if choice == 0:
        r.model_name = "nosuch%d" % rng.randrange(1000)
        return infer("unknown", r, C.NOT_FOUND)
    if choice == 1:
        r.model_version = str(rng.randint(2, 99))
        return infer("unknown", r, C.NOT_FOUND)
    if choice == 2:
        r.inputs[0].name = rng.choice(["y", "X", "x "])
        return infer("unknown", r, C.INVALID_ARGUMENT)
    r.outputs.add(name=rng.choice(["x", "nope", ""]))
    return infer("unknown", r, C.INVALID_ARGUMENT)


def parameters(rng):
    r = good_request()
    key = rng.choice(["priority", "timeout"])
    p = r.parameters[key]
    choice = rng.randrange(4)
    if choice == 0:
        p.int64_param = -rng.randint(1, 2**63 - 1)
    elif choice == 1:
        p.string_param = "high"
    elif choice == 2:
        p.double_param = 1.5
    else:
        p.bool_param = True
    return infer("parameters", r, C.INVALID_ARGUMENT)


def duplicate_inputs(rng):
    r = good_request()
    r.inputs.add(name="x", datatype="FP32", shape=[2, 16])
    r.raw_input_contents.append(r.raw_input_contents[0])
    return infer("duplicate_inputs", r, C.INVALID_ARGUMENT)


def other_methods(rng):
    method, msg, expect = rng.choice([
        ("ModelMetadata", pb.ModelMetadataRequest(name="nosuch"), {C.NOT_FOUND}),
        ("ModelMetadata", b"\xff\xff\xff", {C.INVALID_ARGUMENT}),
        ("ModelConfig", pb.ModelConfigRequest(name="tiny", version="7"), {C.NOT_FOUND}),
        ("ModelStatistics", pb.ModelStatisticsRequest(name="nosuch"), {C.NOT_FOUND}),
        ("ModelReady", b"\x0a\x05ab", {C.INVALID_ARGUMENT}),
        ("ServerLive", b"\x0a", {C.INVALID_ARGUMENT}),
        ("RepositoryModelLoad", pb.RepositoryModelLoadRequest(model_name="tiny"), {C.INVALID_ARGUMENT}),
        ("RepositoryModelUnload", pb.RepositoryModelUnloadRequest(model_name="tiny"), {C.INVALID_ARGUMENT}),
        ("RepositoryIndex", b"\x10\x02\x10", {C.INVALID_ARGUMENT}),
    ])
    data = msg if isinstance(msg, bytes) else msg.SerializeToString()
    return Case("other_methods", method, data, frozenset(expect))


KINDS = [garbage, truncated, flipped, wire_types, bad_utf8, datatype, shape, raw_size, raw_count, typed, huge_dims,
         unknown, parameters, duplicate_inputs, other_methods]


def cases(seed: int, n: int):
    """n cases, every kind at least n // len(KINDS) times, in a shuffled order."""
    rng = random.Random(seed)
    out = [KINDS[i % len(KINDS)](rng) for i in range(n)]
    rng.shuffle(out)
    return out


def oversize(limit_bytes: int) -> Case:
    """A valid message just over the server's request limit."""
    rows = limit_bytes // 64 + 1
    r = pb.ModelInferRequest(model_name="tiny")
    r.inputs.add(name="x", datatype="FP32", shape=[rows, 16])
    r.raw_input_contents.append(b"\x00" * (rows * 64))
    return infer("oversize", r, C.RESOURCE_EXHAUSTED)


def raw_stub(channel, method):
    """A unary call that sends and returns bytes as they are."""
    return channel.unary_unary(SERVICE + method, request_serializer=None, response_deserializer=None)

