#include "check/check.h"

#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <algorithm>
#include <mutex>
#include <thread>

#include "backend/backend.h"
#include "check/sha256.h"
#include "common/sizes.h"
#include "io/file.h"

namespace bulkhead::check {
namespace {

using Clock = std::chrono::steady_clock;

const std::vector<std::pair<std::string, std::string>>& schedule_table() {
  static const std::vector<std::pair<std::string, std::string>> t = {
      {"front_only", "F alone, four runs (inputs A, B, A, B)"},
      {"back_only", "G alone, four runs, fed the CPU reference of F's outputs"},
      {"same_process", "F1, then G created and idle while F2 runs, then G1, F3, G2 (the field report's sequence)"},
      {"order_after_g", "G created and run first; F created only afterwards: F1, G2, F2"},
      {"threads", "F and G run concurrently from four threads (two each), alternating inputs"},
      {"recover", "F and G run; F destroyed and re-created while G lives; G destroyed; F re-created again"},
      {"cross_process", "F and G each in a worker process (isolation=process), alternating hand-off"},
      {"pipeline", "F → G end to end on the device, compared with the CPU reference of the whole"},
  };
  return t;
}

// splitmix64: a deterministic generator, so the same seed gives the same inputs anywhere.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

void set_element(Tensor& t, int64_t i, double v) {
  void* p = t.raw();
  switch (t.dtype()) {
    case DataType::kFloat32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(p)[i] = v; break;
    case DataType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v)); break;
    case DataType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bfloat16(static_cast<float>(v)); break;
    case DataType::kUInt8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case DataType::kUInt16: static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v); break;
    case DataType::kInt16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); break;
    case DataType::kInt32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DataType::kUInt32: static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); break;
    case DataType::kUInt64: static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); break;
    case DataType::kBool: static_cast<uint8_t*>(p)[i] = v != 0; break;
    default: break;
  }
}

// The largest input the checker makes up: generated inputs are for checking, not for
// filling the machine.
constexpr size_t kMaxGeneratedBytes = size_t{2} << 30;

Result<Tensor> generate_input(const IoInfo& io, const std::map<std::string, int64_t>& dims, Rng& rng) {
  if (!io.is_tensor) return unsupported("input '" + io.name + "' is not a tensor; give it with --input");
  if (io.dtype == DataType::kString || io.dtype == DataType::kUndefined)
    return unsupported("cannot generate input '" + io.name + "' of type " + io.type_string + "; give it with --input");
  if (!io.has_shape) return unsupported("input '" + io.name + "' has no declared shape; give it with --input");
  Shape shape;
  for (size_t i = 0; i < io.shape.size(); ++i) {
    if (io.shape[i] >= 0) {
      shape.push_back(io.shape[i]);
      continue;
    }
    const std::string& p = io.dim_names[i];
    auto it = p.empty() ? dims.end() : dims.find(p);
    shape.push_back(it == dims.end() ? 1 : it->second);
  }
  // The sizes come from the user (--dim): checked, and bounded, before anything is allocated.
  auto nbytes = tensor_nbytes(io.dtype, shape);
  if (!nbytes.is_ok()) return nbytes.status().with_context("input '" + io.name + "': ");
  const size_t bytes = *nbytes;
  if (bytes > kMaxGeneratedBytes)
    return invalid_argument("input '" + io.name + "' would be " + dtype_name(io.dtype) + shape_to_string(shape) + ", " +
                            io::format_bytes(bytes) + ": more than the " + io::format_bytes(kMaxGeneratedBytes) +
                            " bulkhead generates for one input (choose smaller --dim values, or give it with --input)");
  auto host = HostAllocator::create("check inputs");
  BH_ASSIGN_OR_RETURN(Tensor t, Tensor::allocate(*host, io.dtype, shape));
  bool is_float = dtype_is_float(io.dtype);
  for (int64_t i = 0; i < t.numel(); ++i) set_element(t, i, is_float ? rng.uniform() : std::floor(rng.uniform() * 4));
  return t;
}

// Variant B of an input: floats shifted by deterministic noise of 10% of their range;
// other types unchanged (a checker cannot know which integers a model accepts).
Tensor perturb(const Tensor& a, uint64_t seed) {
  Tensor b = a.clone_host();
  if (!dtype_is_float(a.dtype()) || a.numel() == 0) return b;
  double lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double v = element_as_double(a, i);
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  double range = hi > lo ? hi - lo : 1.0;
  Rng rng{seed ^ 0x5bd1e995ULL};
  for (int64_t i = 0; i < b.numel(); ++i)
    set_element(b, i, element_as_double(a, i) + 0.1 * range * (rng.uniform() - 0.5));
  return b;
}

Result<Session> open(const Env& env, const ModelSource& m, const SessionOptions& o) {
  auto s = m.path.empty() ? env.load_bytes(m.bytes, m.name, o) : env.load(m.path, o);
  if (!s.is_ok()) return s.status().with_context("cannot create a session of '" + m.name + "' on " + [&] {
    std::string d;
    for (auto& x : o.devices) d += (d.empty() ? "" : ",") + x;
    return d;
  }() + ": ");
  return s;
}

NamedTensors clone_all(const NamedTensors& in) {
  NamedTensors r;
  for (auto& [n, t] : in) r.emplace_back(n, t.clone_host());
  return r;
}

// Maps F's outputs onto G's inputs: by name where the names agree, else by position.
Result<NamedTensors> feed_back(const std::vector<IoInfo>& g_inputs, const NamedTensors& f_outputs) {
  NamedTensors r;
  for (size_t i = 0; i < g_inputs.size(); ++i) {
    const IoInfo& gi = g_inputs[i];
    const Tensor* t = nullptr;
    for (auto& [n, x] : f_outputs)
      if (n == gi.name) t = &x;
    if (!t) {
      if (i >= f_outputs.size())
        return invalid_argument("G's input '" + gi.name + "' matches no output of F by name, and F has only " +
                                std::to_string(f_outputs.size()) + " outputs to match by position");
      t = &f_outputs[i].second;
    }
    r.emplace_back(gi.name, *t);
  }
  return r;
}

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string r;
  for (auto& x : v) r += (r.empty() ? "" : sep) + x;
  return r;
}

bool cpu_like(const std::string& device) {
  std::string b = device.substr(0, device.find(':'));
  return b == "cpu" || b == "faulty";
}

std::string fmt_num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

// Everything the schedules share: options, inputs, references, the step runner.
struct Checker {
  const CheckOptions& opt;
  CheckReport& rep;
  SessionOptions dev_opts;
  NamedTensors f_in[2], g_in[2];     // per variant
  NamedTensors f_ref[2], g_ref[2];   // CPU references per variant
  std::vector<IoInfo> g_inputs;

  const ModelSource& back() const { return opt.back ? *opt.back : opt.front; }
  int fvar(int k) const { return k % 2; }
  int gvar(int k) const { return rep.pipeline ? k % 2 : (k + 1) % 2; }

  StepResult run_step(const Session& s, char role, int variant, const std::string& label) {
    StepResult st;
    st.label = label;
    st.role = role;
    st.variant = variant;
    NamedTensors in = clone_all(role == 'F' ? f_in[variant] : g_in[variant]);
    std::vector<std::string> before;
    for (auto& [n, t] : in) before.push_back(tensor_hash(t));
    auto t0 = Clock::now();
    auto out = s.run(in);
    st.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    for (size_t i = 0; i < in.size(); ++i)
      if (tensor_hash(in[i].second) != before[i]) {
        st.inputs_unchanged = false;
        st.findings.push_back("the run wrote its input '" + in[i].first + "'");
      }
    if (!out.is_ok()) {
      st.error = out.status().message();
      st.findings.push_back("run failed: " + st.error);
      return st;
    }
    st.ran = true;
    st.raw = std::move(out).value();
    const NamedTensors& ref = role == 'F' ? f_ref[variant] : g_ref[variant];
    for (auto& [n, t] : st.raw) {
      OutputResult o;
      o.name = n;
      Tensor host = t;
      if (!t.raw() && t.dtype() != DataType::kString) {
        o.metrics.shape_mismatch = true;
        o.metrics.note = "output is not host-readable";
      } else {
        o.hash = tensor_hash(t);
        const Tensor* r = nullptr;
        for (auto& [rn, rt] : ref)
          if (rn == n) r = &rt;
        if (r) o.metrics = compare(t, *r);
        else o.metrics.note = "no reference output named '" + n + "'", o.metrics.shape_mismatch = true;
      }
      st.outputs.push_back(std::move(o));
    }
    return st;
  }

  // Re-hashes the outputs of every earlier step; a change is charged to `now`.
  void rehash(std::vector<StepResult>& steps, size_t upto, StepResult* now) {
    for (size_t i = 0; i < upto; ++i)
      for (size_t k = 0; k < steps[i].outputs.size(); ++k) {
        OutputResult& o = steps[i].outputs[k];
        if (o.hash.empty() || !o.rewritten_by.empty()) continue;
        if (tensor_hash(steps[i].raw[k].second) != o.hash) {
          StepResult& culprit = now ? *now : steps[i];
          o.rewritten_by = culprit.label;
          culprit.findings.push_back("output '" + o.name + "' of step " + steps[i].label + " changed after it was returned");
        }
      }
  }

  // A schedule of sequential steps: `body` calls step() for each run.
  ScheduleResult sequential(const std::string& name, const std::function<Status(std::function<void(const Session&, char, int, const std::string&)>)>& body) {
    ScheduleResult r;
    r.name = name;
    r.description = schedule_description(name);
    auto step = [&](const Session& s, char role, int v, const std::string& label) {
      r.steps.push_back(run_step(s, role, v, label));
      rehash(r.steps, r.steps.size() - 1, &r.steps.back());
    };
    Status st = body(step);
    if (!st.is_ok()) r.error = st.message();
    return r;
  }

  // A schedule that works on F and G sessions opened together in a fresh Env; earlier
  // outputs are re-hashed once at the end (its steps may run concurrently).
  ScheduleResult with_pair(const std::string& name,
                           const std::function<Status(ScheduleResult&, const Session&, const Session&)>& body) {
    ScheduleResult r;
    r.name = name;
    r.description = schedule_description(name);
    Env env;
    auto f = open(env, opt.front, dev_opts);
    auto g = open(env, back(), dev_opts);
    Status st = !f.is_ok() ? f.status() : !g.is_ok() ? g.status() : body(r, *f, *g);
    if (!st.is_ok()) r.error = st.message();
    rehash(r.steps, r.steps.size(), nullptr);
    return r;
  }

  ScheduleResult run_schedule(const std::string& name) {
    const SessionOptions& o = dev_opts;
    if (name == "front_only")
      return sequential(name, [&](auto step) -> Status {
        Env env;
        BH_ASSIGN_OR_RETURN(Session f, open(env, opt.front, o));
        for (int k = 0; k < 4; ++k) step(f, 'F', fvar(k), "F" + std::to_string(k + 1));
        return Status::ok();
      });
    if (name == "back_only")
      return sequential(name, [&](auto step) -> Status {
        Env env;
        BH_ASSIGN_OR_RETURN(Session g, open(env, back(), o));
        for (int k = 0; k < 4; ++k) step(g, 'G', gvar(k), "G" + std::to_string(k + 1));
        return Status::ok();
      });
    if (name == "same_process")
      return sequential(name, [&](auto step) -> Status {
        Env env;
        BH_ASSIGN_OR_RETURN(Session f, open(env, opt.front, o));
        step(f, 'F', fvar(0), "F1");
        BH_ASSIGN_OR_RETURN(Session g, open(env, back(), o));
        step(f, 'F', fvar(1), "F2");
        step(g, 'G', gvar(0), "G1");
        step(f, 'F', fvar(2), "F3");
        step(g, 'G', gvar(1), "G2");
        return Status::ok();
      });
    if (name == "order_after_g")
      return sequential(name, [&](auto step) -> Status {
        Env env;
        BH_ASSIGN_OR_RETURN(Session g, open(env, back(), o));
        step(g, 'G', gvar(0), "G1");
        BH_ASSIGN_OR_RETURN(Session f, open(env, opt.front, o));
        step(f, 'F', fvar(0), "F1");
        step(g, 'G', gvar(1), "G2");
        step(f, 'F', fvar(1), "F2");
        return Status::ok();
      });
    if (name == "recover")
      return sequential(name, [&](auto step) -> Status {
        Env env;
        std::optional<Session> f, g;
        BH_ASSIGN_OR_RETURN(f, open(env, opt.front, o));
        BH_ASSIGN_OR_RETURN(g, open(env, back(), o));
        step(*f, 'F', fvar(0), "F1");
        step(*g, 'G', gvar(0), "G1");
        f.reset();
        BH_ASSIGN_OR_RETURN(f, open(env, opt.front, o));
        step(*f, 'F', fvar(1), "F'1");
        step(*g, 'G', gvar(1), "G2");
        g.reset();
        step(*f, 'F', fvar(0), "F'2");
        f.reset();
        BH_ASSIGN_OR_RETURN(f, open(env, opt.front, o));
        step(*f, 'F', fvar(1), "F''1");
        return Status::ok();
      });
    if (name == "cross_process")
      return sequential(name, [&](auto step) -> Status {
        SessionOptions po = o;
        po.isolation = "process";
        po.worker_binary = opt.worker_binary;
        po.worker_timeout_ms = opt.worker_timeout_ms;
        Env env;
        BH_ASSIGN_OR_RETURN(Session f, open(env, opt.front, po));
        BH_ASSIGN_OR_RETURN(Session g, open(env, back(), po));
        for (int k = 0; k < 2; ++k) {
          step(f, 'F', fvar(k), "F" + std::to_string(k + 1));
          step(g, 'G', gvar(k), "G" + std::to_string(k + 1));
        }
        return Status::ok();
      });
    if (name == "threads")
      return with_pair(name, [&](ScheduleResult& r, const Session& f, const Session& g) {
      std::vector<std::vector<StepResult>> per(4);
      std::vector<std::thread> ts;
      for (int t = 0; t < 4; ++t)
        ts.emplace_back([&, t] {
          char role = t < 2 ? 'F' : 'G';
          const Session& s = role == 'F' ? f : g;
          for (int i = 0; i < opt.thread_iterations; ++i) {
            int v = (t + i) % 2;
            per[t].push_back(run_step(s, role, v, std::string(1, role) + "@t" + std::to_string(t) + "#" + std::to_string(i + 1)));
          }
        });
      for (auto& th : ts) th.join();
      // Interleave by iteration so the table reads in rough time order.
      for (int i = 0; i < opt.thread_iterations; ++i)
        for (int t = 0; t < 4; ++t) r.steps.push_back(std::move(per[t][i]));
      return Status::ok();
      });
    if (name == "pipeline")
      return with_pair(name, [&](ScheduleResult& r, const Session& f, const Session& g) -> Status {
      for (int k = 0; k < 2; ++k) {
        int v = k % 2;
        StepResult st = run_step(f, 'F', v, "F" + std::to_string(k + 1));
        StepResult p;
        p.label = "F" + std::to_string(k + 1) + "→G";
        p.role = 'P';
        p.variant = v;
        if (!st.ran) {  // the F step itself is what failed
          r.steps.push_back(std::move(st));
          continue;
        }
        BH_ASSIGN_OR_RETURN(auto fed, feed_back(g_inputs, st.raw));
        auto saved = g_in[v];
        g_in[v] = std::move(fed);  // G reads what F produced on the device
        StepResult gs = run_step(g, 'G', v, p.label);
        g_in[v] = std::move(saved);
        gs.role = 'P';
        r.steps.push_back(std::move(gs));
      }
      return Status::ok();
      });
    ScheduleResult r;
    r.name = name;
    r.error = "unknown schedule '" + name + "'";
    return r;
  }

  // Applies the tolerances once the solo schedules have measured the device's own error.
  void judge() {
    double floor_rel = opt.rtol > 0 ? opt.rtol : (cpu_like(opt.devices.front()) ? 1e-4 : 1e-2);
    rep.rtol = floor_rel;
    // Worst solo error per (role, output).
    std::map<std::string, double> solo;
    for (auto& s : rep.schedules)
      if (s.name == "front_only" || s.name == "back_only")
        for (auto& st : s.steps)
          for (auto& o : st.outputs) {
            double& w = solo[std::string(1, st.role) + o.name];
            w = std::max(w, o.metrics.max_abs);
          }
    // A run that fails is contamination only when the same model ran the same inputs
    // cleanly alone on the device (front_only / back_only): otherwise the model or its
    // inputs fail on the device whatever else runs — an error (exit 1), never exit 2.
    std::set<std::string> ran_alone;
    for (auto& s : rep.schedules)
      if (s.name == "front_only" || s.name == "back_only")
        for (auto& st : s.steps)
          if (st.ran) ran_alone.insert(std::string(1, st.role) + std::to_string(st.variant));
    for (auto& s : rep.schedules)
      for (auto& st : s.steps) {
        if (st.ran) continue;
        char role = st.role == 'P' ? 'G' : st.role;
        if (ran_alone.count(std::string(1, role) + std::to_string(st.variant))) continue;
        st.findings.erase(std::remove_if(st.findings.begin(), st.findings.end(),
                                         [](const std::string& f) { return f.rfind("run failed: ", 0) == 0; }),
                          st.findings.end());
        if (s.error.empty())
          s.error = st.label + " failed, and " + std::string(1, role) + " never ran these inputs cleanly alone on " +
                    join(opt.devices) + " (an error, not contamination): " + (st.error.empty() ? "see the step" : st.error);
      }
    for (auto& s : rep.schedules)
      for (auto& st : s.steps) {
        for (auto& o : st.outputs) {
          const Metrics& m = o.metrics;
          double floor = floor_rel * m.ref_max_abs + 1e-6;
          char role = st.role == 'P' ? 'G' : st.role;
          // A device whose solo error passes 5% of the reference's magnitude gets only the
          // floor (its error is not a rounding the tolerance should absorb), except where
          // the sessions asked for a reduced precision, whose error is the price the user
          // chose: up to the reference's magnitude.
          double cap = (opt.precision == "fp32" ? 0.05 : 1.0) * m.ref_max_abs + 1e-6;
          auto it = solo.find(std::string(1, role) + o.name);
          double solo_err = it == solo.end() ? 0 : it->second;
          o.tolerance = solo_err <= cap ? std::max(floor, 4 * solo_err) : floor;
          if (st.role == 'P') o.tolerance = std::max(o.tolerance * 4, 10 * floor);
          if (m.shape_mismatch) o.clean = false, o.why = m.note;
          else if (m.nonfinite_mismatch) o.clean = false, o.why = std::to_string(m.nonfinite_mismatch) + " NaN/Inf where the reference has none (NaN " + fmt_num(m.nan_frac * 100) + "%, Inf " + fmt_num(m.inf_frac * 100) + "%)";
          else if (m.max_abs > o.tolerance) o.clean = false, o.why = "max error " + fmt_num(m.max_abs) + " > tolerance " + fmt_num(o.tolerance) + " (cosine " + fmt_num(m.cosine) + ", zeros " + fmt_num(m.zero_frac * 100) + "%)";
          if (!o.rewritten_by.empty()) o.clean = false, o.why += std::string(o.why.empty() ? "" : "; ") + "rewritten after step " + o.rewritten_by;
          if (!o.clean && o.rewritten_by.empty()) st.findings.push_back("output '" + o.name + "': " + o.why);
        }
        st.clean = st.findings.empty();
      }
  }
};

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> r;
    for (auto& [k, d] : schedule_table()) r.push_back(k);
    return r;
  }();
  return n;
}

std::string schedule_description(const std::string& name) {
  for (auto& [k, d] : schedule_table())
    if (k == name) return d;
  return "";
}

std::vector<PrecisionCost> CheckReport::precision_costs() const {
  std::vector<PrecisionCost> r;
  if (precision.effective.empty() || precision.effective == "fp32") return r;
  for (const auto& s : schedules) {
    if (s.name != "front_only" && s.name != "back_only") continue;
    for (const auto& st : s.steps) {
      if (!st.ran || st.variant != 0) continue;
      for (const auto& o : st.outputs) r.push_back({st.role, o.name, o.metrics});
      break;  // the first run of variant A
    }
  }
  return r;
}

bool ScheduleResult::clean() const {
  if (!error.empty()) return false;
  for (auto& s : steps)
    if (!s.clean) return false;
  return true;
}

const StepResult* ScheduleResult::first_bad() const {
  for (auto& s : steps)
    if (!s.clean) return &s;
  return nullptr;
}

int CheckReport::exit_code() const {
  bool bad = false, err = false;
  for (auto& s : schedules) {
    bad |= s.first_bad() != nullptr;
    err |= !s.error.empty();
  }
  return bad ? 2 : err ? 1 : 0;
}

std::string CheckReport::verdict() const {
  switch (exit_code()) {
    case 0: return "clean";
    case 2: return "contaminated";
    default: return "error";
  }
}

std::string CheckReport::first_bad_step() const {
  for (auto& s : schedules)
    if (auto* st = s.first_bad()) return s.name + "/" + st->label + ": " + (st->findings.empty() ? "" : st->findings.front());
  return "";
}

Result<CheckReport> run_check(const CheckOptions& opt) {
  if (opt.devices.empty()) return invalid_argument("no device given");
  if (opt.threads < 1) return invalid_argument("threads must be >= 1");
  if (opt.thread_iterations < 1) return invalid_argument("iterations must be >= 1");
  for (auto& s : opt.schedules) {
    bool known = false;
    for (auto& n : schedule_names()) known |= n == s;
    if (!known) return invalid_argument("unknown schedule '" + s + "' (known: " + join(schedule_names(), ", ") + ")");
  }
  CheckReport rep;
  rep.options = opt;
  rep.pipeline = opt.back.has_value();
  Checker c{opt, rep, {}, {}, {}, {}, {}, {}};
  c.dev_opts.devices = opt.devices;
  bool has_cpu = false;
  for (const auto& d : opt.devices) has_cpu = has_cpu || d == "cpu" || d.rfind("cpu:", 0) == 0;
  if (!has_cpu) c.dev_opts.devices.push_back("cpu");
  c.dev_opts.threads = opt.threads;
  c.dev_opts.precision = opt.precision;
  BH_RETURN_IF_ERROR(c.dev_opts.validate());

  // CPU references, in their own Env.
  Env cpu_env;
  SessionOptions cpu_opts;
  cpu_opts.threads = opt.threads;
  BH_ASSIGN_OR_RETURN(Session fc, open(cpu_env, opt.front, cpu_opts));
  BH_ASSIGN_OR_RETURN(Session gc, open(cpu_env, c.back(), cpu_opts));
  for (auto& [n, t] : opt.inputs) {
    bool known = false;
    for (auto& io : fc.inputs()) known |= io.name == n;
    if (!known) {
      std::vector<std::string> names;
      for (auto& io : fc.inputs()) names.push_back(io.name);
      return invalid_argument("unknown input '" + n + "' for '" + opt.front.name + "' (its inputs are: " + join(names, ", ") + ")");
    }
  }
  for (auto& [dim, v] : opt.dims) {
    std::vector<std::string> names;
    bool known = false;
    for (auto& io : fc.inputs())
      for (auto& d : io.dim_names)
        if (!d.empty()) {
          known |= d == dim;
          if (std::find(names.begin(), names.end(), d) == names.end()) names.push_back(d);
        }
    if (!known)
      return invalid_argument("--dim " + dim + ": no input of '" + opt.front.name + "' has a dimension named '" + dim + "'" +
                              (names.empty() ? std::string(" (it has no symbolic dimensions)")
                                             : " (its symbolic dimensions are: " + join(names, ", ") + ")"));
  }
  Rng rng{opt.seed};
  for (auto& io : fc.inputs()) {
    rep.front_inputs.push_back(io.name);
    auto it = opt.inputs.find(io.name);
    Tensor a;
    if (it != opt.inputs.end()) {
      a = it->second;
    } else {
      BH_ASSIGN_OR_RETURN(a, generate_input(io, opt.dims, rng));
    }
    c.f_in[0].emplace_back(io.name, a);
    c.f_in[1].emplace_back(io.name, perturb(a, opt.seed + rep.front_inputs.size()));
  }
  for (auto& io : fc.outputs()) rep.front_outputs.push_back(io.name);
  for (auto& io : gc.inputs()) rep.back_inputs.push_back(io.name);
  for (auto& io : gc.outputs()) rep.back_outputs.push_back(io.name);
  c.g_inputs = gc.inputs();
  for (int v = 0; v < 2; ++v) {
    rep.inputs[v] = c.f_in[v];
    auto r = fc.run(c.f_in[v]);
    if (!r.is_ok()) return r.status().with_context("the CPU reference run of '" + opt.front.name + "' failed: ");
    c.f_ref[v] = std::move(r).value();
    if (rep.pipeline) {
      BH_ASSIGN_OR_RETURN(c.g_in[v], feed_back(c.g_inputs, c.f_ref[v]));
      auto gr = gc.run(c.g_in[v]);
      if (!gr.is_ok()) return gr.status().with_context("the CPU reference run of '" + c.back().name + "' failed: ");
      c.g_ref[v] = std::move(gr).value();
    } else {
      c.g_in[v] = c.f_in[v];
      c.g_ref[v] = c.f_ref[v];
    }
  }
  // A session of F on the device under test, once before the schedules: a device list
  // that cannot host the model (an unknown device, an option the device refuses) is one
  // error line, not the same error in every schedule.
  {
    Env env;
    BH_ASSIGN_OR_RETURN(Session f, open(env, opt.front, c.dev_opts));
    rep.precision = f.precision();
  }
  // The device under test, as `bulkhead devices` names it.
  {
    Env env;
    for (auto& spec : opt.devices) {
      std::string b = spec.substr(0, spec.find(':'));
      std::string d;
      for (auto& di : env.devices())
        if (di.backend == b && (spec.find(':') == std::string::npos ? di.ordinal == 0 : spec.substr(spec.find(':') + 1) == std::to_string(di.ordinal) || spec.substr(spec.find(':') + 1) == di.name))
          d = di.backend + ":" + std::to_string(di.ordinal) + " " + di.name + (di.driver.empty() ? "" : " (" + di.driver + ")");
      rep.device_description += (rep.device_description.empty() ? "" : ", ") + (d.empty() ? spec : d);
    }
  }

  std::vector<std::string> todo = opt.schedules.empty() ? schedule_names() : opt.schedules;
  for (auto& name : todo) {
    if (name == "pipeline" && !rep.pipeline) continue;  // one model: nothing to chain
    rep.schedules.push_back(c.run_schedule(name));
  }
  c.judge();
  return rep;
}

}  // namespace bulkhead::check
