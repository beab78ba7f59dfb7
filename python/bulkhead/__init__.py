"""bulkhead: ONNX inference where models sharing a process never touch each other's data.

Two ways in:

* ONNX Runtime's call shapes, so that ``import bulkhead as ort`` runs common scripts::

      import bulkhead as ort
      sess = ort.InferenceSession("model.onnx", providers=["CPUExecutionProvider"])
      (probs,) = sess.run(None, {"x": x})

* bulkhead's own API, with every bulkhead option::

      env = bulkhead.Env()
      det = env.load("det.onnx", devices=["vulkan:0", "cpu"], isolation="process")
      out = det.run({"x": x})            # {"name": array}

Threads: Env and Session are safe to use from many Python threads at once; ``run``
releases the GIL for the whole of the run. Inputs that are C-contiguous, aligned numpy
arrays of the model's element type are read in place; outputs are numpy arrays over
bulkhead's own output buffers. Errors raise ``bulkhead.Error`` subclasses
(``bulkhead.errors``) carrying bulkhead's one-line message.
"""

import os as _os
import shutil as _shutil

from . import _bulkhead
from . import errors
from .errors import (DeadlineExceeded, Error, FailedPrecondition, InternalError, InvalidArgument, InvalidModel,
                     NotFound, ResourceExhausted, Unavailable, Unsupported)

_bulkhead._set_error_classes(errors.BY_CODE)

__version__ = _bulkhead.version()
Tensor = _bulkhead.Tensor

__all__ = [
    "Env", "Session", "Tensor", "check", "devices", "demo_pipeline", "InferenceSession", "SessionOptions", "RunOptions",
    "GraphOptimizationLevel", "ExecutionMode", "NodeArg", "get_available_providers", "get_device", "Error",
    "InvalidArgument", "NotFound", "Unsupported", "InvalidModel", "FailedPrecondition", "ResourceExhausted",
    "InternalError", "Unavailable", "DeadlineExceeded", "errors", "__version__",
]


def _worker_binary():
    """The bulkhead program that process isolation starts as a worker."""
    env = _os.environ.get("BULKHEAD_WORKER")
    if env:
        return env
    try:
        from . import _build_info
        if _os.access(_build_info.WORKER, _os.X_OK):
            return _build_info.WORKER
    except ImportError:
        pass
    return _shutil.which("bulkhead") or ""


_OPTION_NAMES = ("devices", "threads", "optimization_level", "graph_capture", "submit_policy", "isolation",
                 "worker_timeout_ms", "worker_binary", "max_file_bytes", "max_tensor_bytes", "max_loop_iterations",
                 "run_timeout_ms", "max_concurrent_runs", "share_weights", "release_idle_memory", "release_idle_after_ms",
                 "one_thread_when_small", "precision")


def _config(options=None, **kwargs):
    """A SessionConfig from an option string ("devices=cpu;threads=2") and keywords."""
    c = _bulkhead.SessionConfig()
    if options is not None:
        if not isinstance(options, str):
            raise InvalidArgument("options must be an option string such as 'devices=cpu;threads=2', got %r" % (options,))
        c.apply(options)
    for k, v in kwargs.items():
        if k not in _OPTION_NAMES:
            raise InvalidArgument("unknown session option '%s' (known: %s)" % (k, ", ".join(_OPTION_NAMES)))
        if v is None:
            continue
        if k == "devices":
            if isinstance(v, str):
                v = v.split(",")
            v = list(v)
            if not v or not all(isinstance(d, str) and d for d in v):
                raise InvalidArgument("devices must be a non-empty list of device names such as ['vulkan:0', 'cpu'], got %r" % (v,))
        elif k in ("graph_capture", "share_weights", "release_idle_memory", "one_thread_when_small"):
            if not isinstance(v, bool):
                raise InvalidArgument("%s must be True or False, got %r" % (k, v))
        elif k in ("submit_policy", "isolation", "worker_binary", "precision"):
            if not isinstance(v, str):
                raise InvalidArgument("%s must be a str, got %r" % (k, v))
        else:
            if isinstance(v, bool) or not isinstance(v, int):
                raise InvalidArgument("%s must be an int, got %r" % (k, v))
        try:
            setattr(c, k, v)
        except TypeError:
            raise InvalidArgument("bad value %r for session option '%s'" % (v, k)) from None
    if c.isolation == "process" and not c.worker_binary:
        c.worker_binary = _worker_binary()
    c.validate()
    return c


class Session:
    """A loaded model (bulkhead's own API). Thread-safe; ``run`` releases the GIL."""

    __slots__ = ("_s", "_names", "path")

    def __init__(self, native, path):
        self._s = native
        self._names = [o["name"] for o in native.outputs]
        self.path = path

    @property
    def inputs(self):
        """The required inputs: dicts with name, dtype, shape (ints, str for symbolic
        dimensions, None where unknown; None when the rank is unknown), kind and type."""
        return self._s.inputs

    @property
    def outputs(self):
        return self._s.outputs

    def run(self, inputs, outputs=None, timeout_ms=-1, outputs_for=None, profile=None):
        """Runs the model on ``inputs`` ({name: array, list or bulkhead.Tensor}; None for
        an absent optional; a list of arrays for a sequence) and returns {name: value}
        for ``outputs`` (names; None = every output). ``timeout_ms``: -1 the session's
        limit, 0 none.

        ``outputs_for``: the Session these outputs are passed to next. When both run in
        worker processes (isolation="process"), the outputs are written into shared
        memory that session's worker maps read-only, so its run copies nothing for them;
        otherwise ignored. Every output of this run becomes readable by that worker: name
        it only when it may see them. The trade (bulkhead.hpp, RunOptions::outputs_for):
        this session's worker keeps that memory writable, so a fault in it while the next
        session runs could change the next session's inputs; without ``outputs_for`` they
        are copied before its run starts.

        ``profile``: a list to which each node's time is appended as
        {node, op_type, ms, shapes}; a session in a worker process adds "(isolation)"
        entries for the hand-off ("inputs copied in", with the MiB copied)."""
        if outputs_for is not None and not isinstance(outputs_for, Session):
            raise InvalidArgument("outputs_for must be a bulkhead.Session, got %s" % type(outputs_for).__name__)
        values = self._s.run(inputs, outputs, timeout_ms, None if outputs_for is None else outputs_for._s, profile)
        return dict(zip(self._names if outputs is None else outputs, values))

    def allocate_input(self, shape, dtype="float32"):
        """A new numpy array (uninitialised) to fill and pass to ``run`` as one of this
        session's inputs. For a session in a worker process its memory is shared memory
        that the worker maps read-only and reads where it is, so a run copies nothing for
        it (any other array is copied into the worker on every run); the worker can read
        it for as long as the array lives, so put in it only what this session may see.
        For an in-process session, an ordinary array."""
        return self._s.allocate_input(list(shape), dtype)

    def placement(self):
        """{device: nodes placed on it}."""
        return self._s.placement()

    def memory(self):
        """{device: {in_use, peak, cached, arena, arena_blocks, trimmed}} in bytes (empty
        for a session in a worker process)."""
        return self._s.memory()

    def precision(self):
        """{requested, effective, bf16_nodes, note}: the arithmetic this session runs (the
        precision option: "fp32" or "bf16"; note says why effective differs)."""
        return self._s.precision()

    def runs(self):
        """{limit, running, most_at_once, waited, timed_out}: this session's runs as they
        overlap (limit = the max_concurrent_runs option, 0 = none)."""
        return self._s.runs()

    @property
    def worker_pid(self):
        """The worker's pid for isolation="process", else -1."""
        return self._s.worker_pid

    def __repr__(self):
        return "<bulkhead.Session %s>" % (self.path,)


class Env:
    """Backends, the devices opened from them, and the copy router. Several may exist in
    one process; they share nothing. Thread-safe."""

    __slots__ = ("_e",)

    def __init__(self):
        self._e = _bulkhead.Env()

    def load(self, model, options=None, **kwargs):
        """Loads ``model`` (a path, or the serialized bytes) into a Session.

        Keywords: devices (["vulkan:0", "cpu"]), threads, optimization_level (0-2),
        graph_capture, submit_policy ("single", "per-dispatch", "split", "auto[:N]"),
        isolation ("in-process" or "process"), worker_timeout_ms, worker_binary,
        max_file_bytes, max_tensor_bytes, max_loop_iterations, run_timeout_ms,
        max_concurrent_runs, share_weights (True: share weights with the Env's other
        sessions of the same model, the default), release_idle_after_ms (a session idle
        this long gives its run memory back: 5000 by default, 0 as soon as no run is open,
        -1 never), release_idle_memory (True: as release_idle_after_ms=0), one_thread_when_small (True, the
        default: a CPU session whose every node is small runs on one thread), precision ("fp32" or "bf16": CPU
        convolutions and products on bfloat16, fast on AMX / AVX512-BF16; see
        check(..., precision="bf16") for what it costs); or an option string in
        ``options``."""
        c = _config(options, **kwargs)
        if isinstance(model, (bytes, bytearray, memoryview)):
            return Session(self._e.load_bytes(bytes(model), "<bytes>", c), "<bytes>")
        if isinstance(model, _os.PathLike):
            model = _os.fspath(model)
        if not isinstance(model, str):
            raise InvalidArgument("model must be a path or bytes, got %s" % type(model).__name__)
        return Session(self._e.load(model, c), model)

    def backends(self):
        return self._e.backends()

    def load_backend(self, path, options=""):
        """Loads a backend plugin library (``libbulkhead_opencl.so``; a path) into this
        Env and registers its backend. ``options`` is the plugin's own option text."""
        self._e.load_backend(_os.fspath(path), options)

    def unload_backend(self, name):
        """Refuses new sessions on a plugin backend from now on; the library is closed
        once the last session, device and tensor from it is gone."""
        self._e.unload_backend(name)

    def backend_origins(self):
        """[{name, library, abi_version, registered_by, version}] of every backend."""
        return self._e.backend_origins()

    def devices(self):
        """[{name, backend, description, driver, submit_policy, bf16_units}] of every
        device the registered backends can open (bf16_units: what makes precision="bf16"
        fast there, "" where it runs fp32)."""
        return self._e.devices()

    def open_device_count(self):
        return self._e.open_device_count()

    def shared_weights(self):
        """What this Env's sessions share (the share_weights option), a snapshot:
        {tensors, bytes} held once for every session that has them, {packed} kernel
        weights likewise, and the hits that found them already held."""
        return self._e.shared_weights()

    def empty(self, shape, dtype="float32", device="cpu"):
        """A new zeroed bulkhead.Tensor on ``device``: the other end of ``copy``."""
        return self._e.empty(list(shape), dtype, device)

    def tensor(self, array, device="cpu"):
        """A bulkhead.Tensor on ``device`` holding a copy of ``array``."""
        import numpy as np
        a = np.asarray(array, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
        t = self._e.empty(list(a.shape), str(a.dtype), device)
        self._e.copy(a, t)
        return t

    def copy(self, src, dst):
        """A process-level copy, routed by the memory each end lives in. Either end may be
        a bulkhead.Tensor or a numpy array (writable and C-contiguous for ``dst``)."""
        self._e.copy(src, dst)


def demo_pipeline():
    """The model `bulkhead demo` checks, split in two: (F, G) as ONNX bytes, where F's
    outputs are G's inputs. For trying check(F, pipeline=G) and two-session pipelines."""
    return _bulkhead.demo_pipeline()


def devices():
    """The devices of a fresh environment (see Env.devices)."""
    return Env().devices()


class CheckResult:
    """What ``check`` found: ``verdict`` ("clean", "contaminated" or "error"),
    ``exit_code`` (0, 2, 1 as the CLI's), ``first_bad_step`` ("" when clean), ``report``
    (the report folder, or None), ``schedules`` (one dict per schedule) and ``device``."""

    def __init__(self, d, report):
        self.verdict = d["verdict"]
        self.exit_code = d["exit_code"]
        self.first_bad_step = d["first_bad_step"]
        self.schedules = d["schedules"]
        self.device = d["device"]
        self.precision = d["precision"]
        self.precision_costs = d["precision_costs"]
        self.report = report

    @property
    def clean(self):
        return self.verdict == "clean"

    def __repr__(self):
        return "<bulkhead.CheckResult %s%s>" % (self.verdict, ": " + self.first_bad_step if self.first_bad_step else "")


def check(model, pipeline=None, devices=("cpu",), threads=1, inputs=None, dims=None, seed=1, schedules=None,
          iterations=4, rtol=0.0, report="check-report", worker_timeout_ms=120000, precision="fp32"):
    """Runs the isolation checker (``bulkhead check``) and returns a CheckResult.

    ``model`` runs as two sessions F and G; with ``pipeline`` (a second model), ``model``
    is F and ``pipeline`` is G. ``inputs`` gives F's inputs ({name: array}); the rest are
    generated (``dims`` sets symbolic dimensions). ``report``: the folder for
    report.html, report.json and the repro bundle, or None for no report. A
    contamination is a verdict, not an exception; bad arguments raise. ``precision``
    ("fp32" or "bf16"): the arithmetic of the sessions under test; the result's
    ``precision_costs`` then lists each output's cosine, max error and PSNR against the
    float32 CPU reference."""
    if isinstance(devices, str):
        devices = devices.split(",")
    devices = list(devices)
    if not devices or not all(isinstance(d, str) and d for d in devices):
        raise InvalidArgument("devices must be a non-empty list of device names, got %r" % (devices,))
    if isinstance(schedules, str):
        schedules = schedules.split(",")
    if not isinstance(threads, int) or not 1 <= threads <= 1024:
        raise InvalidArgument("threads must be 1..1024, got %r" % (threads,))
    if not isinstance(iterations, int) or iterations < 1:
        raise InvalidArgument("iterations must be >= 1, got %r" % (iterations,))
    if rtol < 0:
        raise InvalidArgument("rtol must be >= 0, got %r" % (rtol,))
    if precision not in ("fp32", "bf16"):
        raise InvalidArgument("precision must be 'fp32' or 'bf16', got %r" % (precision,))
    for m in (model, pipeline):
        if m is not None and not isinstance(m, (str, bytes, _os.PathLike)):
            raise InvalidArgument("models are paths or bytes, got %s" % type(m).__name__)
    model = _os.fspath(model) if isinstance(model, _os.PathLike) else model
    pipeline = _os.fspath(pipeline) if isinstance(pipeline, _os.PathLike) else pipeline
    for m in (model, pipeline):
        if isinstance(m, str) and not _os.path.isfile(m):
            raise NotFound("model '%s' is not a file" % m)
    d = _bulkhead._check(model, pipeline, devices, threads, dict(inputs or {}), dict(dims or {}), seed,
                         list(schedules or []), iterations, float(rtol), _worker_binary(), worker_timeout_ms,
                         report or "", precision)
    return CheckResult(d, report or None)


from ._ort import (ExecutionMode, GraphOptimizationLevel, InferenceSession, NodeArg, RunOptions,  # noqa: E402
                   SessionOptions, get_available_providers, get_device)
