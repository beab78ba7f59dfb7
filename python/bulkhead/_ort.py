"""ONNX Runtime's call shapes over bulkhead, so that ``import bulkhead as ort`` works.

Providers map to bulkhead devices: ``CPUExecutionProvider`` -> ``cpu``,
``VulkanExecutionProvider`` (bulkhead's own name; provider option ``device_id``) ->
``vulkan:N``. A bulkhead device name ("vulkan:0") is accepted as a provider too. An
unknown provider is an error, never a silent fallback to the CPU.
"""

import enum
import os

from . import _bulkhead
from .errors import InvalidArgument, Unsupported

_PROVIDERS = {
    "CPUExecutionProvider": "cpu",
    "VulkanExecutionProvider": "vulkan",
}
_DEVICE_TO_PROVIDER = {v: k for k, v in _PROVIDERS.items()}


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


# ONNX Runtime's levels -> bulkhead's optimization_level (0 off, 1 fold and fuse, 2 + layouts).
_LEVELS = {0: 0, 1: 1, 2: 2, 3: 2, 99: 2}


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """ONNX Runtime's SessionOptions. What bulkhead uses: ``intra_op_num_threads``
    (0 = one per core), ``graph_optimization_level``. Accepted with no effect, because
    bulkhead has no such knob: ``inter_op_num_threads`` and ``execution_mode`` (nodes run
    in order, each using the intra-op threads), ``log_severity_level`` and
    ``log_verbosity_level`` (bulkhead logs nothing; errors are exceptions),
    ``enable_cpu_mem_arena`` and ``enable_mem_pattern`` (bulkhead always plans a run's
    memory). bulkhead's own options, for ``InferenceSession`` users who want them:
    ``bulkhead_options`` (an option string, "isolation=process;graph_capture=0")."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_profiling = False
        self.optimized_model_filepath = ""
        self.bulkhead_options = ""
        self._entries = {}

    def add_session_config_entry(self, key, value):
        """Kept for scripts that set entries; bulkhead reads none of ONNX Runtime's keys."""
        self._entries[str(key)] = str(value)

    def get_session_config_entry(self, key):
        return self._entries[key]

    def __setattr__(self, name, value):
        if not name.startswith("_") and name not in self.__dict__ and hasattr(self, "_entries"):
            raise AttributeError("bulkhead's SessionOptions has no option '%s'" % name)
        object.__setattr__(self, name, value)


class RunOptions:
    """ONNX Runtime's RunOptions; ``timeout_ms`` (bulkhead's: this run's time limit,
    0 = none) is the one with an effect."""

    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.terminate = False
        self.timeout_ms = -1


class NodeArg:
    """A graph input or output: ``name``, ``type`` ("tensor(float)"), ``shape`` (ints,
    str for symbolic dimensions, None where unknown)."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, d):
        self.name = d["name"]
        self.type = d["type"]
        self.shape = d["shape"] if d["shape"] is not None else []

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


def get_available_providers():
    """The providers this machine can run, in bulkhead's order of preference."""
    names = set(d["backend"] for d in _bulkhead.Env().devices())
    return [p for p, dev in _PROVIDERS.items() if dev in names and p != "CPUExecutionProvider"] + ["CPUExecutionProvider"]


def get_device():
    return "CPU"


def _devices(providers, provider_options):
    """bulkhead's device list for ONNX Runtime's providers (names or (name, options))."""
    if providers is None:
        return ["cpu"], ["CPUExecutionProvider"]
    if isinstance(providers, str):
        providers = [providers]
    if provider_options is not None and len(provider_options) != len(providers):
        raise InvalidArgument("provider_options has %d entries for %d providers" % (len(provider_options), len(providers)))
    devices, names = [], []
    for i, p in enumerate(providers):
        opts = {}
        if isinstance(p, (tuple, list)) and len(p) == 2:
            p, opts = p
        if provider_options is not None:
            opts = dict(opts, **provider_options[i])
        if not isinstance(p, str):
            raise InvalidArgument("a provider is a name or a (name, options) pair, got %r" % (p,))
        if p in _PROVIDERS:
            dev = _PROVIDERS[p]
            unknown = set(opts) - {"device_id"}
            if unknown:
                raise InvalidArgument("unknown option(s) %s for %s (bulkhead takes device_id)" % (sorted(unknown), p))
            if dev != "cpu":
                dev += ":%d" % int(opts.get("device_id", 0))
            devices.append(dev)
            names.append(p)
        elif ":" in p or p in _DEVICE_TO_PROVIDER:
            devices.append(p)  # a bulkhead device name
            names.append(_DEVICE_TO_PROVIDER.get(p.split(":")[0], p))
        else:
            raise InvalidArgument("unknown provider '%s' (bulkhead runs %s, or a device name such as 'vulkan:0')" %
                                  (p, ", ".join(_PROVIDERS)))
    if not devices:
        raise InvalidArgument("providers is empty")
    return devices, names


class InferenceSession:
    """ONNX Runtime's InferenceSession over a bulkhead session."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        from . import Env, _config
        if kwargs:
            raise InvalidArgument("unexpected argument(s) %s" % ", ".join(sorted(kwargs)))
        so = sess_options if sess_options is not None else SessionOptions()
        if so.optimized_model_filepath:
            raise Unsupported("optimized_model_filepath: bulkhead does not write optimized models")
        if so.enable_profiling:
            raise Unsupported("enable_profiling: use bulkhead's `run --profile` for per-node times")
        level = int(so.graph_optimization_level)
        if level not in _LEVELS:
            raise InvalidArgument("unknown graph_optimization_level %r" % (so.graph_optimization_level,))
        threads = so.intra_op_num_threads
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
            raise InvalidArgument("intra_op_num_threads must be an int >= 0, got %r" % (threads,))
        devices, self._providers = _devices(providers, provider_options)
        self._env = Env()
        self._session = self._env.load(path_or_bytes, so.bulkhead_options or None, devices=devices, threads=threads,
                                       optimization_level=_LEVELS[level])
        self._native = self._session._s
        self._inputs = [NodeArg(d) for d in self._native.inputs]
        self._outputs = [NodeArg(d) for d in self._native.outputs]
        self._model_path = path_or_bytes if isinstance(path_or_bytes, (str, os.PathLike)) else None
        self._sess_options = so
        self._provider_options = [{} for _ in self._providers]

    def run(self, output_names, input_feed, run_options=None):
        """Returns a list of numpy arrays, one per name in ``output_names`` (None or [] =
        every output)."""
        timeout = run_options.timeout_ms if run_options is not None else -1
        return self._native.run(input_feed, output_names or None, timeout)

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []

    def get_providers(self):
        return list(self._providers)

    def get_provider_options(self):
        return {p: dict(o) for p, o in zip(self._providers, self._provider_options)}

    def get_session_options(self):
        return self._sess_options

    def set_providers(self, providers=None, provider_options=None):
        raise Unsupported("set_providers: create a new InferenceSession with the providers wanted")

    @property
    def bulkhead_session(self):
        """The bulkhead.Session underneath (placement, memory, worker_pid)."""
        return self._session
