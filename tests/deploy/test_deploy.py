"""deploy/: the KServe ServingRuntime and InferenceService and the container build file are
well-formed, agree with each other, and name arguments and probe paths that the bulkhead
program really takes and serves (the runtime's own arguments are run, on 127.0.0.1)."""
import json
import os
import shutil
import signal
import subprocess

import pytest
import requests
import yaml

SRC = os.environ.get("BULKHEAD_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("BULKHEAD_BINARY", "")
SHARED = os.environ.get("BULKHEAD_SHARED", "")
DEPLOY = os.path.join(SRC, "deploy")


def load(name):
    with open(os.path.join(DEPLOY, "kserve", name)) as f:
        docs = list(yaml.safe_load_all(f))
    assert len(docs) == 1
    return docs[0]


def container(runtime):
    (c,) = runtime["spec"]["containers"]
    return c


def test_serving_runtime_is_a_v2_onnx_runtime():
    rt = load("servingruntime.yaml")
    assert rt["apiVersion"] == "serving.kserve.io/v1alpha1" and rt["kind"] == "ServingRuntime"
    assert {"name": "onnx", "version": "1", "autoSelect": True} in rt["spec"]["supportedModelFormats"]
    assert rt["spec"]["protocolVersions"] == ["v2"]
    c = container(rt)
    assert c["name"] == "kserve-container"
    args = c["args"]
    assert args[0] == "serve" and args[args.index("--model-repository") + 1] == "/mnt/models"
    port = int(args[args.index("--http-port") + 1])
    assert [p["containerPort"] for p in c["ports"]] == [port]
    assert c["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": port}
    assert c["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": port}
    assert rt["metadata"]["annotations"]["prometheus.kserve.io/path"] == "/metrics"


def test_inference_service_uses_the_runtime():
    rt = load("servingruntime.yaml")
    isvc = load("inferenceservice.yaml")
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1" and isvc["kind"] == "InferenceService"
    p = isvc["spec"]["predictor"]
    assert p["model"]["runtime"] == rt["metadata"]["name"]
    assert p["model"]["modelFormat"]["name"] == "onnx"
    assert p["model"]["protocolVersion"] == "v2"
    assert 1 <= p["minReplicas"] <= p["maxReplicas"]
    assert "://" in p["model"]["storageUri"]


def containerfile_instructions():
    with open(os.path.join(DEPLOY, "Containerfile")) as f:
        text = f.read().replace("\\\n", " ")
    lines = [l.strip() for l in text.splitlines()]
    return [l.split(None, 1) for l in lines if l and not l.startswith("#")]


def test_containerfile_is_well_formed_and_runs_the_same_server():
    known = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
             "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}
    ins = containerfile_instructions()
    for parts in ins:
        assert parts[0] in known and len(parts) == 2, parts
    froms = [p[1] for p in ins if p[0] == "FROM"]
    assert froms and all(f.split()[0] == "debian:12" for f in froms), froms
    assert any(p[0] == "RUN" and "scripts/install-deps.sh" in p[1] for p in ins)
    entry = json.loads(next(p[1] for p in ins if p[0] == "ENTRYPOINT"))
    cmd = json.loads(next(p[1] for p in ins if p[0] == "CMD"))
    assert entry == ["/usr/local/bin/bulkhead"]
    assert cmd == container(load("servingruntime.yaml"))["args"]
    exposed = " ".join(p[1] for p in ins if p[0] == "EXPOSE").split()
    assert cmd[cmd.index("--http-port") + 1] in exposed
    # Process-isolated models run in bulkhead-worker: the image carries it beside the program.
    assert any(p[0] == "COPY" and "bulkhead-worker" in p[1] and "/usr/local/bin/" in p[1] for p in ins)
    # Every file the build copies from the repository exists.
    assert os.path.exists(os.path.join(SRC, "scripts", "install-deps.sh"))


def test_the_runtime_arguments_serve_a_repository(tmp_path):
    if not BIN or not os.path.exists(BIN):
        pytest.fail("BULKHEAD_BINARY is not set to the bulkhead program")
    models = os.path.join(SHARED, "models")
    if not os.path.isdir(models):
        pytest.fail(f"the shared test data is missing: {models}")
    os.makedirs(tmp_path / "ppocrv4_rec" / "1")
    shutil.copyfile(os.path.join(models, "ppocrv4_rec", "model.onnx"), tmp_path / "ppocrv4_rec" / "1" / "model.onnx")
    args = list(container(load("servingruntime.yaml"))["args"])
    args[args.index("--model-repository") + 1] = str(tmp_path)
    args[args.index("--host") + 1] = "127.0.0.1"  # tests listen on loopback only
    args[args.index("--http-port") + 1] = "0"
    log = open(tmp_path / "serve.log", "w")
    p = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        line = p.stdout.readline()
        assert "listening on" in line, line
        url = line.split()[-1]
        for path in ("/v2/health/ready", "/v2/health/live", "/metrics", "/v2/models/ppocrv4_rec/ready"):
            assert requests.get(url + path, timeout=60).status_code == 200, path
    finally:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    assert p.returncode == 0
