"""bulkhead's own API: Env, sessions with every option, devices, copies, memory, check."""
import os
import time

import numpy as np
import pytest

import bulkhead
from conftest import REAL, inputs_of, model_path, reference


def test_several_envs_and_devices():
    a, b = bulkhead.Env(), bulkhead.Env()
    assert "cpu" in a.backends()
    names = [d["name"] for d in a.devices()]
    assert "cpu:0" in names and names == [d["name"] for d in b.devices()]
    assert a.open_device_count() == 0
    assert bulkhead.devices()[0]["name"] == "cpu:0"


def test_backend_plugins():
    plugin = os.environ.get("BULKHEAD_TEST_PLUGIN")
    assert plugin, "BULKHEAD_TEST_PLUGIN (tests/plugin/hostsim.c, built) is not set"
    env = bulkhead.Env()
    with pytest.raises(bulkhead.errors.NotFound, match="cannot be loaded"):
        env.load_backend("/nonexistent/libbulkhead_x.so")
    env.load_backend(plugin, "devices=2")
    assert "hostsim" in env.backends()
    origin = [o for o in env.backend_origins() if o["name"] == "hostsim"][0]
    assert origin["library"] == plugin and origin["abi_version"] == 1
    with pytest.raises(bulkhead.errors.InvalidArgument, match="already registered"):
        env.load_backend(plugin)
    env.unload_backend("hostsim")
    assert "hostsim" not in env.backends()


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_models(env, name):
    s = env.load(model_path(name), devices=["cpu"], threads=1, optimization_level=2, graph_capture=True)
    out = s.run(inputs_of(name))
    for n, v in out.items():
        assert float(np.max(np.abs(v - reference(name, n)))) <= REAL[name]
    assert sum(s.placement().values()) > 0
    mem = s.memory()
    assert mem and all(m["peak"] > 0 and m["trimmed"] == 0 for m in mem.values())
    assert s.worker_pid == -1
    assert s.runs() == {"limit": 0, "running": 0, "most_at_once": 1, "waited": 0, "timed_out": 0}


def test_process_isolation(env):
    s = env.load(model_path("silero_vad_v5"), isolation="process", worker_timeout_ms=30000, threads=1)
    assert s.worker_pid > 0 and s.worker_pid != os.getpid()
    out = s.run(inputs_of("silero_vad_v5"))
    np.testing.assert_allclose(out["output"], reference("silero_vad_v5", "output"), atol=1e-5)
    assert s.memory() == {}


def _copied_in_mib(profile):
    (entry,) = [e for e in profile if e["node"] == "inputs copied in"]
    assert entry["op_type"] == "(isolation)"
    value, unit = entry["shapes"].split()
    return float(value) / (1024 if unit == "KiB" else 1)


def test_process_pipeline_hands_off_without_a_copy(env):
    """silero as F -> G in two worker processes: G's state comes from F's run with
    outputs_for=G, its other inputs from allocate_input; nothing is copied into G's
    worker and the results equal one in-process session's."""
    p = model_path("silero_vad_v5")
    f = env.load(p, isolation="process", worker_timeout_ms=30000, threads=1)
    g = env.load(p, isolation="process", worker_timeout_ms=30000, threads=1)
    local = env.load(p, threads=1)
    feed = inputs_of("silero_vad_v5")
    f_in, g_in = {}, {}
    for name, a in feed.items():
        for s, d in ((f, f_in), (g, g_in)):
            d[name] = s.allocate_input(a.shape, str(a.dtype))
            assert d[name].shape == a.shape and d[name].dtype == a.dtype and d[name].flags.writeable
            d[name][...] = a
    prof = []
    mid = f.run(f_in, outputs_for=g, profile=prof)
    assert _copied_in_mib(prof) == 0 and any(e["op_type"] != "(isolation)" for e in prof)
    ref_mid = local.run(feed)
    prof = []
    out = g.run(dict(g_in, state=mid["stateN"]), profile=prof)
    assert _copied_in_mib(prof) == 0
    ref = local.run(dict(feed, state=ref_mid["stateN"]))
    for n in ("output", "stateN"):
        np.testing.assert_array_equal(mid[n], ref_mid[n])
        np.testing.assert_array_equal(out[n], ref[n])
    # Without outputs_for, or with plain arrays, the bytes are copied in.
    plain = f.run(f_in)
    prof = []
    assert np.array_equal(g.run(dict(g_in, state=plain["stateN"]), profile=prof)["stateN"], ref["stateN"])
    assert _copied_in_mib(prof) > 0
    prof = []
    g.run({k: np.array(v) for k, v in g_in.items()}, profile=prof)
    assert _copied_in_mib(prof) > 0
    # A slice of a lent output is read where it is, too.
    prof = []
    g.run(dict(g_in, state=mid["stateN"][:, :, :]), profile=prof)
    assert _copied_in_mib(prof) == 0
    # In-process: an ordinary array; profile lists the nodes.
    a = local.allocate_input([2, 3], "int64")
    assert a.shape == (2, 3) and a.dtype == np.int64
    prof = []
    local.run(feed, profile=prof)
    assert prof and all(e["ms"] >= 0 for e in prof)
    with pytest.raises(bulkhead.InvalidArgument, match="unknown element type 'floaty'"):
        f.allocate_input([1], "floaty")
    with pytest.raises(bulkhead.InvalidArgument, match="string"):
        f.allocate_input([1], "string")
    with pytest.raises(bulkhead.InvalidArgument):
        f.allocate_input([2, -3])
    with pytest.raises(bulkhead.ResourceExhausted):
        f.allocate_input([1 << 40])
    with pytest.raises(bulkhead.InvalidArgument, match="outputs_for must be a bulkhead.Session"):
        f.run(f_in, outputs_for="g")
    with pytest.raises(bulkhead.InvalidArgument, match="profile must be a list"):
        f.run(f_in, profile={})


def test_options(env):
    p = model_path("silero_vad_v5")
    s = env.load(p, "threads=1;graph_capture=0", max_tensor_bytes=1 << 30, max_loop_iterations=100, run_timeout_ms=60000)
    assert s.run(inputs_of("silero_vad_v5"), outputs=["stateN"]).keys() == {"stateN"}
    with pytest.raises(bulkhead.InvalidArgument, match="unknown session option 'thread'"):
        env.load(p, thread=1)
    with pytest.raises(ValueError, match="isolation"):
        env.load(p, isolation="threads")
    with pytest.raises(ValueError, match="threads"):
        env.load(p, threads=-2)
    with pytest.raises(ValueError, match="graph_capture must be True or False"):
        env.load(p, graph_capture=1)
    with pytest.raises(ValueError, match="devices must be"):
        env.load(p, devices=[])
    with pytest.raises(bulkhead.NotFound, match="nosuch"):
        env.load(p, devices=["nosuch"])
    with pytest.raises(ValueError, match="empty entry"):
        env.load(p, "devices=cpu,,cpu")
    s = env.load(p, threads=1, max_concurrent_runs=2)
    assert s.runs()["limit"] == 2
    with pytest.raises(ValueError, match="max_concurrent_runs"):
        env.load(p, max_concurrent_runs=-1)


def test_sessions_share_weights_unless_told_not_to():
    env = bulkhead.Env()
    p = model_path("ppocrv4_det")
    a = env.load(p, threads=1)
    one = env.shared_weights()
    assert one["tensors"] > 10 and one["bytes"] > 1 << 20 and one["tensor_hits"] == 0
    b = env.load(p, threads=1, share_weights=True)
    two = env.shared_weights()
    assert two["bytes"] == one["bytes"] and two["hit_bytes"] >= one["bytes"]
    x = {"x": np.random.default_rng(3).uniform(-1, 1, (1, 3, 64, 96)).astype(np.float32)}
    ya, yb = a.run(x), b.run(x)
    assert env.shared_weights()["packed_hits"] > 0
    c = env.load(p, threads=1, share_weights=False)
    assert env.shared_weights()["tensor_hits"] == two["tensor_hits"]
    for k in ya:
        np.testing.assert_array_equal(ya[k], yb[k])
        np.testing.assert_array_equal(ya[k], c.run(x)[k])
    with pytest.raises(ValueError, match="share_weights must be True or False"):
        env.load(p, share_weights=1)
    idle = env.load(p, threads=1, release_idle_memory=True)
    for _ in range(2):
        yi = idle.run(x)
        for k in ya:
            np.testing.assert_array_equal(ya[k], yi[k])
    assert sum(m["trimmed"] for m in idle.memory().values()) > 0
    # Given back once idle for a time: not just after a run, within a bounded wait after.
    later = env.load(p, threads=1, release_idle_after_ms=300)
    np.testing.assert_array_equal(later.run(x)[k], ya[k])
    assert sum(m["trimmed"] for m in later.memory().values()) == 0
    deadline = time.monotonic() + 20
    while sum(m["trimmed"] for m in later.memory().values()) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sum(m["trimmed"] for m in later.memory().values()) > 0
    np.testing.assert_array_equal(later.run(x)[k], ya[k])
    for bad in (-2, 1.5, True):
        with pytest.raises(ValueError, match="release_idle_after_ms"):
            env.load(p, release_idle_after_ms=bad)
    del idle, later
    del a, b
    assert env.shared_weights()["tensors"] == 0


def test_precision_bf16(monkeypatch):
    # BULKHEAD_CPU_BF16=force takes the bf16 path on CPUs without bf16 units too.
    if not any(d.get("bf16_units") for d in bulkhead.devices()):
        monkeypatch.setenv("BULKHEAD_CPU_BF16", "force")
    env = bulkhead.Env()
    p = model_path("ppocrv4_det")
    x = {"x": np.random.default_rng(5).uniform(-1, 1, (1, 3, 64, 96)).astype(np.float32)}
    f = env.load(p, threads=1)
    b = env.load(p, threads=1, precision="bf16")
    assert f.precision() == {"requested": "fp32", "effective": "fp32", "bf16_nodes": 0, "note": ""}
    pb = b.precision()
    assert pb["requested"] == "bf16" and pb["effective"] == "bf16" and pb["bf16_nodes"] >= 60, pb
    yf, yb = f.run(x), b.run(x)
    for k in yf:
        assert yb[k].dtype == np.float32
        assert not np.array_equal(yf[k], yb[k])
        assert np.abs(yf[k] - yb[k]).max() <= 0.05 * np.abs(yf[k]).max() + 1e-6
    s = bulkhead.InferenceSession(p, _ort_options("precision=bf16;threads=1"))
    np.testing.assert_array_equal(s.run(None, x)[0], yb[list(yb)[0]])
    with pytest.raises(ValueError, match="precision"):
        env.load(p, precision="fp16")
    with pytest.raises(ValueError, match="precision must be a str"):
        env.load(p, precision=16)
    with pytest.raises(ValueError, match="optimization_level 2"):
        env.load(p, precision="bf16", optimization_level=1)
    r = bulkhead.check(p, inputs=x, schedules=["front_only", "same_process"], precision="bf16", report=None)
    assert r.verdict == "clean" and r.precision == "bf16", r
    assert r.precision_costs and r.precision_costs[0]["cosine"] > 0.9, r.precision_costs
    with pytest.raises(ValueError, match="precision must be"):
        bulkhead.check(p, precision="half")


def _ort_options(text):
    so = bulkhead.SessionOptions()
    so.bulkhead_options = text
    so.intra_op_num_threads = 1
    return so


def test_limits_raise_and_leave_the_session_usable(env):
    s = env.load(model_path("ppocrv4_rec"), max_tensor_bytes=1024, threads=1)
    with pytest.raises(bulkhead.ResourceExhausted, match="max_tensor_bytes|limit") as e:
        s.run(inputs_of("ppocrv4_rec"))
    assert isinstance(e.value, MemoryError)
    with pytest.raises(bulkhead.DeadlineExceeded) as e:
        env.load(model_path("ppocrv4_det"), threads=1).run(inputs_of("ppocrv4_det"), timeout_ms=1)
    assert isinstance(e.value, TimeoutError)


def test_copies_between_host_and_devices(env):
    src = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    devices = ["cpu"] + [d["name"] for d in env.devices() if d["backend"] == "vulkan"][:1]
    for dev in devices:
        t = env.tensor(src, device=dev)
        assert t.shape == (2, 3, 4) and t.dtype == "float32"
        np.testing.assert_array_equal(t.numpy(), src)
        back = np.zeros_like(src)
        env.copy(t, back)
        np.testing.assert_array_equal(back, src)
        z = env.empty((2, 3, 4), "float32", dev)
        env.copy(t, z)
        np.testing.assert_array_equal(z.numpy(), src)
    with pytest.raises(ValueError, match="differ"):
        env.copy(src, np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match="writable"):
        ro = np.zeros_like(src)
        ro.flags.writeable = False
        env.copy(src, ro)
    with pytest.raises(bulkhead.NotFound):
        env.empty((2,), "float32", "nosuch:1")
    with pytest.raises(ValueError, match="element type"):
        env.empty((2,), "complex", "cpu")
    with pytest.raises(ValueError, match="dimensions"):
        env.empty((2, -1), "float32", "cpu")


def test_tensor_inputs(env):
    s = env.load(model_path("silero_vad_v5"), threads=1)
    feed = inputs_of("silero_vad_v5")
    feed_t = {k: env.tensor(v) for k, v in feed.items()}
    np.testing.assert_array_equal(s.run(feed)["output"], s.run(feed_t)["output"])


def test_check_clean_and_contaminated(tmp_path):
    feed = inputs_of("silero_vad_v5")
    r = bulkhead.check(model_path("silero_vad_v5"), inputs=feed, schedules=["same_process"], report=str(tmp_path / "rep"))
    assert r.verdict == "clean" and r.exit_code == 0 and r.clean and r.first_bad_step == ""
    assert os.path.isfile(str(tmp_path / "rep" / "report.json"))
    assert r.schedules[0]["name"] == "same_process" and r.schedules[0]["verdict"] == "clean"
    f, g = bulkhead.demo_pipeline()
    ok = bulkhead.check(f, pipeline=g, devices=["faulty:none"], schedules=["same_process"], report=None)
    assert ok.verdict == "clean", ok
    bad = bulkhead.check(f, pipeline=g, devices=["faulty:shared-scratch"], schedules=["same_process"], report=None)
    assert bad.verdict == "contaminated" and bad.exit_code == 2 and bad.first_bad_step and bad.report is None
    with pytest.raises(FileNotFoundError):
        bulkhead.check(str(tmp_path / "nope.onnx"))
    with pytest.raises(ValueError, match="threads"):
        bulkhead.check(model_path("silero_vad_v5"), threads=0)
    with pytest.raises(ValueError):
        bulkhead.check(model_path("silero_vad_v5"), schedules=["nosuch"], report=None)
