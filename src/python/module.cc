// bulkhead._bulkhead: the Python extension over the C++ API (python/bulkhead/ wraps it).
//
// numpy in: a C-contiguous, aligned, native-endian array is lent to the run without a
// copy (the array is kept alive by the tensor that views it); anything else is converted
// once. numpy out: each output array views the run's own output buffer (no copy) and
// keeps it alive. run() releases the GIL for the whole of the run.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstring>
#include <optional>

#include "bulkhead/bulkhead.hpp"
#include "backend/backend.h"
#include "check/check.h"
#include "check/report.h"
#include "demo/demo_model.h"
#include "session/env_impl.h"

namespace py = pybind11;

namespace bulkhead::python {
namespace {

// ---- errors ------------------------------------------------------------------------------

// The exception class for each status code, set by bulkhead/errors.py at import.
constexpr int kCodes = static_cast<int>(StatusCode::kDeadlineExceeded) + 1;
std::array<PyObject*, kCodes> g_errors{};

[[noreturn]] void raise_status(const Status& s) {
  int code = static_cast<int>(s.code());
  PyObject* cls = code > 0 && code < kCodes && g_errors[code] ? g_errors[code] : PyExc_RuntimeError;
  PyErr_SetString(cls, s.message().c_str());
  throw py::error_already_set();
}

void ensure_ok(const Status& s) {
  if (!s.is_ok()) raise_status(s);
}

template <typename T>
T unwrap(Result<T> r) {
  if (!r.is_ok()) raise_status(r.status());
  return std::move(r).value();
}

void set_error_classes(const py::dict& classes) {
  for (auto [k, v] : classes) {
    int code = k.cast<int>();
    if (code <= 0 || code >= kCodes) throw py::value_error("no status code " + std::to_string(code));
    Py_XDECREF(g_errors[code]);
    g_errors[code] = v.ptr();
    Py_INCREF(g_errors[code]);
  }
}

// ---- element types -------------------------------------------------------------------------

py::dtype numpy_dtype(DataType t) {
  switch (t) {
    case DataType::kFloat32: return py::dtype("float32");
    case DataType::kFloat64: return py::dtype("float64");
    case DataType::kFloat16: return py::dtype("float16");
    case DataType::kInt8: return py::dtype("int8");
    case DataType::kInt16: return py::dtype("int16");
    case DataType::kInt32: return py::dtype("int32");
    case DataType::kInt64: return py::dtype("int64");
    case DataType::kUInt8: return py::dtype("uint8");
    case DataType::kUInt16: return py::dtype("uint16");
    case DataType::kUInt32: return py::dtype("uint32");
    case DataType::kUInt64: return py::dtype("uint64");
    case DataType::kBool: return py::dtype("bool");
    case DataType::kString: return py::dtype("O");
    default: raise_status(unsupported("element type " + dtype_name(t) + " has no numpy equivalent"));
  }
}

// The bulkhead type of a numpy dtype; kString for str/bytes/object arrays.
DataType from_numpy(const py::dtype& d) {
  const char kind = d.kind();
  const size_t size = d.itemsize();
  switch (kind) {
    case 'f':
      if (size == 2) return DataType::kFloat16;
      if (size == 4) return DataType::kFloat32;
      if (size == 8) return DataType::kFloat64;
      break;
    case 'i':
      if (size == 1) return DataType::kInt8;
      if (size == 2) return DataType::kInt16;
      if (size == 4) return DataType::kInt32;
      if (size == 8) return DataType::kInt64;
      break;
    case 'u':
      if (size == 1) return DataType::kUInt8;
      if (size == 2) return DataType::kUInt16;
      if (size == 4) return DataType::kUInt32;
      if (size == 8) return DataType::kUInt64;
      break;
    case 'b': return DataType::kBool;
    case 'U': case 'S': case 'O': return DataType::kString;
    default: break;
  }
  raise_status(unsupported("numpy dtype '" + py::str(py::handle(d)).cast<std::string>() + "' has no bulkhead element type"));
}

std::string type_string_ort(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "tensor(float)";
    case DataType::kFloat64: return "tensor(double)";
    case DataType::kFloat16: return "tensor(float16)";
    case DataType::kBFloat16: return "tensor(bfloat16)";
    case DataType::kBool: return "tensor(bool)";
    case DataType::kString: return "tensor(string)";
    case DataType::kUndefined: return "tensor(undefined)";
    default: return "tensor(" + dtype_name(t) + ")";
  }
}

// ---- numpy in ------------------------------------------------------------------------------

// A numpy array lent to bulkhead: the Buffer viewing it holds a reference to it, dropped
// (with the GIL) when the last tensor viewing it goes.
class NumpyMemory final : public Allocator {
 public:
  explicit NumpyMemory(py::object array) : array_(array.release().ptr()) {}
  const Domain& domain() const override { return domain_; }
  std::string name() const override { return "numpy array"; }
  Result<std::shared_ptr<Buffer>> allocate(size_t, size_t) override {
    return Status(StatusCode::kFailedPrecondition, "a lent numpy array cannot allocate");
  }
  void release(void*, void*, size_t) override {
    if (!Py_IsInitialized()) return;  // the interpreter is gone, and the array with it
    py::gil_scoped_acquire gil;
    Py_XDECREF(array_);
    array_ = nullptr;
  }

 private:
  Domain domain_ = Domain::host();
  PyObject* array_;
};

py::module_& numpy() {
  // Never destroyed: a static py::object would be released after the interpreter is gone.
  static py::module_* np = new py::module_(py::module_::import("numpy"));
  return *np;
}

// Python's objects in a numpy array of str / bytes / object → a string tensor (a copy).
Tensor strings_from(const py::array& a, const std::string& what) {
  Shape shape(a.shape(), a.shape() + a.ndim());
  Tensor t = unwrap(Tensor::allocate(*HostAllocator::create("python"), DataType::kString, shape));
  py::list flat = numpy().attr("ravel")(a).attr("tolist")();
  int64_t i = 0;
  for (py::handle item : flat) {
    if (PyUnicode_Check(item.ptr())) {
      Py_ssize_t n = 0;
      const char* s = PyUnicode_AsUTF8AndSize(item.ptr(), &n);
      if (!s) throw py::error_already_set();
      t.strings()[i].assign(s, static_cast<size_t>(n));
    } else if (PyBytes_Check(item.ptr())) {
      t.strings()[i] = std::string(PyBytes_AS_STRING(item.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(item.ptr())));
    } else {
      raise_status(invalid_argument(what + ": element " + std::to_string(i) + " is a " +
                                    py::str(py::type::of(item).attr("__name__")).cast<std::string>() +
                                    ", not a str (string tensors take str or bytes)"));
    }
    ++i;
  }
  return t;
}

constexpr const char* kTensorCapsule = "bulkhead.Tensor";

// When `a` (C-contiguous, aligned, of type `t`) views bytes of a bulkhead tensor -- a
// run's output or allocate_input()'s array, or a slice of one -- a tensor over that
// tensor's own buffer, so that what the buffer is (a region lent to a worker) is kept;
// nullopt for any other array.
std::optional<Tensor> bulkhead_view(const py::array& a, DataType t) {
  py::object base = a.base();
  while (base && py::isinstance<py::array>(base)) base = py::reinterpret_borrow<py::array>(base).base();  // views of views
  if (!base || !py::isinstance<py::capsule>(base)) return std::nullopt;
  auto cap = py::reinterpret_borrow<py::capsule>(base);
  if (!cap.name() || std::strcmp(cap.name(), kTensorCapsule) != 0) return std::nullopt;
  const Tensor& owner = *cap.get_pointer<Tensor>();
  const std::shared_ptr<Buffer>& buffer = owner.buffer();
  if (!buffer || !buffer->data()) return std::nullopt;
  const auto* start = static_cast<const char*>(buffer->data());
  const auto* data = static_cast<const char*>(a.data());
  const auto nbytes = static_cast<size_t>(a.nbytes());
  if (data < start || static_cast<size_t>(data - start) > buffer->size() || nbytes > buffer->size() - static_cast<size_t>(data - start))
    return std::nullopt;
  return Tensor(t, Shape(a.shape(), a.shape() + a.ndim()), buffer, static_cast<size_t>(data - start));
}

// A tensor viewing (or, when it must, converted from) a Python object.
Tensor tensor_from(py::handle obj, DataType declared, const std::string& what) {
  py::array a;
  if (py::isinstance<py::array>(obj)) {
    a = py::reinterpret_borrow<py::array>(obj);
  } else {
    // Lists and scalars take the declared type, as ONNX Runtime's feeds do.
    py::object dt = py::none();
    if (declared != DataType::kUndefined && declared != DataType::kString && declared != DataType::kBFloat16)
      dt = numpy_dtype(declared);
    try {
      a = numpy().attr("asarray")(obj, dt);
    } catch (py::error_already_set& e) {
      raise_status(invalid_argument(what + ": cannot be made an array: " + std::string(e.what())));
    }
  }
  DataType t = from_numpy(a.dtype());
  if (t == DataType::kString) return strings_from(a, what);
  const int flags = a.flags();
  const bool native = a.dtype().attr("isnative").cast<bool>();
  const bool in_place = (flags & py::array::c_style) && (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) && native;
  if (in_place) {
    if (auto own = bulkhead_view(a, t)) return std::move(*own);
  }
  if (!in_place) {
    // The one copy (np.array keeps a 0-d array 0-d, where ascontiguousarray would not).
    a = numpy().attr("array")(a, py::arg("dtype") = a.dtype().attr("newbyteorder")("="), py::arg("order") = "C");
  }
  Shape shape(a.shape(), a.shape() + a.ndim());
  size_t nbytes = static_cast<size_t>(a.nbytes());
  void* data = const_cast<void*>(a.data());
  auto lent = std::make_shared<NumpyMemory>(a);  // holds a reference from here
  auto buffer = std::make_shared<Buffer>(lent, Domain::host(), data, nbytes);
  return Tensor(t, std::move(shape), std::move(buffer));
}

// ---- numpy out -----------------------------------------------------------------------------

// `t` is a host tensor: a run's output, or a copy made for Tensor.numpy().
py::object array_from(Tensor t) {
  if (t.dtype() == DataType::kString) {
    py::array out(py::dtype("O"), std::vector<py::ssize_t>(t.shape().begin(), t.shape().end()));
    auto** slots = static_cast<PyObject**>(out.mutable_data());
    for (int64_t i = 0; i < t.numel(); ++i) {
      const std::string& s = t.strings()[i];
      PyObject* u = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
      if (!u) throw py::error_already_set();
      Py_XDECREF(slots[i]);
      slots[i] = u;
    }
    return out;
  }
  if (t.dtype() == DataType::kBFloat16) {
    // numpy has no bfloat16: widen to float32 (exact).
    py::array_t<float> out(std::vector<py::ssize_t>(t.shape().begin(), t.shape().end()));
    const auto* src = t.data<uint16_t>();
    float* dst = out.mutable_data();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = bfloat16_to_float(src[i]);
    return out;
  }
  py::dtype dt = numpy_dtype(t.dtype());
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides(shape.size());
  py::ssize_t stride = static_cast<py::ssize_t>(dtype_size(t.dtype()));
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  if (t.numel() == 0 || !t.raw()) return py::array(dt, shape, strides);
  void* data = t.raw();
  auto* keep = new Tensor(std::move(t));
  py::capsule base(keep, kTensorCapsule, [](PyObject* c) { delete static_cast<Tensor*>(PyCapsule_GetPointer(c, kTensorCapsule)); });
  return py::array(dt, shape, strides, data, base);
}

py::object value_to_python(Value v) {
  if (v.is_none()) return py::none();
  if (v.is_sequence()) {
    py::list l;
    for (auto& t : v.sequence) l.append(array_from(std::move(t)));
    return l;
  }
  return array_from(std::move(v.tensor));
}

// ---- wrapped objects -------------------------------------------------------------------------

// bulkhead.Tensor: a tensor in bulkhead memory on any device (for process-level copies).
struct PyTensor {
  Tensor tensor;
  std::shared_ptr<Env> env;  // for reading device memory back
  std::string device() const { return tensor.domain().device_name(); }
};

Value value_from(py::handle obj, const IoInfo* io, const std::string& name) {
  if (obj.is_none()) return Value::none();
  if (py::isinstance<PyTensor>(obj)) return Value(obj.cast<PyTensor&>().tensor);
  const DataType declared = io ? io->dtype : DataType::kUndefined;
  const std::string what = "input '" + name + "'";
  if (io && !io->is_tensor && io->type_string.rfind("sequence<", 0) == 0) {
    if (!py::isinstance<py::list>(obj) && !py::isinstance<py::tuple>(obj))
      raise_status(invalid_argument(what + " is a sequence (" + io->type_string + "): pass a list of arrays"));
    std::vector<Tensor> items;
    int i = 0;
    for (py::handle item : obj) items.push_back(tensor_from(item, declared, what + " item " + std::to_string(i++)));
    return Value::make_sequence(std::move(items), declared);
  }
  return Value(tensor_from(obj, declared, what));
}

struct PySession {
  Session session;
  std::unordered_map<std::string, const IoInfo*> all_inputs;  // declared inputs by name

  // feed: {name: value}; outputs: names or None (every output); outputs_for: the session
  // the outputs go to next, or None; profile: a list to append {node, op_type, ms, shapes}
  // dicts to, or None. Returns values in order.
  py::list run(const py::dict& feed, const py::object& outputs, int64_t timeout_ms, const PySession* outputs_for,
               const py::object& profile) const {
    NamedValues in;
    in.reserve(feed.size());
    for (auto [k, v] : feed) {
      if (!py::isinstance<py::str>(k)) raise_status(invalid_argument("input names are str, got " + py::repr(k).cast<std::string>()));
      std::string name = k.cast<std::string>();
      auto it = all_inputs.find(name);
      in.emplace_back(name, value_from(v, it == all_inputs.end() ? nullptr : it->second, name));
    }
    if (!profile.is_none() && !py::isinstance<py::list>(profile))
      raise_status(invalid_argument("profile must be a list to fill, got " + py::repr(profile).cast<std::string>()));
    RunOptions ro;
    ro.timeout_ms = timeout_ms;
    if (outputs_for) ro.outputs_for = &outputs_for->session;
    std::vector<NodeProfile> nodes;
    if (!profile.is_none()) ro.profile = &nodes;
    if (!outputs.is_none()) {
      for (py::handle o : outputs) {
        if (!py::isinstance<py::str>(o)) raise_status(invalid_argument("output names are str, got " + py::repr(o).cast<std::string>()));
        ro.outputs.push_back(o.cast<std::string>());
      }
    }
    Result<NamedValues> got = Status(StatusCode::kInternal, "not run");
    {
      py::gil_scoped_release nogil;
      got = session.run_values(in, ro);
    }
    if (!got.is_ok()) raise_status(got.status());
    if (!profile.is_none()) {
      auto list = py::reinterpret_borrow<py::list>(profile);
      for (const auto& n : nodes) {
        py::dict d;
        d["node"] = n.node;
        d["op_type"] = n.op_type;
        d["ms"] = n.ms;
        d["shapes"] = n.shapes;
        list.append(d);
      }
    }
    py::list out;
    for (auto& [name, v] : *got) out.append(value_to_python(std::move(v)));  // host tensors
    return out;
  }
};

py::dict io_dict(const IoInfo& io) {
  py::dict d;
  d["name"] = io.name;
  d["dtype"] = dtype_name(io.dtype);
  py::object shape = py::none();
  if (io.has_shape) {
    py::list s;
    for (size_t i = 0; i < io.shape.size(); ++i) {
      if (io.shape[i] >= 0) s.append(io.shape[i]);
      else if (i < io.dim_names.size() && !io.dim_names[i].empty()) s.append(io.dim_names[i]);
      else s.append(py::none());
    }
    shape = s;
  }
  d["shape"] = shape;
  std::string kind = io.is_tensor ? "tensor" : io.type_string.rfind("optional<", 0) == 0 ? "optional" : "sequence";
  d["kind"] = kind;
  std::string ort = type_string_ort(io.dtype);
  if (kind == "sequence") ort = "seq(" + ort + ")";
  if (kind == "optional") ort = "optional(" + ort + ")";
  d["type"] = ort;
  d["type_string"] = io.type_string;
  return d;
}

std::shared_ptr<PySession> make_session(Result<Session> loaded) {
  auto s = std::make_shared<PySession>();
  s->session = unwrap(std::move(loaded));
  // Every bindable input, for converting lists to the declared type (required ones are
  // the public inputs; initializer-defaulted ones are bound by name too).
  for (const auto& io : s->session.inputs()) s->all_inputs.emplace(io.name, &io);
  return s;
}

check::ModelSource model_source(const py::object& m) {
  if (py::isinstance<py::bytes>(m)) return {"<bytes>", "", m.cast<std::string>()};
  std::string path = py::str(m).cast<std::string>();
  std::string name = path.substr(path.find_last_of('/') + 1);
  return {name, path, ""};
}

}  // namespace
}  // namespace bulkhead::python

using namespace bulkhead;          // NOLINT: the module definition names many of its types
using namespace bulkhead::python;  // NOLINT

PYBIND11_MODULE(_bulkhead, m) {
  m.doc() = "bulkhead's runtime (use the bulkhead package, not this module)";
  m.def("_set_error_classes", &set_error_classes);
  m.def("version", [] { return std::string(bulkhead::version()); });
  m.def("demo_pipeline", [] {
    return py::make_tuple(py::bytes(unwrap(demo::pipeline_front_bytes())), py::bytes(unwrap(demo::pipeline_back_bytes())));
  }, "The demo's split model: (F, G) as serialized ONNX bytes.");

  py::class_<SessionOptions>(m, "SessionConfig")
      .def(py::init<>())
      .def_readwrite("devices", &SessionOptions::devices)
      .def_readwrite("threads", &SessionOptions::threads)
      .def_readwrite("graph_capture", &SessionOptions::graph_capture)
      .def_readwrite("submit_policy", &SessionOptions::submit_policy)
      .def_readwrite("optimization_level", &SessionOptions::optimization_level)
      .def_readwrite("isolation", &SessionOptions::isolation)
      .def_readwrite("worker_timeout_ms", &SessionOptions::worker_timeout_ms)
      .def_readwrite("worker_binary", &SessionOptions::worker_binary)
      .def_readwrite("max_file_bytes", &SessionOptions::max_file_bytes)
      .def_readwrite("max_tensor_bytes", &SessionOptions::max_tensor_bytes)
      .def_readwrite("max_loop_iterations", &SessionOptions::max_loop_iterations)
      .def_readwrite("run_timeout_ms", &SessionOptions::run_timeout_ms)
      .def_readwrite("max_concurrent_runs", &SessionOptions::max_concurrent_runs)
      .def_readwrite("share_weights", &SessionOptions::share_weights)
      .def_readwrite("release_idle_memory", &SessionOptions::release_idle_memory)
      .def_readwrite("release_idle_after_ms", &SessionOptions::release_idle_after_ms)
      .def_readwrite("one_thread_when_small", &SessionOptions::one_thread_when_small)
      .def_readwrite("precision", &SessionOptions::precision)
      .def("apply", [](SessionOptions& o, const std::string& spec) { ensure_ok(o.apply(spec)); })
      .def("validate", [](const SessionOptions& o) { ensure_ok(o.validate()); });

  py::class_<PyTensor, std::shared_ptr<PyTensor>>(m, "Tensor")
      .def_property_readonly("shape", [](const PyTensor& t) { return py::tuple(py::cast(t.tensor.shape())); })
      .def_property_readonly("dtype", [](const PyTensor& t) { return dtype_name(t.tensor.dtype()); })
      .def_property_readonly("device", &PyTensor::device)
      .def_property_readonly("memory_kind", [](const PyTensor& t) { return std::string(memory_kind_name(t.tensor.domain().kind)); })
      .def_property_readonly("nbytes", [](const PyTensor& t) { return t.tensor.dtype() == DataType::kString ? 0 : t.tensor.nbytes(); })
      .def("numpy", [](const PyTensor& t) {
        // A copy: the array must not change when the tensor is written later.
        if (t.tensor.dtype() == DataType::kString) return array_from(t.tensor.clone_host());
        Tensor host = Tensor::host(t.tensor.dtype(), t.tensor.shape());
        ensure_ok(t.env->copy(t.tensor, host));
        return array_from(std::move(host));
      }, "A host copy of the tensor as a numpy array.")
      .def("__repr__", [](const PyTensor& t) { return "<bulkhead.Tensor " + t.tensor.describe() + " on " + t.device() + ">"; });

  py::class_<PySession, std::shared_ptr<PySession>>(m, "Session")
      .def("run", &PySession::run, py::arg("feed"), py::arg("outputs") = py::none(), py::arg("timeout_ms") = -1,
           py::arg("outputs_for") = nullptr, py::arg("profile") = py::none())
      .def("allocate_input", [](const PySession& s, const std::vector<int64_t>& shape, const std::string& dtype) {
        DataType t = dtype_from_name(dtype);
        if (t == DataType::kUndefined) raise_status(invalid_argument("allocate_input: unknown element type '" + dtype + "'"));
        if (t == DataType::kString || t == DataType::kBFloat16)
          raise_status(invalid_argument("allocate_input: numpy cannot view a " + dtype + " tensor in place; pass the array itself"));
        return array_from(unwrap(s.session.allocate_input(t, Shape(shape.begin(), shape.end()))));
      }, py::arg("shape"), py::arg("dtype") = "float32")
      .def_property_readonly("inputs", [](const PySession& s) {
        py::list l;
        for (const auto& io : s.session.inputs()) l.append(io_dict(io));
        return l;
      })
      .def_property_readonly("outputs", [](const PySession& s) {
        py::list l;
        for (const auto& io : s.session.outputs()) l.append(io_dict(io));
        return l;
      })
      .def("placement", [](const PySession& s) {
        py::dict d;
        for (auto& [dev, n] : s.session.placement()) d[py::str(dev)] = n;
        return d;
      })
      .def("memory", [](const PySession& s) {
        py::dict d;
        for (const auto& m : s.session.memory()) {
          py::dict e;
          e["in_use"] = m.stats.in_use;
          e["peak"] = m.stats.peak;
          e["cached"] = m.stats.cached;
          e["arena"] = m.stats.arena;
          e["arena_blocks"] = m.stats.arena_blocks;
          e["trimmed"] = m.stats.trimmed;
          d[py::str(m.device)] = e;
        }
        return d;
      })
      .def("precision", [](const PySession& s) {
        auto p = s.session.precision();
        py::dict d;
        d["requested"] = p.requested;
        d["effective"] = p.effective;
        d["bf16_nodes"] = p.bf16_nodes;
        d["note"] = p.note;
        return d;
      })
      .def("runs", [](const PySession& s) {
        auto r = s.session.runs();
        py::dict d;
        d["limit"] = r.limit;
        d["running"] = r.running;
        d["most_at_once"] = r.most_at_once;
        d["waited"] = r.waited;
        d["timed_out"] = r.timed_out;
        return d;
      })
      .def_property_readonly("worker_pid", [](const PySession& s) { return s.session.worker_pid(); })
      .def_property_readonly("options", [](const PySession& s) { return s.session.options(); });

  py::class_<Env, std::shared_ptr<Env>>(m, "Env")
      .def(py::init<>())
      .def("load", [](const std::shared_ptr<Env>& env, const std::string& path, const SessionOptions& o) {
        Result<Session> r = Status(StatusCode::kInternal, "not loaded");
        {
          py::gil_scoped_release nogil;
          r = env->load(path, o);
        }
        return make_session(std::move(r));
      })
      .def("load_bytes", [](const std::shared_ptr<Env>& env, const py::bytes& bytes, const std::string& name, const SessionOptions& o) {
        std::string data = bytes;
        Result<Session> r = Status(StatusCode::kInternal, "not loaded");
        {
          py::gil_scoped_release nogil;
          r = env->load_bytes(data, name, o);
        }
        return make_session(std::move(r));
      })
      .def("backends", &Env::backends)
      .def("load_backend", [](const Env& env, const std::string& path, const std::string& options) {
        Status st;
        {
          py::gil_scoped_release unlocked;  // a plugin's initialisation may take a while
          st = env.load_backend(path, options);
        }
        ensure_ok(st);
      }, py::arg("path"), py::arg("options") = "")
      .def("unload_backend", [](const Env& env, const std::string& name) { ensure_ok(env.unload_backend(name)); })
      .def("backend_origins", [](const Env& env) {
        py::list r;
        for (const auto& [name, o] : env.backend_origins()) {
          py::dict d;
          d["name"] = name;
          d["library"] = o.library;
          d["abi_version"] = o.abi_version;
          d["registered_by"] = o.registered_by;
          d["version"] = o.version;
          r.append(d);
        }
        return r;
      })
      .def("devices", [](const Env& env) {
        py::list l;
        for (const auto& d : env.devices()) {
          py::dict e;
          e["name"] = d.backend + ":" + std::to_string(d.ordinal);
          e["backend"] = d.backend;
          e["description"] = d.name;
          e["driver"] = d.driver;
          e["submit_policy"] = d.submit_policy;
          e["bf16_units"] = d.bf16_units;
          l.append(e);
        }
        return l;
      })
      .def("open_device_count", &Env::open_device_count)
      .def("shared_weights", [](const Env& env) {
        const Env::SharedWeights w = env.shared_weights();
        py::dict d;
        d["tensors"] = w.tensors;
        d["bytes"] = w.bytes;
        d["packed"] = w.packed;
        d["packed_bytes"] = w.packed_bytes;
        d["tensor_hits"] = w.tensor_hits;
        d["hit_bytes"] = w.hit_bytes;
        d["packed_hits"] = w.packed_hits;
        return d;
      })
      .def("empty", [](const std::shared_ptr<Env>& env, const std::vector<int64_t>& shape, const std::string& dtype,
                       const std::string& device) {
        DataType t = dtype_from_name(dtype);
        if (t == DataType::kUndefined) raise_status(invalid_argument("unknown element type '" + dtype + "'"));
        for (int64_t d : shape)
          if (d < 0) raise_status(invalid_argument("dimensions are >= 0, got " + shape_to_string(shape)));
        Tensor tensor = unwrap(env->impl()->allocate_zeroed(device, t, shape));
        return std::make_shared<PyTensor>(PyTensor{std::move(tensor), env});
      }, py::arg("shape"), py::arg("dtype") = "float32", py::arg("device") = "cpu")
      .def("copy", [](const std::shared_ptr<Env>& env, py::object src, py::object dst) {
        // Either end may be a bulkhead.Tensor or a numpy array (a writable one for dst).
        Tensor s = py::isinstance<PyTensor>(src) ? src.cast<PyTensor&>().tensor : tensor_from(src, DataType::kUndefined, "copy source");
        Tensor d;
        if (py::isinstance<PyTensor>(dst)) {
          d = dst.cast<PyTensor&>().tensor;
        } else {
          if (!py::isinstance<py::array>(dst)) raise_status(invalid_argument("copy: dst must be a bulkhead.Tensor or a numpy array"));
          py::array a = py::reinterpret_borrow<py::array>(dst);
          if (!a.writeable() || !(a.flags() & py::array::c_style))
            raise_status(invalid_argument("copy: a numpy dst must be writable and C-contiguous"));
          d = tensor_from(a, DataType::kUndefined, "copy destination");
          if (d.dtype() == DataType::kString) raise_status(invalid_argument("copy: string arrays are not a copy destination"));
        }
        if (s.dtype() != d.dtype() || s.shape() != d.shape())
          raise_status(invalid_argument("copy: from " + s.describe() + " to " + d.describe() + ": element types or shapes differ"));
        py::gil_scoped_release nogil;
        ensure_ok(env->copy(s, d));
      }, py::arg("src"), py::arg("dst"));

  m.def("_check", [](const py::object& model, const py::object& back, const std::vector<std::string>& devices, int threads,
                     const py::dict& inputs, const std::map<std::string, int64_t>& dims, uint64_t seed,
                     const std::vector<std::string>& schedules, int iterations, double rtol, const std::string& worker_binary,
                     int worker_timeout_ms, const std::string& report, const std::string& precision) {
    check::CheckOptions o;
    o.front = model_source(model);
    if (!back.is_none()) o.back = model_source(back);
    o.devices = devices;
    o.threads = threads;
    for (auto [k, v] : inputs) {
      std::string name = k.cast<std::string>();
      o.inputs.emplace(name, tensor_from(v, DataType::kUndefined, "input '" + name + "'").clone_host());
    }
    o.dims = dims;
    o.seed = seed;
    o.schedules = schedules;
    o.thread_iterations = iterations;
    o.rtol = rtol;
    o.worker_binary = worker_binary;
    o.worker_timeout_ms = worker_timeout_ms;
    o.precision = precision;
    Result<check::CheckReport> rep = Status(StatusCode::kInternal, "not run");
    Status written;
    {
      py::gil_scoped_release nogil;
      rep = check::run_check(o);
      if (rep.is_ok() && !report.empty()) written = check::write_report(*rep, report);
    }
    if (!rep.is_ok()) raise_status(rep.status());
    ensure_ok(written);
    py::dict d;
    d["verdict"] = rep->verdict();
    d["exit_code"] = rep->exit_code();
    d["first_bad_step"] = rep->first_bad_step();
    d["device"] = rep->device_description;
    py::list costs;
    for (const auto& c : rep->precision_costs()) {
      py::dict e;
      e["session"] = std::string(1, c.role);
      e["output"] = c.output;
      e["cosine"] = c.metrics.cosine;
      e["max_abs"] = c.metrics.max_abs;
      e["rmse"] = c.metrics.rmse;
      e["psnr_db"] = c.metrics.psnr;
      costs.append(e);
    }
    d["precision"] = rep->precision.effective;
    d["precision_costs"] = costs;
    py::list schedules_out;
    for (const auto& s : rep->schedules) {
      py::dict e;
      e["name"] = s.name;
      e["verdict"] = s.clean() ? "clean" : s.error.empty() ? "contaminated" : "error";
      const check::StepResult* b = s.first_bad();
      e["first_bad_step"] = b ? b->label + ": " + (b->findings.empty() ? std::string() : b->findings.front()) : s.error;
      e["steps"] = s.steps.size();
      schedules_out.append(e);
    }
    d["schedules"] = schedules_out;
    return d;
  });
}

