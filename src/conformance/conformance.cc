#include "conformance/conformance.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "bulkhead/bulkhead.hpp"
#include "ir/onnx_import.h"

namespace fs = std::filesystem;

namespace bulkhead::conformance {

const char* outcome_name(CaseResult::Outcome o) {
  switch (o) {
    case CaseResult::Outcome::kPass: return "pass";
    case CaseResult::Outcome::kFail: return "fail";
    case CaseResult::Outcome::kError: return "error";
    case CaseResult::Outcome::kCrash: return "crash";
    case CaseResult::Outcome::kTimeout: return "timeout";
  }
  return "?";
}

namespace {

const char* kFolders[] = {"node", "simple", "pytorch-converted", "pytorch-operator", "light"};

bool is_folder_name(const std::string& n) {
  for (auto* f : kFolders)
    if (n == f) return true;
  return false;
}

void add_folder(const fs::path& dir, const std::string& folder, std::vector<Case>& out) {
  std::vector<Case> found;
  if (folder == "light") {
    for (auto& e : fs::directory_iterator(dir)) {
      auto p = e.path();
      if (p.extension() == ".onnx") found.push_back({folder, p.stem().string(), dir.string()});
    }
  } else {
    for (auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx"))
        found.push_back({folder, e.path().filename().string(), e.path().string()});
  }
  std::sort(found.begin(), found.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  out.insert(out.end(), found.begin(), found.end());
}

double to_double(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kFloat32: return t.data<float>()[i];
    case DataType::kFloat64: return t.data<double>()[i];
    case DataType::kFloat16: return half_to_float(t.data<uint16_t>()[i]);
    case DataType::kBFloat16: return bfloat16_to_float(t.data<uint16_t>()[i]);
    default:
      if (dtype_is_small_float(t.dtype())) return small_float_to_float(t.dtype(), t.data<uint8_t>()[i]);
      return 0;
  }
}

std::string compare_tensor(const Tensor& a, const Tensor& e, double rtol, double atol) {
  if (a.dtype() != e.dtype()) return "element type " + dtype_name(a.dtype()) + ", expected " + dtype_name(e.dtype());
  if (a.shape() != e.shape()) return "shape " + shape_to_string(a.shape()) + ", expected " + shape_to_string(e.shape());
  int64_t n = e.numel();
  if (e.dtype() == DataType::kString) {
    for (int64_t i = 0; i < n; ++i)
      if (a.strings()[i] != e.strings()[i]) return "string " + std::to_string(i) + " is '" + a.strings()[i] + "', expected '" + e.strings()[i] + "'";
    return "";
  }
  if (n > 0 && !a.raw()) return "output is not in host memory";
  if (dtype_is_float(e.dtype()) || dtype_is_small_float(e.dtype())) {
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      double x = to_double(a, i), y = to_double(e, i);
      if (std::isnan(x) && std::isnan(y)) continue;
      if (std::isinf(y) || std::isinf(x)) {
        if (x == y) continue;
      } else if (std::fabs(x - y) <= atol + rtol * std::fabs(y)) {
        continue;
      }
      if (first < 0) first = i;
      ++bad;
      double d = std::fabs(x - y);
      if (!(d <= worst)) worst = d;
    }
    if (bad) {
      std::ostringstream ss;
      ss << bad << " of " << n << " values differ; max abs diff " << worst << "; first at " << first << ": got "
         << to_double(a, first) << ", expected " << to_double(e, first);
      return ss.str();
    }
    return "";
  }
  if (std::memcmp(a.raw(), e.raw(), e.nbytes()) != 0) {
    size_t esz = dtype_size(e.dtype());
    for (int64_t i = 0; i < n; ++i)
      if (std::memcmp(static_cast<char*>(a.raw()) + i * esz, static_cast<char*>(e.raw()) + i * esz, esz) != 0)
        return "value " + std::to_string(i) + " differs (exact match required for " + dtype_name(e.dtype()) + ")";
  }
  return "";
}

struct Tol {
  double rtol = 1e-3, atol = 1e-7;
};

Tol light_tolerance(const Case& c) {
  Tol t;
  // real/test_<name>/data.json next to the light folder.
  std::string model = c.name.substr(6);  // strip "light_"
  fs::path p = fs::path(c.dir).parent_path() / "real" / ("test_" + model) / "data.json";
  std::ifstream f(p);
  if (!f) return t;
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  auto grab = [&](const std::string& key, double& v) {
    auto k = s.find("\"" + key + "\"");
    if (k == std::string::npos) return;
    auto c2 = s.find(':', k);
    v = std::strtod(s.c_str() + c2 + 1, nullptr);
  };
  grab("rtol", t.rtol);
  grab("atol", t.atol);
  return t;
}

}  // namespace

std::string compare(const Value& a, const Value& e, double rtol, double atol) {
  if (e.is_none()) return a.is_none() ? "" : "expected an empty optional, got " + a.describe();
  if (e.is_sequence()) {
    if (!a.is_sequence()) return "expected a sequence, got " + a.describe();
    if (a.sequence.size() != e.sequence.size())
      return "sequence has " + std::to_string(a.sequence.size()) + " items, expected " + std::to_string(e.sequence.size());
    for (size_t i = 0; i < e.sequence.size(); ++i) {
      std::string m = compare_tensor(a.sequence[i], e.sequence[i], rtol, atol);
      if (!m.empty()) return "sequence item " + std::to_string(i) + ": " + m;
    }
    return "";
  }
  if (!a.is_tensor()) return "expected a tensor, got " + a.describe();
  return compare_tensor(a.tensor, e.tensor, rtol, atol);
}

Result<std::vector<Case>> discover(const Options& opts) {
  fs::path root(opts.data_dir);
  if (!fs::is_directory(root)) return not_found("conformance data folder '" + opts.data_dir + "' not found");
  root = fs::canonical(root);
  std::vector<Case> cases;
  if (is_folder_name(root.filename().string())) {
    add_folder(root, root.filename().string(), cases);
  } else {
    for (auto* f : kFolders)
      if (fs::is_directory(root / f)) add_folder(root / f, f, cases);
  }
  if (cases.empty()) return not_found("no conformance cases under '" + opts.data_dir + "'");
  std::string tsv = opts.cases_tsv;
  if (tsv.empty()) {
    fs::path base = is_folder_name(root.filename().string()) ? root.parent_path() : root;
    fs::path guess = base.parent_path() / "conformance" / "cases.tsv";
    if (fs::exists(guess)) tsv = guess.string();
  }
  if (!tsv.empty()) {
    std::ifstream f(tsv);
    if (!f) return not_found("cases table '" + tsv + "' not found");
    std::map<std::string, std::vector<std::string>> rows;
    std::string line;
    while (std::getline(f, line)) {
      std::vector<std::string> cols;
      std::stringstream ss(line);
      std::string col;
      while (std::getline(ss, col, '\t')) cols.push_back(col);
      if (cols.size() >= 6) rows[cols[0] + "/" + cols[1]] = cols;
    }
    for (auto& c : cases) {
      auto it = rows.find(c.folder + "/" + c.name);
      if (it == rows.end()) continue;
      c.op = it->second[2];
      c.form = it->second[3];
      c.tier = it->second[4];
      c.dtypes = it->second[5];
    }
  }
  for (auto& c : cases)
    if (c.tier.empty()) c.tier = c.folder == "node" ? "unknown" : c.folder;
  if (!opts.filter.empty()) {
    std::regex re;
    try {
      re = std::regex(opts.filter);
    } catch (const std::regex_error& e) {
      return invalid_argument("bad --filter regex '" + opts.filter + "': " + e.what());
    }
    std::vector<Case> kept;
    for (auto& c : cases)
      if (std::regex_search(c.folder + "/" + c.name, re)) kept.push_back(c);
    cases = std::move(kept);
  }
  return cases;
}

std::string model_path(const Case& c) { return c.folder == "light" ? c.dir + "/" + c.name + ".onnx" : c.dir + "/model.onnx"; }

Result<CaseData> load_case_data(const Case& c, const Session& session) {
  CaseData d;
  if (c.folder == "light") {
    Tol tol = light_tolerance(c);
    d.rtol = tol.rtol;
    d.atol = tol.atol;
    for (auto& io : session.inputs()) {
      Shape s;
      for (auto dim : io.shape) s.push_back(dim < 0 ? 1 : dim);
      Tensor t = Tensor::host(DataType::kFloat32, s);
      int64_t n = t.numel();
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i) / static_cast<float>(n);
      d.inputs.emplace_back(io.name, Value(t));
    }
    auto e = ir::load_value_pb(c.dir + "/" + c.name + "_output_0.pb", 't');
    if (!e.is_ok()) return e.status().with_context("reference output: ");
    d.expected.push_back(std::move(e).value());
    return d;
  }
  std::string ds = c.dir + "/test_data_set_0";
  const auto& ios = session.inputs();
  // Test data lists inputs in graph order, skipping inputs that have initializers only
  // when the file is absent.
  size_t file_idx = 0;
  for (size_t i = 0; i < ios.size(); ++i) {
    std::string p = ds + "/input_" + std::to_string(file_idx) + ".pb";
    if (!fs::exists(p)) break;
    char hint = ios[i].type_string.rfind("sequence<", 0) == 0 ? 's' : ios[i].type_string.rfind("optional<", 0) == 0 ? 'o' : 't';
    auto v = ir::load_value_pb(p, hint);
    if (!v.is_ok()) return v.status().with_context("input " + std::to_string(file_idx) + ": ");
    d.inputs.emplace_back(ios[i].name, std::move(v).value());
    ++file_idx;
  }
  const auto& outs = session.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string p = ds + "/output_" + std::to_string(i) + ".pb";
    char hint = outs[i].type_string.rfind("sequence<", 0) == 0 ? 's' : outs[i].type_string.rfind("optional<", 0) == 0 ? 'o' : 't';
    auto v = ir::load_value_pb(p, hint);
    if (!v.is_ok()) return v.status().with_context("output " + std::to_string(i) + ": ");
    d.expected.push_back(std::move(v).value());
  }
  return d;
}

CaseResult run_case(const Case& c, const Options& opts) {
  CaseResult r;
  r.c = c;
  auto t0 = std::chrono::steady_clock::now();
  auto finish = [&](CaseResult::Outcome o, std::string msg) {
    r.outcome = o;
    r.message = std::move(msg);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  Env env;
  SessionOptions so;
  so.devices = opts.devices;
  so.threads = opts.threads;
  auto session = env.load(model_path(c), so);
  if (!session.is_ok()) return finish(CaseResult::Outcome::kError, session.status().to_string());
  auto data = load_case_data(c, *session);
  if (!data.is_ok()) return finish(CaseResult::Outcome::kError, data.status().to_string());
  const std::vector<Value>& expected = data->expected;
  auto outs = session->run_values(data->inputs);
  if (!outs.is_ok()) return finish(CaseResult::Outcome::kError, outs.status().to_string());
  if (outs->size() != expected.size())
    return finish(CaseResult::Outcome::kFail, "produced " + std::to_string(outs->size()) + " outputs, expected " + std::to_string(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    std::string m = compare((*outs)[i].second, expected[i], data->rtol, data->atol);
    if (!m.empty()) {
      bool loose = compare((*outs)[i].second, expected[i], 1e-2, 1e-5).empty();
      r.loose = loose;
      return finish(CaseResult::Outcome::kFail, "output '" + (*outs)[i].first + "': " + m);
    }
  }
  return finish(CaseResult::Outcome::kPass, "");
}

namespace {

// Child → parent record: "outcome\tloose\tseconds\tmessage".
std::string encode(const CaseResult& r) {
  std::string m = r.message;
  for (auto& ch : m)
    if (ch == '\n' || ch == '\t') ch = ' ';
  if (m.size() > 600) m = m.substr(0, 600) + "...";
  return std::to_string(static_cast<int>(r.outcome)) + "\t" + (r.loose ? "1" : "0") + "\t" + std::to_string(r.seconds) + "\t" + m;
}

struct Running {
  pid_t pid;
  int fd;
  size_t index;
  std::string buf;
  std::chrono::steady_clock::time_point start;
};

}  // namespace

std::vector<CaseResult> run_all(const std::vector<Case>& cases, const Options& opts,
                                void (*progress)(const CaseResult&, void*), void* user) {
  std::vector<CaseResult> results(cases.size());
  std::vector<Running> running;
  size_t next = 0;
  int jobs = std::max(1, opts.jobs);
  auto launch = [&](size_t i) {
    int fds[2];
    if (pipe(fds) != 0) {
      results[i].c = cases[i];
      results[i].message = "pipe failed";
      return;
    }
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      CaseResult r = run_case(cases[i], opts);
      std::string s = encode(r);
      ssize_t off = 0;
      while (off < static_cast<ssize_t>(s.size())) {
        ssize_t w = write(fds[1], s.data() + off, s.size() - off);
        if (w <= 0) break;
        off += w;
      }
      _exit(0);
    }
    close(fds[1]);
    running.push_back({pid, fds[0], i, "", std::chrono::steady_clock::now()});
  };
  auto complete = [&](Running& r, bool timed_out) {
    int status = 0;
    if (timed_out) kill(r.pid, SIGKILL);
    waitpid(r.pid, &status, 0);
    close(r.fd);
    CaseResult res;
    res.c = cases[r.index];
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count();
    if (timed_out) {
      res.outcome = CaseResult::Outcome::kTimeout;
      res.message = "timed out after " + std::to_string(opts.timeout_s) + " s";
    } else if (WIFSIGNALED(status) || r.buf.empty()) {
      res.outcome = CaseResult::Outcome::kCrash;
      res.message = WIFSIGNALED(status) ? std::string("crashed with signal ") + strsignal(WTERMSIG(status)) : "exited without a result";
    } else {
      std::stringstream ss(r.buf);
      std::string o, l, secs;
      std::getline(ss, o, '\t');
      std::getline(ss, l, '\t');
      std::getline(ss, secs, '\t');
      std::getline(ss, res.message);
      res.outcome = static_cast<CaseResult::Outcome>(std::atoi(o.c_str()));
      res.loose = l == "1";
    }
    results[r.index] = res;
    if (progress) progress(res, user);
  };
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && static_cast<int>(running.size()) < jobs) launch(next++);
    std::vector<pollfd> pfds;
    for (auto& r : running) pfds.push_back({r.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 200);
    for (size_t k = 0; k < running.size();) {
      Running& r = running[k];
      bool done = false, timed_out = false;
      if (pfds.size() > k && (pfds[k].revents & (POLLIN | POLLHUP))) {
        char buf[4096];
        ssize_t n = read(r.fd, buf, sizeof buf);
        if (n > 0) r.buf.append(buf, n);
        else done = true;
      }
      if (!done && std::chrono::steady_clock::now() - r.start > std::chrono::seconds(opts.timeout_s)) done = timed_out = true;
      if (done) {
        complete(r, timed_out);
        running.erase(running.begin() + k);
        pfds.erase(pfds.begin() + k);
      } else {
        ++k;
      }
    }
  }
  return results;
}

}  // namespace bulkhead::conformance
