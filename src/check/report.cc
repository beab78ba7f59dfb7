#include "check/report.h"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <fstream>
#include <sstream>
#include <thread>

#include "check/sha256.h"
#include "common/json_safe.h"
#include "common/text.h"
#include "io/file.h"
#include "onnx/onnx_pb.h"
#include "io/npy.h"

namespace bulkhead::check {
namespace {

using nlohmann::json;

// NaN/Inf are not JSON numbers.
json num(double v) { return std::isfinite(v) ? json(v) : json(std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"); }

std::string esc(const std::string& s) { return html_escape(s); }

// The external data files a model refers to, by location relative to its folder: in
// every initializer and tensor attribute, subgraphs included.
void external_locations(const onnx::GraphProto& g, std::set<std::string>& out);
void external_locations(const onnx::TensorProto& t, std::set<std::string>& out) {
  if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
  for (const auto& kv : t.external_data())
    if (kv.key() == "location") out.insert(kv.value());
}
void external_locations(const onnx::GraphProto& g, std::set<std::string>& out) {
  for (const auto& t : g.initializer()) external_locations(t, out);
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_t()) external_locations(a.t(), out);
      for (const auto& t : a.tensors()) external_locations(t, out);
      if (a.has_g()) external_locations(a.g(), out);
      for (const auto& sg : a.graphs()) external_locations(sg, out);
    }
}

std::string fmt(double v, const char* f = "%.3g") {
  char b[48];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// PSNR in dB; an exact match has no finite one.
std::string psnr_text(double v) { return std::isinf(v) && v > 0 ? "exact" : fmt(v, "%.1f"); }

// A name safe as one path component.
std::string file_name(const std::string& s) {
  std::string r;
  for (unsigned char c : s) r += (std::isalnum(c) || c == '-' || c == '_' || c == '.') ? static_cast<char>(c) : '_';
  if (r.empty() || r[0] == '.') r = "_" + r;
  return r;
}

// Step labels use ' and → ; file names get ASCII stand-ins.
std::string step_dir(const std::string& label) {
  std::string r;
  for (size_t i = 0; i < label.size(); ++i) {
    if (label.compare(i, 3, "\xE2\x86\x92") == 0) r += "-to-", i += 2;
    else if (label[i] == '\'') r += "p";
    else if (label[i] == '@') r += "-";
    else if (label[i] == '#') r += "-";
    else r += label[i];
  }
  return file_name(r);
}

Status make_dirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      return invalid_argument("cannot create folder '" + cur + "': " + std::strerror(errno));
  }
  return Status::ok();
}

std::string machine() {
  utsname u{};
  std::string r;
  if (::uname(&u) == 0) r = std::string(u.sysname) + " " + u.release + " " + u.machine;
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      r += ", " + line.substr(line.find(':') + 2);
      break;
    }
  r += ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
  return r;
}

double ratio_of(const StepResult& st) {
  double worst = 0;
  for (auto& o : st.outputs) {
    if (!o.clean && (o.metrics.shape_mismatch || o.metrics.nonfinite_mismatch)) return INFINITY;
    double r = o.tolerance > 0 ? o.metrics.max_abs / o.tolerance : (o.metrics.max_abs > 0 ? INFINITY : 0);
    worst = std::max(worst, r);
  }
  if (!st.ran) return INFINITY;
  return worst;
}

// One bar per step: height = log10(max error / tolerance), clipped to [-6, 3]; the line
// at 0 is the tolerance. Red bars are steps that are not clean.
std::string chart_svg(const ScheduleResult& s) {
  const int n = static_cast<int>(s.steps.size());
  // Room for the title and the step labels (rotated 60 degrees below the bars): about
  // 7 px per character at 12 px and 6 at 10 px, so that nothing is cut at the edges.
  const std::string title = s.name + ": log10(max error / tolerance) per step";
  size_t longest = 0;
  for (const auto& st : s.steps) longest = std::max(longest, st.label.size());
  const double label_px = 6.0 * static_cast<double>(std::min<size_t>(longest, 60));
  const int bar = 26, gap = 8, top = 24, h = 180;
  const int left = std::max(48, static_cast<int>(label_px * 0.5) + 8 - (bar + gap) / 2);
  const int bottom = std::max(70, static_cast<int>(label_px * 0.87) + 24);
  const int w = std::max(left + std::max(n, 1) * (bar + gap) + 20, static_cast<int>(7.0 * title.size()) + 16);
  auto y_of = [&](double lg) { return top + (3 - lg) / 9.0 * h; };
  std::ostringstream o;
  o << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << top + h + bottom
    << "\" role=\"img\" aria-label=\"error per step, " << esc(s.name) << "\">";
  o << "<text x=\"4\" y=\"14\" font-size=\"12\">" << esc(s.name) << ": log10(max error / tolerance) per step</text>";
  for (int lg = -6; lg <= 3; lg += 3) {
    double y = y_of(lg);
    o << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << w - 10 << "\" y2=\"" << y
      << "\" stroke=\"#ddd\"/><text x=\"4\" y=\"" << y + 4 << "\" font-size=\"11\">1e" << lg << "</text>";
  }
  double y0 = y_of(0);
  o << "<line x1=\"" << left << "\" y1=\"" << y0 << "\" x2=\"" << w - 10 << "\" y2=\"" << y0
    << "\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/>";
  for (int i = 0; i < n; ++i) {
    const StepResult& st = s.steps[i];
    double r = ratio_of(st);
    double lg = r <= 0 ? -6 : std::isinf(r) ? 3 : std::clamp(std::log10(r), -6.0, 3.0);
    double x = left + i * (bar + gap) + gap / 2.0;
    double yt = y_of(lg), yb = y_of(-6);
    o << "<rect x=\"" << x << "\" y=\"" << yt << "\" width=\"" << bar << "\" height=\"" << std::max(1.0, yb - yt)
      << "\" fill=\"" << (st.clean ? "#3a7" : "#d33") << "\"><title>" << esc(st.label) << ": "
      << (std::isinf(r) ? std::string("failed") : fmt(r)) << "</title></rect>";
    o << "<text x=\"" << x + bar / 2.0 << "\" y=\"" << top + h + 12 << "\" font-size=\"10\" text-anchor=\"end\" transform=\"rotate(-60 "
      << x + bar / 2.0 << " " << top + h + 12 << ")\">" << esc(st.label) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

Status write_text(const std::string& path, const std::string& text) { return io::write_file_atomic(path, text); }


}  // namespace

json report_json(const CheckReport& r) {
  json j;
  j["verdict"] = r.verdict();
  j["exit_code"] = r.exit_code();
  j["first_bad_step"] = r.first_bad_step();
  j["device"] = r.device_description;
  j["devices"] = r.options.devices;
  j["threads"] = r.options.threads;
  j["seed"] = r.options.seed;
  j["rtol_floor"] = r.rtol;
  j["pipeline"] = r.pipeline;
  j["front"] = {{"model", r.options.front.name}, {"inputs", r.front_inputs}, {"outputs", r.front_outputs}};
  j["back"] = {{"model", r.options.back ? r.options.back->name : r.options.front.name + " (second session)"},
               {"inputs", r.back_inputs}, {"outputs", r.back_outputs}};
  j["bulkhead_version"] = version();
  j["precision"] = {{"requested", r.options.precision}, {"effective", r.precision.effective},
                    {"bf16_nodes", r.precision.bf16_nodes}, {"note", r.precision.note}};
  j["precision"]["costs"] = json::array();
  for (const auto& c : r.precision_costs())
    j["precision"]["costs"].push_back({{"role", std::string(1, c.role)}, {"output", c.output},
                                       {"cosine", num(c.metrics.cosine)}, {"max_abs", num(c.metrics.max_abs)},
                                       {"rmse", num(c.metrics.rmse)}, {"psnr_db", num(c.metrics.psnr)},
                                       {"reference_max_abs", num(c.metrics.ref_max_abs)}});
  j["schedules"] = json::array();
  for (auto& s : r.schedules) {
    json js{{"name", s.name}, {"description", s.description}, {"clean", s.clean()}};
    if (!s.error.empty()) js["error"] = s.error;
    if (auto* b = s.first_bad()) js["first_bad_step"] = b->label;
    js["steps"] = json::array();
    for (auto& st : s.steps) {
      json jst{{"label", st.label}, {"role", std::string(1, st.role)}, {"input_variant", st.variant == 0 ? "A" : "B"},
               {"ran", st.ran}, {"clean", st.clean}, {"ms", st.ms}, {"inputs_unchanged", st.inputs_unchanged},
               {"findings", st.findings}};
      if (!st.error.empty()) jst["error"] = st.error;
      jst["outputs"] = json::array();
      for (auto& o : st.outputs) {
        const Metrics& m = o.metrics;
        json jo{{"name", o.name}, {"clean", o.clean}, {"sha256", o.hash}, {"tolerance", num(o.tolerance)},
                {"max_abs", num(m.max_abs)}, {"rmse", num(m.rmse)}, {"cosine", num(m.cosine)},
                {"psnr_db", num(m.psnr)}, {"nan_fraction", num(m.nan_frac)}, {"inf_fraction", num(m.inf_frac)},
                {"zero_fraction", num(m.zero_frac)}, {"reference_max_abs", num(m.ref_max_abs)}, {"count", m.count}};
        if (!o.why.empty()) jo["why"] = o.why;
        if (!o.rewritten_by.empty()) jo["rewritten_after"] = o.rewritten_by;
        jst["outputs"].push_back(std::move(jo));
      }
      js["steps"].push_back(std::move(jst));
    }
    j["schedules"].push_back(std::move(js));
  }
  return j;
}

std::string report_html(const CheckReport& r) {
  std::ostringstream h;
  const std::string verdict = r.verdict();
  h << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head><meta charset=\"utf-8\"/><title>bulkhead check: " << esc(verdict)
    << "</title><style>body{font-family:sans-serif;margin:24px;max-width:1200px}table{border-collapse:collapse;margin:8px 0}"
       "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px;text-align:left}.ok{color:#171}.bad{color:#b00;font-weight:bold}"
       "code{background:#f4f4f4;padding:1px 3px}</style></head><body>\n";
  h << "<h1>bulkhead check: <span class=\"" << (verdict == "clean" ? "ok" : "bad") << "\">" << esc(verdict) << "</span></h1>\n";
  h << "<p>Device under test: <code>" << esc(r.device_description) << "</code>, threads " << r.options.threads
    << ". F: <code>" << esc(r.options.front.name) << "</code>; G: <code>"
    << esc(r.options.back ? r.options.back->name : r.options.front.name + " (a second session)") << "</code>. Reference: the CPU backend in float32. "
    << "Accuracy floor rtol " << fmt(r.rtol) << " of the reference's largest magnitude; a step is clean when every output is within "
       "max(floor, 4 × the worst error of the solo schedules) with no NaN/Inf the reference lacks, its inputs are unchanged and no earlier output changed after it.</p>\n";
  if (!r.first_bad_step().empty()) h << "<p class=\"bad\">First bad step: " << esc(r.first_bad_step()) << "</p>\n";
  if (r.options.precision != "fp32") {
    h << "<h2>Precision</h2><p>Sessions under test asked for <code>" << esc(r.options.precision) << "</code> and ran <code>"
      << esc(r.precision.effective) << "</code> (" << r.precision.bf16_nodes << " nodes in bf16)"
      << (r.precision.note.empty() ? "" : ": " + esc(r.precision.note)) << ". What it costs, the solo run against the float32 CPU reference:</p>\n";
    auto costs = r.precision_costs();
    if (!costs.empty()) {
      h << "<table><tr><th>session</th><th>output</th><th>cosine</th><th>max abs error</th><th>reference max |x|</th><th>RMSE</th><th>PSNR dB</th></tr>\n";
      for (const auto& c : costs)
        h << "<tr><td>" << c.role << "</td><td>" << esc(c.output) << "</td><td>" << fmt(c.metrics.cosine, "%.6f") << "</td><td>"
          << fmt(c.metrics.max_abs) << "</td><td>" << fmt(c.metrics.ref_max_abs) << "</td><td>" << fmt(c.metrics.rmse) << "</td><td>"
          << psnr_text(c.metrics.psnr) << "</td></tr>\n";
      h << "</table>\n";
    }
  }
  h << "<h2>Summary</h2><table><tr><th>schedule</th><th>what it does</th><th>steps</th><th>verdict</th><th>first bad step</th></tr>\n";
  for (auto& s : r.schedules) {
    auto* b = s.first_bad();
    h << "<tr><td><a href=\"#" << esc(s.name) << "\">" << esc(s.name) << "</a></td><td>" << esc(s.description) << "</td><td>"
      << s.steps.size() << "</td><td class=\"" << (s.clean() ? "ok\">clean" : "bad\">" + std::string(s.error.empty() ? "contaminated" : "error"))
      << "</td><td>" << esc(b ? b->label + ": " + (b->findings.empty() ? "" : b->findings.front()) : s.error) << "</td></tr>\n";
  }
  h << "</table>\n";
  for (auto& s : r.schedules) {
    h << "<h2 id=\"" << esc(s.name) << "\">" << esc(s.name) << "</h2><p>" << esc(s.description) << "</p>\n";
    if (!s.error.empty()) h << "<p class=\"bad\">Could not run: " << esc(s.error) << "</p>\n";
    h << chart_svg(s) << "\n";
    h << "<table><tr><th>step</th><th>input</th><th>output</th><th>max abs</th><th>tolerance</th><th>RMSE</th><th>cosine</th>"
         "<th>PSNR dB</th><th>NaN</th><th>Inf</th><th>zeros</th><th>ms</th><th>verdict</th></tr>\n";
    for (auto& st : s.steps) {
      std::string verdict_cell = st.clean ? "<td class=\"ok\">clean</td>" : "<td class=\"bad\">" + esc(st.findings.empty() ? "bad" : st.findings.front()) + "</td>";
      if (st.outputs.empty()) {
        h << "<tr><td>" << esc(st.label) << "</td><td>" << (st.variant ? "B" : "A") << "</td><td colspan=\"10\">"
          << esc(st.error) << "</td>" << verdict_cell << "</tr>\n";
        continue;
      }
      for (size_t k = 0; k < st.outputs.size(); ++k) {
        const OutputResult& o = st.outputs[k];
        const Metrics& m = o.metrics;
        h << "<tr><td>" << (k == 0 ? esc(st.label) : "") << "</td><td>" << (k == 0 ? (st.variant ? "B" : "A") : "") << "</td><td>"
          << esc(o.name) << "</td><td class=\"" << (o.clean ? "ok" : "bad") << "\">" << fmt(m.max_abs) << "</td><td>" << fmt(o.tolerance)
          << "</td><td>" << fmt(m.rmse) << "</td><td>" << fmt(m.cosine, "%.6f") << "</td><td>" << psnr_text(m.psnr) << "</td><td>"
          << fmt(m.nan_frac) << "</td><td>" << fmt(m.inf_frac) << "</td><td>" << fmt(m.zero_frac) << "</td><td>"
          << (k == 0 ? fmt(st.ms, "%.2f") : "") << "</td>" << (k == 0 ? verdict_cell : "<td></td>") << "</tr>\n";
      }
    }
    h << "</table>\n";
  }
  h << "<p>Generated by bulkhead " << esc(version()) << ". The repro bundle beside this page (<code>bundle/</code>) holds the "
       "inputs, every step's raw outputs and <code>rerun.sh</code>.</p></body></html>\n";
  return h.str();
}

Status write_bundle(const CheckReport& r, const std::string& dir) {
  BH_RETURN_IF_ERROR(make_dirs(dir + "/models"));
  BH_RETURN_IF_ERROR(make_dirs(dir + "/inputs/A"));
  BH_RETURN_IF_ERROR(make_dirs(dir + "/inputs/B"));
  json manifest;
  // Models: copied in, hashed.
  auto put_model = [&](const ModelSource& m, char role) -> Status {
    std::string bytes = m.bytes;
    const std::string folder = std::string("models/") + role;
    BH_RETURN_IF_ERROR(make_dirs(dir + "/" + folder));
    json files = json::array();
    if (!m.path.empty()) {
      BH_ASSIGN_OR_RETURN(bytes, io::read_regular_file(m.path, io::kDefaultMaxFileBytes, "model"));
      // Its external data goes beside it, as in its own folder (read with the importer's
      // rules: regular files inside the model's folder only).
      onnx::ModelProto proto;
      std::set<std::string> locations;
      if (bytes.size() <= static_cast<size_t>(INT32_MAX) && proto.ParseFromString(bytes) && proto.has_graph())
        external_locations(proto.graph(), locations);
      const std::string model_dir = m.path.find('/') == std::string::npos ? "." : m.path.substr(0, m.path.find_last_of('/'));
      for (const auto& loc : locations) {
        BH_ASSIGN_OR_RETURN(io::RegularFile f, io::RegularFile::open_inside(model_dir, loc, io::kDefaultMaxFileBytes, "external data file"));
        BH_ASSIGN_OR_RETURN(std::string data, f.read_all());
        const std::string rel = folder + "/" + loc;
        if (auto slash = rel.find_last_of('/'); slash != std::string::npos) BH_RETURN_IF_ERROR(make_dirs(dir + "/" + rel.substr(0, slash)));
        BH_RETURN_IF_ERROR(write_text(dir + "/" + rel, data));
        files.push_back({{"file", rel}, {"sha256", sha256_hex(data.data(), data.size())}, {"bytes", data.size()}});
      }
    }
    BH_RETURN_IF_ERROR(write_text(dir + "/" + folder + "/model.onnx", bytes));
    manifest["models"][std::string(1, role)] = {{"source", m.name}, {"file", folder + "/model.onnx"},
                                                {"sha256", sha256_hex(bytes.data(), bytes.size())}, {"bytes", bytes.size()},
                                                {"external_data", files}};
    return Status::ok();
  };
  BH_RETURN_IF_ERROR(put_model(r.options.front, 'F'));
  if (r.options.back) BH_RETURN_IF_ERROR(put_model(*r.options.back, 'G'));
  for (int v = 0; v < 2; ++v)
    for (auto& [n, t] : r.inputs[v]) {
      std::string rel = std::string("inputs/") + (v ? "B/" : "A/") + file_name(n) + ".npy";
      BH_RETURN_IF_ERROR(io::write_npy(dir + "/" + rel, t));
      manifest["inputs"][v ? "B" : "A"][n] = {{"file", rel}, {"sha256", tensor_hash(t)}, {"type", t.describe()}};
    }
  for (auto& s : r.schedules)
    for (auto& st : s.steps) {
      std::string sd = "outputs/" + s.name + "/" + step_dir(st.label);
      if (st.raw.empty()) continue;
      BH_RETURN_IF_ERROR(make_dirs(dir + "/" + sd));
      for (auto& [n, t] : st.raw)
        if (t.raw() || t.dtype() == DataType::kString) BH_RETURN_IF_ERROR(io::write_npy(dir + "/" + sd + "/" + file_name(n) + ".npy", t));
    }
  manifest["options"] = {{"devices", r.options.devices}, {"threads", r.options.threads}, {"seed", r.options.seed},
                         {"iterations", r.options.thread_iterations}, {"rtol_floor", r.rtol}, {"schedules", r.options.schedules}};
  manifest["device"] = r.device_description;
  manifest["runtime"] = std::string("bulkhead ") + version();
  manifest["machine"] = machine();
  manifest["verdict"] = r.verdict();
  manifest["first_bad_step"] = r.first_bad_step();

  // The command that re-runs this check from the bundle.
  // Every word that came from a user or a model is quoted for the shell (shell_quote:
  // single quotes hold any byte but NUL); the rest is bulkhead's own text.
  std::string cmd = "\"${BULKHEAD:-bulkhead}\" check ";
  cmd += r.options.back ? "--pipeline models/F/model.onnx models/G/model.onnx" : "models/F/model.onnx";
  std::string devs;
  for (auto& d : r.options.devices) devs += (devs.empty() ? "" : ",") + d;
  cmd += " --device " + shell_quote(devs) + " --threads " + std::to_string(r.options.threads) + " --seed " + std::to_string(r.options.seed) +
         " --iterations " + std::to_string(r.options.thread_iterations);
  if (r.options.rtol > 0) cmd += " --rtol " + fmt(r.options.rtol, "%.17g");
  if (!r.options.schedules.empty()) {
    std::string sc;
    for (auto& x : r.options.schedules) sc += (sc.empty() ? "" : ",") + x;
    cmd += " --schedules " + shell_quote(sc);
  }
  // Inputs: a name the command line cannot carry (a NUL byte, or '=' which ends the name)
  // is left to the seed, which regenerates generated inputs exactly.
  std::string not_passed;
  for (auto& [n, t] : r.inputs[0]) {
    if (n.find('\0') != std::string::npos || n.find('=') != std::string::npos) {
      not_passed += (not_passed.empty() ? "" : ", ") + printable(n);
      continue;
    }
    cmd += " --input " + shell_quote(n + "=inputs/A/" + file_name(n) + ".npy");
  }
  cmd += " --report rerun-report";
  manifest["command"] = cmd;
  BH_RETURN_IF_ERROR(write_text(dir + "/manifest.json", utf8_safe(manifest).dump(2) + "\n"));
  std::string note = not_passed.empty() ? "" : "# Inputs not passed (their names cannot be written on a command line; --seed regenerates them if they were generated): " + not_passed + "\n";
  BH_RETURN_IF_ERROR(write_text(dir + "/rerun.sh", "#!/bin/sh\n# Re-runs this check from the bundle; set BULKHEAD to the bulkhead binary if it is not on PATH.\n"
                                                   "# Exit 0 = clean, 2 = contamination found, 1 = error.\n" + note +
                                                   "cd \"$(dirname \"$0\")\" && exec " + cmd + "\n"));
  ::chmod((dir + "/rerun.sh").c_str(), 0755);

  std::ostringstream e;
  e << "# What a clean run of this check shows\n\n"
    << "Device under test: `" << r.device_description << "`, threads " << r.options.threads << ", seed " << r.options.seed << ".\n"
    << "Re-run with `./rerun.sh` (exit 0 clean, 2 contamination, 1 error).\n\n"
    << "A clean run: every schedule below is clean — each output of each step stays within its tolerance of the CPU float32 "
       "reference (the tolerance is listed; it is max(rtol " << fmt(r.rtol) << " × the reference's largest magnitude + 1e-6, "
       "4 × the worst error of the solo schedules front_only/back_only)), no output has NaN or Inf where the reference has none, "
       "no run changes its inputs (SHA-256 before and after), and no output changes after it was returned.\n\n"
    << "This run: **" << r.verdict() << "**" << (r.first_bad_step().empty() ? "" : " — first bad step " + r.first_bad_step()) << "\n\n";
  for (auto& s : r.schedules) {
    e << "## " << s.name << "\n\n" << s.description << ".\n\n";
    if (!s.error.empty()) e << "Could not run: " << s.error << "\n\n";
    e << "| step | input | outputs within tolerance (max error ≤ tolerance) | this run |\n|---|---|---|---|\n";
    for (auto& st : s.steps) {
      std::string outs;
      for (auto& o : st.outputs) outs += (outs.empty() ? "" : "; ") + o.name + " " + fmt(o.metrics.max_abs) + " ≤ " + fmt(o.tolerance);
      e << "| " << st.label << " | " << (st.variant ? "B" : "A") << " | " << (outs.empty() ? st.error : outs) << " | "
        << (st.clean ? "clean" : "NOT clean: " + (st.findings.empty() ? std::string() : st.findings.front())) << " |\n";
    }
    e << "\n";
  }
  return write_text(dir + "/expected.md", e.str());
}

Status write_report(const CheckReport& r, const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) return invalid_argument("the report folder is empty");
  // Written in full beside its final place, then renamed: a failure leaves no half-written
  // report, and an earlier report in the same folder stays until the new one is whole.
  std::string base = dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string tmp = base + ".tmp." + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  auto write_all = [&]() -> Status {
    BH_RETURN_IF_ERROR(make_dirs(tmp));
    BH_RETURN_IF_ERROR(write_bundle(r, tmp + "/bundle"));
    BH_RETURN_IF_ERROR(write_text(tmp + "/report.json", utf8_safe(report_json(r)).dump(2) + "\n"));
    return write_text(tmp + "/report.html", report_html(r));
  };
  Status s = write_all();
  if (!s.is_ok()) {
    fs::remove_all(tmp, ec);
    return s;
  }
  const std::string old = base + ".old." + std::to_string(::getpid());
  bool had_old = fs::exists(fs::symlink_status(base, ec));
  // Only an earlier report (or an empty folder) is replaced; any other folder is the user's.
  if (had_old) {
    bool replaceable = fs::is_directory(fs::symlink_status(base, ec));
    for (const auto& e : fs::directory_iterator(base, ec)) {
      const std::string n = e.path().filename().string();
      replaceable &= n == "report.json" || n == "report.html" || n == "bundle";
    }
    if (!replaceable || ec) {
      fs::remove_all(tmp, ec);
      return invalid_argument("'" + base + "' exists and is not an earlier bulkhead check report; choose another --report folder");
    }
  }
  if (had_old && ::rename(base.c_str(), old.c_str()) != 0) {
    int e = errno;
    fs::remove_all(tmp, ec);
    return invalid_argument("cannot replace the report folder '" + base + "': " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), base.c_str()) != 0) {
    int e = errno;
    if (had_old) (void)::rename(old.c_str(), base.c_str());
    fs::remove_all(tmp, ec);
    return invalid_argument("cannot write the report folder '" + base + "': " + std::strerror(e));
  }
  if (had_old) fs::remove_all(old, ec);
  return Status::ok();
}

}  // namespace bulkhead::check
