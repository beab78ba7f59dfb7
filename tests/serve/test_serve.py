"""`bulkhead serve` end to end, as a user's client calls it: Python `requests` and `curl`
against a server on 127.0.0.1 serving the real models from a repository folder.

Run by ctest (serve_http_test) with Debian's /usr/bin/python3; needs BULKHEAD_BINARY and
BULKHEAD_SHARED (the read-only test data) in the environment.
"""
import json
import os
import shutil
import signal
import struct
import subprocess
import time

import numpy as np
import pytest
import requests

BIN = os.environ.get("BULKHEAD_BINARY", "")
SHARED = os.environ.get("BULKHEAD_SHARED", "")
MODELS = os.path.join(SHARED, "models")
TIMEOUT = 60  # seconds, for every HTTP call


def need_data():
    if not BIN or not os.path.exists(BIN):
        pytest.fail("BULKHEAD_BINARY is not set to the bulkhead program")
    if not os.path.isdir(MODELS):
        pytest.fail(f"the shared test data is missing: {MODELS} (set BULKHEAD_SHARED)")


def npy(model, kind, name):
    return np.load(os.path.join(MODELS, model, kind, name + ".npy"))


class Server:
    def __init__(self, repo, *extra):
        # The server's log goes to a file: a pipe nobody reads would block it once full.
        self.log = open(os.path.join(str(repo), f".serve-{time.monotonic_ns()}.log"), "w+")
        self.proc = subprocess.Popen([BIN, "serve", "--model-repository", str(repo), "--http-port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()  # loads every model first, then prints the port
        if "listening on" not in line:
            self.proc.kill()
            self.proc.communicate(timeout=30)
            raise AssertionError(f"the server did not start: {line!r} {self.logged()}")
        self.url = line.strip().split()[-1]

    def get(self, path, **kw):
        return requests.get(self.url + path, timeout=TIMEOUT, **kw)

    def post(self, path, **kw):
        return requests.post(self.url + path, timeout=TIMEOUT, **kw)

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
    shutil.copyfile(os.path.join(MODELS, "silero_vad_v5", "model.onnx"), root / "broken" / "1" / "model.onnx")
    (root / "broken" / "config.json").write_text(json.dumps({"instance": 2}))
    os.makedirs(root / "garbage" / "1")
    (root / "garbage" / "1" / "model.onnx").write_bytes(b"\x08\x07not an onnx model" * 10)
    return root


@pytest.fixture(scope="module")
def server(repo):
    s = Server(repo)
    yield s
    s.stop()


def rec_request(binary=False):
    x = npy("ppocrv4_rec", "inputs", "x")
    return x, {"id": "r1", "inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                        "data": x.flatten().tolist()}]}


def check_rec(out):
    ref = npy("ppocrv4_rec", "outputs", "softmax_11.tmp_0")
    assert out.shape == ref.shape
    assert np.max(np.abs(out - ref)) <= 1e-4


def test_health_and_server_metadata(server):
    assert server.get("/v2/health/live").status_code == 200
    assert server.get("/v2/health/ready").status_code == 200
    meta = server.get("/v2").json()
    assert meta["name"] == "bulkhead"
    assert "binary_tensor_data" in meta["extensions"] and "model_repository" in meta["extensions"]


def test_repository_index_names_the_broken_models(server):
    index = {e["name"]: e for e in server.post("/v2/repository/index").json()}
    for m in ("ppocrv4_rec", "ppocrv4_det", "silero_vad_v5"):
        assert index[m]["state"] == "READY", index[m]
        assert index[m]["version"] == "1"
    assert index["broken"]["state"] == "UNAVAILABLE"
    assert "config.json" in index["broken"]["reason"] and "'instance'" in index["broken"]["reason"]
    assert index["garbage"]["state"] == "UNAVAILABLE"
    assert "model.onnx" in index["garbage"]["reason"]
    ready = {e["name"] for e in server.post("/v2/repository/index", json={"ready": True}).json()}
    assert ready == {"ppocrv4_rec", "ppocrv4_det", "silero_vad_v5"}


def test_model_metadata_and_readiness(server):
    meta = server.get("/v2/models/ppocrv4_det").json()
    assert meta["name"] == "ppocrv4_det" and meta["versions"] == ["1"] and meta["platform"] == "onnx"
    assert meta["inputs"][0]["name"] == "x" and meta["inputs"][0]["datatype"] == "FP32"
    assert len(meta["inputs"][0]["shape"]) == 4 and meta["inputs"][0]["shape"][1] == 3
    assert server.get("/v2/models/ppocrv4_det/versions/1").json() == meta
    assert server.get("/v2/models/ppocrv4_det/ready").status_code == 200
    assert server.get("/v2/models/ppocrv4_det/versions/1/ready").status_code == 200
    assert server.get("/v2/models/nope/ready").status_code == 404
    assert server.get("/v2/models/ppocrv4_det/versions/7").status_code == 404


def test_rec_json_matches_the_reference(server):
    x, req = rec_request()
    r = server.post("/v2/models/ppocrv4_rec/infer", json=req)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model_name"] == "ppocrv4_rec" and body["model_version"] == "1" and body["id"] == "r1"
    out = body["outputs"][0]
    assert out["datatype"] == "FP32"
    check_rec(np.array(out["data"], dtype=np.float32).reshape(out["shape"]))


def binary_request(inputs, outputs=None, binary_output=True):
    """The binary tensor extension: JSON header, then each input's raw bytes."""
    header = {"inputs": [], "parameters": {"binary_data_output": binary_output}}
    blobs = []
    for name, arr, dt in inputs:
        raw = np.ascontiguousarray(arr).tobytes()
        header["inputs"].append({"name": name, "shape": list(arr.shape), "datatype": dt,
                                 "parameters": {"binary_data_size": len(raw)}})
        blobs.append(raw)
    if outputs:
        header["outputs"] = outputs
    h = json.dumps(header).encode()
    return h + b"".join(blobs), {"Inference-Header-Content-Length": str(len(h)),
                                 "Content-Type": "application/octet-stream"}


def split_binary_response(r):
    n = int(r.headers["Inference-Header-Content-Length"])
    header = json.loads(r.content[:n])
    rest = r.content[n:]
    arrays = {}
    for o in header["outputs"]:
        size = o["parameters"]["binary_data_size"]
        assert o["datatype"] == "FP32"
        arrays[o["name"]] = np.frombuffer(rest[:size], dtype=np.float32).reshape(o["shape"])
        rest = rest[size:]
    assert rest == b""
    return header, arrays


def test_det_binary_matches_the_reference(server):
    x = npy("ppocrv4_det", "inputs", "x")
    body, headers = binary_request([("x", x, "FP32")])
    r = server.post("/v2/models/ppocrv4_det/infer", data=body, headers=headers)
    assert r.status_code == 200, r.text[:300]
    _, arrays = split_binary_response(r)
    ref = npy("ppocrv4_det", "outputs", "sigmoid_0.tmp_0")
    (out,) = arrays.values()
    assert out.shape == ref.shape and np.max(np.abs(out - ref)) <= 1e-4


def test_silero_in_a_worker_process_with_an_int64_scalar(server):
    inp, state, sr = (npy("silero_vad_v5", "inputs", n) for n in ("input", "state", "sr"))
    req = {"inputs": [
        {"name": "input", "shape": list(inp.shape), "datatype": "FP32", "data": inp.flatten().tolist()},
        {"name": "state", "shape": list(state.shape), "datatype": "FP32", "data": state.flatten().tolist()},
        {"name": "sr", "shape": list(sr.shape), "datatype": "INT64", "data": sr.flatten().tolist()}],
        "outputs": [{"name": "stateN"}, {"name": "output", "parameters": {"binary_data": False}}]}
    r = server.post("/v2/models/silero_vad_v5/infer", json=req)
    assert r.status_code == 200, r.text
    outs = r.json()["outputs"]
    assert [o["name"] for o in outs] == ["stateN", "output"]  # the order asked for
    for o in outs:
        ref = npy("silero_vad_v5", "outputs", o["name"])
        got = np.array(o["data"], dtype=np.float32).reshape(o["shape"])
        assert got.shape == ref.shape and np.max(np.abs(got - ref)) <= 1e-5


def test_curl_as_a_client(server, tmp_path):
    x, req = rec_request()
    f = tmp_path / "req.json"
    f.write_text(json.dumps(req))
    out = subprocess.run(["curl", "-sS", "--fail-with-body", "-H", "Content-Type: application/json",
                          "--data-binary", "@" + str(f), server.url + "/v2/models/ppocrv4_rec/infer"],
                         capture_output=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    o = json.loads(out.stdout)["outputs"][0]
    check_rec(np.array(o["data"], dtype=np.float32).reshape(o["shape"]))
    live = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", server.url + "/v2/health/live"],
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert live.stdout == "200"


def bad(server, path, expect, fragment, **kw):
    r = server.post(path, **kw)
    assert r.status_code == expect, (r.status_code, r.text[:300])
    msg = r.json()["error"]
    assert fragment in msg, msg
    assert "\n" not in msg
    return msg


def test_every_bad_request_gets_a_clear_error_and_the_server_is_unharmed(server):
    x, good = rec_request()
    url = "/v2/models/ppocrv4_rec/infer"
    bad(server, "/v2/models/nope/infer", 404, "unknown model 'nope'", json=good)
    bad(server, "/v2/models/ppocrv4_rec/versions/9/infer", 404, "version '9'", json=good)
    bad(server, "/v2/models/broken/infer", 404, "'instance'", json=good)
    wrong_type = json.loads(json.dumps(good))
    wrong_type["inputs"][0]["datatype"] = "FP64"
    bad(server, url, 400, "FP64", json=wrong_type)
    wrong_shape = json.loads(json.dumps(good))
    wrong_shape["inputs"][0]["shape"] = [1, 4, 48, 320]
    bad(server, url, 400, "'x'", json=wrong_shape)
    short = json.loads(json.dumps(good))
    short["inputs"][0]["data"] = short["inputs"][0]["data"][:-1]
    bad(server, url, 400, "'x'", json=short)
    missing = {"inputs": [{"name": "y", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
    bad(server, url, 400, "'y'", json=missing)
    bad(server, url, 400, "inputs", json={"id": "no inputs"})
    bad(server, url, 400, "JSON", data=b'{"inputs": [', headers={"Content-Type": "application/json"})
    unknown_out = json.loads(json.dumps(good))
    unknown_out["outputs"] = [{"name": "nope"}]
    bad(server, url, 400, "'nope'", json=unknown_out)
    # The binary header lies: about its own length, and about the inputs' sizes.
    body, headers = binary_request([("x", x, "FP32")])
    bad(server, url, 400, "Inference-Header-Content-Length",
        data=body, headers=dict(headers, **{"Inference-Header-Content-Length": "abc"}))
    bad(server, url, 400, "", data=body, headers=dict(headers, **{"Inference-Header-Content-Length": str(len(body) + 5)}))
    bad(server, url, 400, "", data=body[:-4], headers=headers)
    bad(server, url, 400, "", data=body + b"\0" * 8, headers=headers)
    # An endpoint that does not exist.
    r = server.get("/v2/nothing/here")
    assert r.status_code == 404 and "error" in r.json()
    # Unharmed: still live, ready and right.
    assert server.get("/v2/health/ready").status_code == 200
    r = server.post(url, json=good)
    assert r.status_code == 200
    o = r.json()["outputs"][0]
    check_rec(np.array(o["data"], dtype=np.float32).reshape(o["shape"]))


def test_an_oversized_body_is_refused(repo):
    s = Server(repo, "--max-body", "64K")
    try:
        x, req = rec_request()
        r = s.post("/v2/models/ppocrv4_rec/infer", json=req)
        assert r.status_code == 413
        assert "larger" in r.json()["error"]
        assert s.get("/v2/health/live").status_code == 200
    finally:
        code, out, err = s.stop()
    assert code == 0
    # The JSON part has a limit of its own; the same tensor in binary passes it.
    s = Server(repo, "--max-json", "16K")
    try:
        r = s.post("/v2/models/ppocrv4_rec/infer", json=req)
        assert r.status_code == 413 and "binary tensor extension" in r.json()["error"]
        body, headers = binary_request([("x", x, "FP32")])
        assert s.post("/v2/models/ppocrv4_rec/infer", data=body, headers=headers).status_code == 200
    finally:
        code, out, err = s.stop()
    assert code == 0


def test_unload_and_load(server):
    assert server.post("/v2/repository/models/ppocrv4_det/unload").status_code == 200
    assert server.get("/v2/models/ppocrv4_det/ready").status_code == 404
    x = npy("ppocrv4_det", "inputs", "x")
    body, headers = binary_request([("x", x, "FP32")])
    assert server.post("/v2/models/ppocrv4_det/infer", data=body, headers=headers).status_code == 404
    index = {e["name"]: e for e in server.post("/v2/repository/index").json()}
    assert index["ppocrv4_det"]["state"] == "UNAVAILABLE" and index["ppocrv4_det"]["reason"] == "unloaded"
    assert server.post("/v2/repository/models/ppocrv4_det/load").status_code == 200
    assert server.get("/v2/models/ppocrv4_det/ready").status_code == 200
    assert server.post("/v2/models/ppocrv4_det/infer", data=body, headers=headers).status_code == 200
    r = server.post("/v2/repository/models/..%2F..%2Fetc/load")
    assert r.status_code in (400, 404)
    r = server.post("/v2/repository/models/not_there/load")
    assert r.status_code == 404 and "not_there" in r.json()["error"]
    assert server.post("/v2/repository/models/not_there/unload").status_code == 404
    # A name that is no folder leaves no trace in the index.
    assert "not_there" not in {e["name"] for e in server.post("/v2/repository/index").json()}


def test_metrics(server):
    x, req = rec_request()
    assert server.post("/v2/models/ppocrv4_rec/infer", json=req).status_code == 200
    text = server.get("/metrics").text
    lines = [l for l in text.splitlines() if l.startswith('bulkhead_requests_total{model="ppocrv4_rec",version="1"}')]
    assert lines and int(float(lines[0].split()[-1])) >= 1
    assert 'bulkhead_request_duration_milliseconds_bucket{model="ppocrv4_rec",version="1",le="+Inf"}' in text


def test_sigterm_stops_gracefully(repo):
    s = Server(repo)
    x, req = rec_request()
    assert s.post("/v2/models/ppocrv4_rec/infer", json=req).status_code == 200
    code, out, err = s.stop()
    assert code == 0, err
    assert "stopped" in out
    assert "SIGTERM" in err


def worker_pids(server_pid):
    """The server's worker processes (`bulkhead worker`), from /proc."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if ppid == server_pid and b"worker" in cmd:
            pids.append(int(d))
    return pids


def test_a_killed_worker_fails_only_its_own_requests_and_comes_back(tmp_path):
    """silero in a worker process is killed three times while rec (in-process) serves a
    steady stream: rec answers every request, rightly; silero's failures are clear errors,
    its worker is replaced without a request asking, and it is ready and right again."""
    need_data()
    root = tmp_path / "repo"
    for m in ("ppocrv4_rec", "silero_vad_v5"):
        os.makedirs(root / m / "1")
        shutil.copyfile(os.path.join(MODELS, m, "model.onnx"), root / m / "1" / "model.onnx")
    (root / "ppocrv4_rec" / "config.json").write_text(json.dumps({"threads": 1}))
    (root / "silero_vad_v5" / "config.json").write_text(json.dumps({"threads": 1, "isolation": "process"}))
    s = Server(root)
    try:
        import threading
        x, rec_req = rec_request()
        inp, state, sr = (npy("silero_vad_v5", "inputs", n) for n in ("input", "state", "sr"))
        sil_req = {"inputs": [
            {"name": "input", "shape": list(inp.shape), "datatype": "FP32", "data": inp.flatten().tolist()},
            {"name": "state", "shape": list(state.shape), "datatype": "FP32", "data": state.flatten().tolist()},
            {"name": "sr", "shape": list(sr.shape), "datatype": "INT64", "data": sr.flatten().tolist()}]}
        ref_out = npy("silero_vad_v5", "outputs", "output")

        def silero_ok():
            r = s.post("/v2/models/silero_vad_v5/infer", json=sil_req)
            if r.status_code != 200:
                return r
            o = {o["name"]: o for o in r.json()["outputs"]}["output"]
            got = np.array(o["data"], dtype=np.float32).reshape(o["shape"])
            assert np.max(np.abs(got - ref_out)) <= 1e-5
            return r

        assert silero_ok().status_code == 200
        stop = threading.Event()
        rec_results = []

        def rec_stream():
            while not stop.is_set() and len(rec_results) < 2000:
                r = s.post("/v2/models/ppocrv4_rec/infer", json=rec_req)
                ok = r.status_code == 200
                if ok:
                    o = r.json()["outputs"][0]
                    out = np.array(o["data"], dtype=np.float32).reshape(o["shape"])
                    ref = npy("ppocrv4_rec", "outputs", "softmax_11.tmp_0")
                    ok = np.max(np.abs(out - ref)) <= 1e-4
                rec_results.append(ok)

        t = threading.Thread(target=rec_stream)
        t.start()
        failures = []
        try:
            for kill in range(3):
                pids = worker_pids(s.proc.pid)
                assert len(pids) == 1, pids
                os.kill(pids[0], signal.SIGKILL)
                # Requests right after the kill: each either right or a clear error.
                for _ in range(5):
                    r = silero_ok()
                    if r.status_code != 200:
                        failures.append(r)
                        assert r.status_code in (500, 503), r.status_code
                        assert "worker" in r.json()["error"], r.json()
                # The model comes back by itself: ready, a new worker, right answers.
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    if (s.get("/v2/models/silero_vad_v5/ready").status_code == 200
                            and worker_pids(s.proc.pid) not in ([], pids)):
                        break
                    time.sleep(0.05)
                else:
                    raise AssertionError("silero did not come back within 60 s")
                assert silero_ok().status_code == 200
        finally:
            stop.set()
            t.join(timeout=120)
        assert rec_results and all(rec_results), f"{rec_results.count(False)} of {len(rec_results)} rec requests failed"
        metrics = s.get("/metrics").text
        restarts = [l for l in metrics.splitlines()
                    if l.startswith('bulkhead_worker_restarts_total{model="silero_vad_v5"')]
        assert restarts and int(restarts[0].split()[-1]) >= 3, restarts
    finally:
        code, out, err = s.stop()
    assert code == 0, err


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def open_devices(s):
    for line in s.get("/metrics").text.splitlines():
        if line.startswith("bulkhead_open_devices "):
            return int(line.split()[1])
    raise AssertionError("no bulkhead_open_devices in /metrics")


def test_load_and_unload_a_hundred_times_under_traffic(tmp_path):
    """Silero is unloaded and loaded 120 times while rec serves: rec answers every request
    rightly, the server's resident memory stays flat, and the device closes with the last
    model."""
    need_data()
    import threading
    root = tmp_path / "repo"
    for m in ("ppocrv4_rec", "silero_vad_v5"):
        os.makedirs(root / m / "1")
        shutil.copyfile(os.path.join(MODELS, m, "model.onnx"), root / m / "1" / "model.onnx")
        (root / m / "config.json").write_text(json.dumps({"threads": 1}))
    s = Server(root)
    try:
        x, rec_req = rec_request()
        ref = npy("ppocrv4_rec", "outputs", "softmax_11.tmp_0")
        stop = threading.Event()
        results = []

        def rec_stream():
            while not stop.is_set() and len(results) < 5000:
                r = s.post("/v2/models/ppocrv4_rec/infer", json=rec_req)
                ok = r.status_code == 200
                if ok:
                    o = r.json()["outputs"][0]
                    ok = np.max(np.abs(np.array(o["data"], dtype=np.float32).reshape(o["shape"]) - ref)) <= 1e-4
                results.append(ok)

        t = threading.Thread(target=rec_stream)
        t.start()
        try:
            rss = []
            for cycle in range(120):  # 20 to warm up (caches), then the 100 measured
                assert s.post("/v2/repository/models/silero_vad_v5/unload").status_code == 200
                r = s.post("/v2/repository/models/silero_vad_v5/load")
                assert r.status_code == 200, r.text
                rss.append(rss_kib(s.proc.pid))
        finally:
            stop.set()
            t.join(timeout=120)
        assert results and all(results), f"{results.count(False)} of {len(results)} rec requests failed"
        # Medians of ten cycles each, after the warm-up and at the end: 100 cycles apart.
        early, late = sorted(rss[20:30])[5] / 1024, sorted(rss[110:120])[5] / 1024
        print(f"resident memory over cycles 20-29 and 110-119 (medians): {early:.0f} and {late:.0f} MiB")
        assert late - early <= 16, f"resident memory grew {late - early:.1f} MiB over 100 load/unload cycles"
        assert open_devices(s) >= 1
        for m in ("ppocrv4_rec", "silero_vad_v5"):
            assert s.post(f"/v2/repository/models/{m}/unload").status_code == 200
        assert open_devices(s) == 0  # the CPU device went with the last model
        assert s.get("/v2/health/live").status_code == 200
    finally:
        code, out, err = s.stop()
    assert code == 0, err


def conv_model(path):
    """A small Conv → Relu model (what the `faulty` devices' planted faults show on)."""
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    w = numpy_helper.from_array(np.random.RandomState(0).uniform(-1, 1, (8, 3, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                           helper.make_node("Relu", ["c"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(m, path)


def test_check_on_load_refuses_a_model_that_is_not_watertight(tmp_path):
    """--check-on-load: the real models (with sample inputs or check_dims) pass and are
    served; a model on a device that leaks between sessions (`faulty:global-slot`, field
    report B) is refused with the check's finding, and the others are not affected."""
    need_data()
    root = tmp_path / "repo"
    os.makedirs(root / "ppocrv4_rec" / "1")
    shutil.copyfile(os.path.join(MODELS, "ppocrv4_rec", "model.onnx"), root / "ppocrv4_rec" / "1" / "model.onnx")
    (root / "ppocrv4_rec" / "config.json").write_text(json.dumps(
        {"threads": 1, "check_dims": {"p2o.DynamicDimension.0": 1, "p2o.DynamicDimension.1": 64}}))
    os.makedirs(root / "silero" / "1")
    shutil.copyfile(os.path.join(MODELS, "silero_vad_v5", "model.onnx"), root / "silero" / "1" / "model.onnx")
    os.makedirs(root / "silero" / "check_inputs")
    for n in ("input", "state", "sr"):
        shutil.copyfile(os.path.join(MODELS, "silero_vad_v5", "inputs", n + ".npy"), root / "silero" / "check_inputs" / (n + ".npy"))
    conv_model(str(root / "conv" / "1" / "model.onnx"))
    conv_model(str(root / "leaky" / "1" / "model.onnx"))
    (root / "leaky" / "config.json").write_text(json.dumps({"devices": ["faulty:global-slot", "cpu"]}))
    s = Server(root, "--check-on-load")
    try:
        index = {e["name"]: e for e in s.post("/v2/repository/index").json()}
        for m in ("ppocrv4_rec", "silero", "conv"):
            assert index[m]["state"] == "READY", index[m]
        assert index["leaky"]["state"] == "UNAVAILABLE"
        assert "contaminated" in index["leaky"]["reason"] and "same_process/F2" in index["leaky"]["reason"]
        r = s.post("/v2/models/leaky/infer", json={"inputs": []})
        assert r.status_code == 404 and "contaminated" in r.json()["error"]
        x, req = rec_request()
        r = s.post("/v2/models/ppocrv4_rec/infer", json=req)
        assert r.status_code == 200
        o = r.json()["outputs"][0]
        check_rec(np.array(o["data"], dtype=np.float32).reshape(o["shape"]))
        assert s.get("/v2/health/ready").status_code == 200
    finally:
        code, out, err = s.stop()
    assert code == 0
    assert '"event":"check_passed","model":"silero"' in err


def test_dynamic_batching_answers_each_request_with_its_own_rows(tmp_path):
    """rec with max_batch_size: concurrent requests with different inputs run together, and
    each gets the answer the unbatched model gives for its own input; a model without a free
    first dimension (Silero's state is [2, N, 128]) is refused at load with the reason."""
    need_data()
    for name, src, config in (
            ("rec", "ppocrv4_rec", {"threads": 1}),
            ("rec_batched", "ppocrv4_rec", {"threads": 1, "max_batch_size": 8, "max_queue_delay_us": 200000}),
            ("silero_batched", "silero_vad_v5", {"threads": 1, "max_batch_size": 4})):
        os.makedirs(tmp_path / name / "1")
        shutil.copyfile(os.path.join(MODELS, src, "model.onnx"), tmp_path / name / "1" / "model.onnx")
        (tmp_path / name / "config.json").write_text(json.dumps(config))
    s = Server(tmp_path)
    try:
        index = {e["name"]: e for e in s.post("/v2/repository/index").json()}
        assert index["rec_batched"]["state"] == "READY"
        assert index["silero_batched"]["state"] == "UNAVAILABLE"
        assert "max_batch_size" in index["silero_batched"]["reason"] and "'state'" in index["silero_batched"]["reason"]
        x = npy("ppocrv4_rec", "inputs", "x")
        rng = np.random.RandomState(7)
        xs = [np.clip(x + rng.normal(0, 0.3, x.shape).astype(np.float32), -1, 1) for _ in range(7)]
        xs.append(np.concatenate([xs[0], xs[1]]))  # a request of two rows

        def infer(model, arr):
            body, headers = binary_request([("x", arr, "FP32")])
            r = s.post(f"/v2/models/{model}/infer", data=body, headers=headers)
            assert r.status_code == 200, r.text[:300]
            _, arrays = split_binary_response(r)
            return arrays["softmax_11.tmp_0"]

        alone = [infer("rec", a) for a in xs]
        got = [None] * len(xs)

        def client(i):
            got[i] = infer("rec_batched", xs[i])
        import threading
        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(xs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        for i, (a, b) in enumerate(zip(alone, got)):
            assert b is not None and a.shape == b.shape, i
            assert np.max(np.abs(a - b)) <= 1e-4, i
        assert np.max(np.abs(got[7][:1] - got[0])) <= 1e-4  # its first row is request 0's input
        text = s.get("/metrics").text
        runs = [l for l in text.splitlines() if l.startswith('bulkhead_batch_size_count{model="rec_batched"')]
        served = [l for l in text.splitlines() if l.startswith('bulkhead_batch_size_sum{model="rec_batched"')]
        assert int(served[0].split()[-1]) == len(xs)
        assert int(runs[0].split()[-1]) < len(xs)  # some ran together
        # More rows than max_batch_size: the client's error.
        body, headers = binary_request([("x", np.concatenate([x] * 9), "FP32")])
        r = s.post("/v2/models/rec_batched/infer", data=body, headers=headers)
        assert r.status_code == 400 and "max_batch_size 8" in r.json()["error"]
    finally:
        s.stop()


def test_an_http_port_in_use_is_an_error_not_shared(repo, server):
    """A second server on the first one's port fails with one line naming it (cpp-httplib's
    SO_REUSEPORT would have let both listen and split the connections)."""
    port = server.url.rsplit(":", 1)[1]
    r = subprocess.run([BIN, "serve", "--model-repository", str(repo), "--http-port", port],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and f":{port}" in r.stderr, r.stderr[-500:]
    assert server.get("/v2/health/live").status_code == 200
