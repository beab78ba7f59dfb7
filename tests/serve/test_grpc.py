"""`bulkhead serve --grpc-port` end to end, as a user's gRPC client calls it: Debian's
python3-grpcio with stubs generated (here, at test time, by protoc and grpc_python_plugin)
from the service definition src/serve/grpc_predict_v2.proto — the same way a user builds a
client for any Open Inference Protocol server.

Run by ctest (serve_grpc_test) with Debian's /usr/bin/python3; needs BULKHEAD_BINARY,
BULKHEAD_SHARED and BULKHEAD_SOURCE (the repository, for the .proto) in the environment.
"""
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import grpc  # Debian python3-grpcio

BIN = os.environ.get("BULKHEAD_BINARY", "")
SHARED = os.environ.get("BULKHEAD_SHARED", "")
SOURCE = os.environ.get("BULKHEAD_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
MODELS = os.path.join(SHARED, "models")
PROTO = os.path.join(SOURCE, "src", "serve", "grpc_predict_v2.proto")
TIMEOUT = 60  # seconds, for every call
MAX_BODY = 32 << 20


def need_data():
    if not BIN or not os.path.exists(BIN):
        pytest.fail("BULKHEAD_BINARY is not set to the bulkhead program")
    if not os.path.isdir(MODELS):
        pytest.fail(f"the shared test data is missing: {MODELS} (set BULKHEAD_SHARED)")
    if not os.path.isfile(PROTO):
        pytest.fail(f"the service definition is missing: {PROTO} (set BULKHEAD_SOURCE)")


def npy(model, kind, name):
    return np.load(os.path.join(MODELS, model, kind, name + ".npy"))


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    """The messages and stub, generated as a client's build would."""
    need_data()
    out = tmp_path_factory.mktemp("stubs")
    plugin = shutil.which("grpc_python_plugin")
    assert plugin, "grpc_python_plugin (Debian protobuf-compiler-grpc) is not installed"
    subprocess.run(["protoc", "-I", os.path.dirname(PROTO), f"--python_out={out}", f"--grpc_python_out={out}",
                    f"--plugin=protoc-gen-grpc_python={plugin}", PROTO], check=True, timeout=120)
    sys.path.insert(0, str(out))
    msgs = importlib.import_module("grpc_predict_v2_pb2")
    svc = importlib.import_module("grpc_predict_v2_pb2_grpc")
    return msgs, svc


class Server:
    def __init__(self, repo, *extra):
        self.log = open(os.path.join(str(repo), f".serve-{time.monotonic_ns()}.log"), "w+")
        self.proc = subprocess.Popen([BIN, "serve", "--model-repository", str(repo), "--http-port", "0",
                                      "--grpc-port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        http = self.proc.stdout.readline()
        grpc_line = self.proc.stdout.readline()
        if "listening on" not in http or "gRPC on" not in grpc_line:
            self.proc.kill()
            self.proc.communicate(timeout=30)
            raise AssertionError(f"the server did not start: {http!r} {grpc_line!r} {self.logged()}")
        self.target = grpc_line.strip().split()[-1]

    def logged(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=60)
        return self.proc.returncode, out, self.logged()


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    need_data()
    root = tmp_path_factory.mktemp("repo")
    for m in ("ppocrv4_rec", "ppocrv4_det", "silero_vad_v5"):
        os.makedirs(root / m / "1")
        shutil.copyfile(os.path.join(MODELS, m, "model.onnx"), root / m / "1" / "model.onnx")
    (root / "ppocrv4_rec" / "config.json").write_text(json.dumps({"threads": 1, "instances": 2}))
    (root / "silero_vad_v5" / "config.json").write_text(json.dumps({"threads": 1, "isolation": "process"}))
    os.makedirs(root / "broken" / "1")
    (root / "broken" / "1" / "model.onnx").write_bytes(b"\x08\x07not an onnx model" * 10)
    return root


@pytest.fixture(scope="module")
def server(repo):
    s = Server(repo, "--max-body", str(MAX_BODY))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def stub(server, pb):
    msgs, svc = pb
    channel = grpc.insecure_channel(server.target, options=[("grpc.max_send_message_length", 256 << 20),
                                                            ("grpc.max_receive_message_length", 256 << 20)])
    yield svc.GRPCInferenceServiceStub(channel)
    channel.close()


def raw_request(msgs, model, inputs, outputs=(), **kw):
    """A ModelInferRequest with every input in raw_input_contents."""
    req = msgs.ModelInferRequest(model_name=model, **kw)
    for name, arr, dt in inputs:
        req.inputs.add(name=name, datatype=dt, shape=list(arr.shape))
        req.raw_input_contents.append(np.ascontiguousarray(arr).tobytes())
    for o in outputs:
        req.outputs.add(name=o)
    return req


def outputs_of(resp):
    assert len(resp.raw_output_contents) == len(resp.outputs)
    types = {"FP32": np.float32, "INT64": np.int64, "FP64": np.float64}
    return {o.name: np.frombuffer(raw, dtype=types[o.datatype]).reshape(list(o.shape))
            for o, raw in zip(resp.outputs, resp.raw_output_contents)}


def close(got, ref, tol):
    return got.shape == ref.shape and float(np.max(np.abs(got - ref))) <= tol


def call_error(fn, req):
    with pytest.raises(grpc.RpcError) as e:
        fn(req, timeout=TIMEOUT)
    return e.value.code(), e.value.details()


def test_health_metadata_and_index(stub, pb):
    msgs, _ = pb
    assert stub.ServerLive(msgs.ServerLiveRequest(), timeout=TIMEOUT).live
    assert stub.ServerReady(msgs.ServerReadyRequest(), timeout=TIMEOUT).ready
    meta = stub.ServerMetadata(msgs.ServerMetadataRequest(), timeout=TIMEOUT)
    assert meta.name == "bulkhead" and "model_repository" in meta.extensions
    m = stub.ModelMetadata(msgs.ModelMetadataRequest(name="ppocrv4_rec"), timeout=TIMEOUT)
    assert m.name == "ppocrv4_rec" and list(m.versions) == ["1"] and m.platform == "onnx"
    assert m.inputs[0].name == "x" and m.inputs[0].datatype == "FP32"
    assert len(m.inputs[0].shape) == 4 and -1 in m.inputs[0].shape  # a free dimension is -1
    assert stub.ModelReady(msgs.ModelReadyRequest(name="ppocrv4_det"), timeout=TIMEOUT).ready
    assert stub.ModelReady(msgs.ModelReadyRequest(name="ppocrv4_det", version="1"), timeout=TIMEOUT).ready
    code, detail = call_error(stub.ModelReady, msgs.ModelReadyRequest(name="nope"))
    assert code == grpc.StatusCode.NOT_FOUND and "nope" in detail
    code, detail = call_error(stub.ModelMetadata, msgs.ModelMetadataRequest(name="ppocrv4_det", version="7"))
    assert code == grpc.StatusCode.NOT_FOUND and "version '7'" in detail
    index = {e.name: e for e in stub.RepositoryIndex(msgs.RepositoryIndexRequest(), timeout=TIMEOUT).models}
    for name in ("ppocrv4_rec", "ppocrv4_det", "silero_vad_v5"):
        assert index[name].state == "READY" and index[name].version == "1"
    assert index["broken"].state == "UNAVAILABLE" and "model.onnx" in index["broken"].reason
    ready = {e.name for e in stub.RepositoryIndex(msgs.RepositoryIndexRequest(ready=True), timeout=TIMEOUT).models}
    assert ready == {"ppocrv4_rec", "ppocrv4_det", "silero_vad_v5"}


def test_rec_raw_and_typed_contents_match_the_reference(stub, pb):
    msgs, _ = pb
    x = npy("ppocrv4_rec", "inputs", "x")
    ref = npy("ppocrv4_rec", "outputs", "softmax_11.tmp_0")
    resp = stub.ModelInfer(raw_request(msgs, "ppocrv4_rec", [("x", x, "FP32")], id="r1"), timeout=TIMEOUT)
    assert resp.model_name == "ppocrv4_rec" and resp.model_version == "1" and resp.id == "r1"
    assert resp.outputs[0].datatype == "FP32"
    assert close(outputs_of(resp)["softmax_11.tmp_0"], ref, 1e-4)
    # The same input in fp32_contents.
    req = msgs.ModelInferRequest(model_name="ppocrv4_rec", model_version="1")
    t = req.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
    t.contents.fp32_contents.extend(x.flatten().tolist())
    resp = stub.ModelInfer(req, timeout=TIMEOUT)
    assert close(outputs_of(resp)["softmax_11.tmp_0"], ref, 1e-4)


def test_det_raw_matches_the_reference(stub, pb):
    msgs, _ = pb
    x = npy("ppocrv4_det", "inputs", "x")
    resp = stub.ModelInfer(raw_request(msgs, "ppocrv4_det", [("x", x, "FP32")]), timeout=TIMEOUT)
    assert close(outputs_of(resp)["sigmoid_0.tmp_0"], npy("ppocrv4_det", "outputs", "sigmoid_0.tmp_0"), 1e-4)


def test_silero_in_a_worker_typed_int64_and_requested_outputs(stub, pb):
    msgs, _ = pb
    inp, state, sr = (npy("silero_vad_v5", "inputs", n) for n in ("input", "state", "sr"))
    req = msgs.ModelInferRequest(model_name="silero_vad_v5")
    for name, arr in (("input", inp), ("state", state)):
        req.inputs.add(name=name, datatype="FP32", shape=list(arr.shape)).contents.fp32_contents.extend(
            arr.flatten().tolist())
    req.inputs.add(name="sr", datatype="INT64", shape=list(sr.shape)).contents.int64_contents.extend(
        sr.flatten().tolist())
    req.outputs.add(name="stateN")
    req.outputs.add(name="output")
    resp = stub.ModelInfer(req, timeout=TIMEOUT)
    assert [o.name for o in resp.outputs] == ["stateN", "output"]  # the order asked for
    for name, got in outputs_of(resp).items():
        assert close(got, npy("silero_vad_v5", "outputs", name), 1e-5), name


def test_every_bad_request_class_gets_a_clear_error(stub, pb):
    msgs, _ = pb
    x = npy("ppocrv4_rec", "inputs", "x")
    bad = []

    def expect(req, code, *words):
        got, detail = call_error(stub.ModelInfer, req)
        assert got == code, (got, detail)
        for w in words:
            assert w in detail, (w, detail)
        assert "\n" not in detail
        bad.append(detail)

    expect(raw_request(msgs, "nope", [("x", x, "FP32")]), grpc.StatusCode.NOT_FOUND, "unknown model 'nope'")
    expect(raw_request(msgs, "ppocrv4_rec", [("x", x, "FP32")], model_version="9"), grpc.StatusCode.NOT_FOUND,
           "version '9'")
    expect(raw_request(msgs, "ppocrv4_rec", [("x", x.astype(np.float64), "FP64")]),
           grpc.StatusCode.INVALID_ARGUMENT, "datatype FP64", "FP32")
    expect(raw_request(msgs, "ppocrv4_rec", [("x", x[0], "FP32")]), grpc.StatusCode.INVALID_ARGUMENT, "rank")
    expect(raw_request(msgs, "ppocrv4_rec", [("y", x, "FP32")]), grpc.StatusCode.INVALID_ARGUMENT,
           "unknown input 'y'")
    expect(msgs.ModelInferRequest(model_name="ppocrv4_rec"), grpc.StatusCode.INVALID_ARGUMENT, "no inputs")
    sil = npy("silero_vad_v5", "inputs", "input")
    expect(raw_request(msgs, "silero_vad_v5", [("input", sil, "FP32")]), grpc.StatusCode.INVALID_ARGUMENT,
           "missing input")
    # Raw contents that lie about their size: a byte short, and one entry too many.
    lie = raw_request(msgs, "ppocrv4_rec", [("x", x, "FP32")])
    lie.raw_input_contents[0] = lie.raw_input_contents[0][:-1]
    expect(lie, grpc.StatusCode.INVALID_ARGUMENT, "raw_input_contents", "bytes")
    extra = raw_request(msgs, "ppocrv4_rec", [("x", x, "FP32")])
    extra.raw_input_contents.append(b"\0" * 4)
    expect(extra, grpc.StatusCode.INVALID_ARGUMENT, "2 entries", "1 inputs")
    # Typed contents in the wrong field, too few, or both raw and typed.
    wrong = msgs.ModelInferRequest(model_name="ppocrv4_rec")
    wrong.inputs.add(name="x", datatype="FP32", shape=list(x.shape)).contents.int64_contents.extend([1] * x.size)
    expect(wrong, grpc.StatusCode.INVALID_ARGUMENT, "int64_contents", "fp32_contents")
    few = msgs.ModelInferRequest(model_name="ppocrv4_rec")
    few.inputs.add(name="x", datatype="FP32", shape=list(x.shape)).contents.fp32_contents.extend([0.5] * 10)
    expect(few, grpc.StatusCode.INVALID_ARGUMENT, "fp32_contents has 10 elements")
    both = raw_request(msgs, "ppocrv4_rec", [("x", x, "FP32")])
    both.inputs[0].contents.fp32_contents.append(1.0)
    expect(both, grpc.StatusCode.INVALID_ARGUMENT, "one or the other")
    neg = raw_request(msgs, "ppocrv4_rec", [("x", x, "FP32")])
    neg.inputs[0].shape[3] = -5
    expect(neg, grpc.StatusCode.INVALID_ARGUMENT)
    expect(raw_request(msgs, "ppocrv4_rec", [("x", x, "FP32")], outputs=["nope"]), grpc.StatusCode.INVALID_ARGUMENT,
           "unknown output 'nope'")
    # A message over --max-body is refused by gRPC itself.
    big = np.zeros((1, 3, 48, (MAX_BODY // (3 * 48 * 4)) + 64), dtype=np.float32)
    got, detail = call_error(stub.ModelInfer, raw_request(msgs, "ppocrv4_rec", [("x", big, "FP32")]))
    assert got == grpc.StatusCode.RESOURCE_EXHAUSTED, (got, detail)
    # The server is unharmed: the next request is answered, and right.
    resp = stub.ModelInfer(raw_request(msgs, "ppocrv4_rec", [("x", x, "FP32")]), timeout=TIMEOUT)
    assert close(outputs_of(resp)["softmax_11.tmp_0"], npy("ppocrv4_rec", "outputs", "softmax_11.tmp_0"), 1e-4)
    assert len(set(bad)) == len(bad)  # each names its own problem


def test_repository_unload_and_load(stub, pb):
    msgs, _ = pb
    stub.RepositoryModelUnload(msgs.RepositoryModelUnloadRequest(model_name="ppocrv4_det"), timeout=TIMEOUT)
    code, detail = call_error(stub.ModelReady, msgs.ModelReadyRequest(name="ppocrv4_det"))
    assert code == grpc.StatusCode.NOT_FOUND and "unloaded" in detail
    code, _ = call_error(stub.RepositoryModelUnload, msgs.RepositoryModelUnloadRequest(model_name="ppocrv4_det"))
    assert code == grpc.StatusCode.NOT_FOUND
    stub.RepositoryModelLoad(msgs.RepositoryModelLoadRequest(model_name="ppocrv4_det"), timeout=TIMEOUT)
    assert stub.ModelReady(msgs.ModelReadyRequest(name="ppocrv4_det"), timeout=TIMEOUT).ready
    code, detail = call_error(stub.RepositoryModelLoad, msgs.RepositoryModelLoadRequest(model_name="../etc"))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "not a valid model name" in detail
    code, detail = call_error(stub.RepositoryModelLoad, msgs.RepositoryModelLoadRequest(model_name="absent"))
    assert code == grpc.StatusCode.NOT_FOUND
    req = msgs.RepositoryModelLoadRequest(model_name="ppocrv4_det")
    req.parameters["config"].string_param = "{}"
    code, detail = call_error(stub.RepositoryModelLoad, req)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "'config'" in detail


def test_concurrent_clients_get_their_own_answers(stub, pb):
    """Eight threads, rec and det interleaved on one channel: every answer is its own."""
    msgs, _ = pb
    xr, xd = npy("ppocrv4_rec", "inputs", "x"), npy("ppocrv4_det", "inputs", "x")
    rr, rd = npy("ppocrv4_rec", "outputs", "softmax_11.tmp_0"), npy("ppocrv4_det", "outputs", "sigmoid_0.tmp_0")
    errors = []

    def client(k):
        try:
            for i in range(3):
                if (k + i) % 2:
                    resp = stub.ModelInfer(raw_request(msgs, "ppocrv4_rec", [("x", xr, "FP32")], id=f"{k}.{i}"),
                                           timeout=TIMEOUT)
                    assert resp.id == f"{k}.{i}" and close(outputs_of(resp)["softmax_11.tmp_0"], rr, 1e-4)
                else:
                    resp = stub.ModelInfer(raw_request(msgs, "ppocrv4_det", [("x", xd, "FP32")], id=f"{k}.{i}"),
                                           timeout=TIMEOUT)
                    assert resp.id == f"{k}.{i}" and close(outputs_of(resp)["sigmoid_0.tmp_0"], rd, 1e-4)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[:3]


def test_sigterm_finishes_and_exits_zero(repo, pb):
    msgs, svc = pb
    s = Server(repo)
    channel = grpc.insecure_channel(s.target)
    stub = svc.GRPCInferenceServiceStub(channel)
    x = npy("ppocrv4_det", "inputs", "x")
    fut = stub.ModelInfer.future(raw_request(msgs, "ppocrv4_det", [("x", x, "FP32")]), timeout=TIMEOUT)
    time.sleep(0.005)
    rc, out, log = s.stop()
    assert rc == 0, log
    assert "stopped" in out
    # The request sent before SIGTERM was answered, or (if it had not reached the server yet)
    # refused cleanly — never left hanging.
    try:
        resp = fut.result(timeout=TIMEOUT)
        assert close(outputs_of(resp)["sigmoid_0.tmp_0"], npy("ppocrv4_det", "outputs", "sigmoid_0.tmp_0"), 1e-4)
    except grpc.RpcError as e:
        assert e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), e
    channel.close()


def test_a_port_in_use_is_an_error_not_shared(repo, server):
    """A second server asking for the first one's gRPC port, or for one port for both
    bindings, fails with one line naming the port (no SO_REUSEPORT sharing)."""
    port = server.target.rsplit(":", 1)[1]
    r = subprocess.run([BIN, "serve", "--model-repository", str(repo), "--http-port", "0", "--grpc-port", port],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    err = [l for l in r.stderr.splitlines() if "error" in l.lower() and "gRPC" in l]
    assert err and port in err[-1], r.stderr[-500:]
    # The same port for HTTP and gRPC.
    import socket
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        free = str(sk.getsockname()[1])
    r = subprocess.run([BIN, "serve", "--model-repository", str(repo), "--http-port", free, "--grpc-port", free],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and free in r.stderr, r.stderr[-500:]
