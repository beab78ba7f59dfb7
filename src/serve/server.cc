#include "serve/server.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/json_safe.h"
#include "common/text.h"
#include "check/check.h"
#include "io/file_set.h"
#include "io/npy.h"
#include "memory/host_pages.h"
#include "serve/dashboard.h"
#include "serve/grpc_service.h"
#include "serve/oip.h"

namespace bulkhead::serve {
namespace {

using nlohmann::json;

int http_status(StatusCode c) {
  switch (c) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

void reply_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(error_json(message), "application/json");
}

void reply_json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(utf8_safe(j).dump(), "application/json");
}

json io_json(const std::vector<IoInfo>& ios) {
  json a = json::array();
  for (const auto& io : ios) {
    std::string dt = io.is_tensor ? oip_datatype(io.dtype) : "";
    json shape = json::array();
    if (io.has_shape)
      for (int64_t d : io.shape) shape.push_back(d);
    a.push_back({{"name", io.name}, {"datatype", dt.empty() ? "UNSUPPORTED" : dt}, {"shape", shape}});
  }
  return a;
}

// A strict non-negative decimal (header values).
bool parse_size(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = n;
  return true;
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {}

Server::~Server() {
  stop();
  if (grpc_) grpc_->wait();
  {
    std::lock_guard lock(monitor_mu_);
    monitor_stop_ = true;
  }
  monitor_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  std::map<std::string, ModelState> models;
  {
    std::lock_guard lock(mu_);
    models.swap(models_);
  }
  for (auto& [n, m] : models)
    for (auto& h : m.versions) h->drain();
}

std::string log_line(const char* level, const std::string& event, const std::string& model, const std::string& message) {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t t = system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char when[40];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03dZ", static_cast<int>(duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000));
  nlohmann::ordered_json j;  // in this order, for people reading the log
  j["time"] = std::string(when) + ms;
  j["level"] = level;
  j["event"] = event;
  if (!model.empty()) j["model"] = valid_utf8(model);
  j["message"] = valid_utf8(message);
  return j.dump();
}

void Server::log(const char* level, const std::string& event, const std::string& model, const std::string& message) const {
  std::string line = log_line(level, event, model, message);
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
}

Status Server::start() {
  for (const auto& lib : options_.backend_libs) BH_RETURN_IF_ERROR(env_.load_backend(lib));
  std::vector<std::string> skipped;
  BH_ASSIGN_OR_RETURN(std::vector<std::string> names, list_models(options_.repository, &skipped));
  for (const auto& s : skipped) log("error", "folder_skipped", "", s);
  for (const auto& name : names) {
    Status st = load_model(name);
    if (!st.is_ok()) log("error", "load_failed", name, st.message());
  }
  routes();
  const size_t threads = static_cast<size_t>(std::max(1, options_.http_threads));
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  // Replies go out at once: with Nagle's algorithm a response written in two pieces waited
  // for the client's delayed ACK, 40 ms a request.
  http_->set_tcp_nodelay(true);
  // A client's connection stays open for many requests (cpp-httplib closes it after 5 by
  // default: a small request then paid for a new connection every fifth time — accept,
  // a thread handoff, close — a third of its cost). An idle one still goes after 5 s.
  http_->set_keep_alive_max_count(100000);
  // SO_REUSEADDR (a restarted server binds at once past TIME_WAIT), not cpp-httplib's
  // SO_REUSEPORT, with which a second server — or our own gRPC listener — could bind the
  // same port and silently take half its connections.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  if (options_.http_port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
  } else {
    port_ = http_->bind_to_port(options_.host, options_.http_port) ? options_.http_port : -1;
  }
  if (port_ <= 0)
    return Status(StatusCode::kUnavailable, "cannot listen on " + printable(options_.host) + ":" +
                                                std::to_string(options_.http_port) + " (in use, or not an address here)");
  if (options_.grpc_port >= 0) {
    grpc_ = std::make_unique<GrpcFrontend>(*this);
    BH_ASSIGN_OR_RETURN(grpc_port_, grpc_->start(options_.host, options_.grpc_port, options_.http_threads,
                                                 options_.max_body_bytes));
  }
  started_ = true;
  monitor_ = std::thread([this] { monitor(); });
  return Status::ok();
}

void Server::monitor() {
  std::unique_lock lock(monitor_mu_);
  while (!monitor_cv_.wait_for(lock, std::chrono::milliseconds(kMonitorMs), [&] { return monitor_stop_; })) {
    lock.unlock();
    for (const auto& m : models())
      for (const auto& h : m.versions)
        for (const Status& st : h->check_workers()) log("error", "worker_restart_failed", h->name(), st.message());
    lock.lock();
  }
}

Status Server::serve() {
  if (!started_) return Status(StatusCode::kFailedPrecondition, "serve() before start()");
  const bool listened = http_->listen_after_bind();
  if (grpc_) {
    grpc_->shutdown();  // when HTTP stopped on its own; after stop(), already done
    grpc_->wait();
  }
  if (!listened) return Status(StatusCode::kUnavailable, "the HTTP listener stopped unexpectedly");
  return Status::ok();
}

void Server::stop() {
  if (http_) http_->stop();
  // In-flight gRPC requests finish (as HTTP ones do); new ones are refused.
  if (grpc_) grpc_->shutdown();
}

Status Server::load_model(const std::string& name) {
  std::lock_guard serial(load_mu_);
  // A failed (re)load: the model is UNAVAILABLE with the reason, unless versions loaded
  // before keep serving. Requires mu_.
  auto failed_locked = [&](const Status& st) {
    ModelState& m = models_[name];
    m.name = name;
    if (m.versions.empty()) {
      m.state = "UNAVAILABLE";
      m.reason = st.message();
    }
    return st;
  };
  auto files = model_files(options_.repository, name);
  if (!files.is_ok()) {
    // A state is kept for a folder of the repository (or a model loaded before), never for
    // any name a client asks to load.
    std::error_code ec;
    bool folder = valid_model_name(name) &&
                  std::filesystem::is_directory(std::filesystem::symlink_status(options_.repository + "/" + name, ec));
    std::lock_guard lock(mu_);
    if (folder || models_.count(name)) (void)failed_locked(files.status());
    return files.status();
  }
  {
    std::lock_guard lock(mu_);
    ModelState& m = models_[name];
    m.name = name;
    if (m.versions.empty()) m.state = "LOADING";
  }
  std::vector<std::shared_ptr<ModelHost>> hosts;
  for (const auto& [version, path] : files->versions) {
    auto h = ModelHost::load(env_, name, version, path, files->config);
    if (!h.is_ok()) {
      std::lock_guard lock(mu_);
      return failed_locked(h.status().with_context("model '" + name + "' version " + std::to_string(version) + ": "));
    }
    if (options_.check_on_load) {
      std::string verdict;
      Status st = check_version(name, version, path, files->config, (*h)->inputs(), &verdict);
      std::lock_guard lock(mu_);
      models_[name].check = verdict;
      if (!st.is_ok()) return failed_locked(st);
    }
    hosts.push_back(std::move(h).value());
  }
  std::vector<std::shared_ptr<ModelHost>> old;
  {
    std::lock_guard lock(mu_);
    ModelState& m = models_[name];
    old.swap(m.versions);
    m.versions = hosts;
    m.state = "READY";
    m.reason.clear();
  }
  for (auto& h : old) h->drain();
  if (!old.empty()) {
    old.clear();
    trim_malloc_heaps();  // as after an unload
  }
  std::string vs;
  for (auto& h : hosts) vs += (vs.empty() ? "" : ", ") + std::to_string(h->version());
  log("info", "model_ready", name, "model '" + name + "' ready (version " + vs + ", " + std::to_string(files->config.instances) + " instance(s), " +
      files->config.session.isolation + ")");
  return Status::ok();
}

Status Server::unload_model(const std::string& name) {
  std::lock_guard serial(load_mu_);
  std::vector<std::shared_ptr<ModelHost>> hosts;
  {
    std::lock_guard lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty())
      return not_found("model '" + printable(name) + "' is not loaded");
    it->second.state = "UNLOADING";
    hosts.swap(it->second.versions);
  }
  for (auto& h : hosts) h->drain();
  hosts.clear();  // the sessions go here, or with the last request still holding one
  // What they freed is spread over malloc's per-thread heaps (each load runs on whichever
  // HTTP thread took the request): give it back, so that cycles of load and unload leave
  // resident memory flat rather than at a plateau of one model per heap.
  trim_malloc_heaps();
  {
    std::lock_guard lock(mu_);
    ModelState& m = models_[name];
    m.state = "UNAVAILABLE";
    m.reason = "unloaded";
  }
  log("info", "model_unloaded", name, "model '" + name + "' unloaded");
  return Status::ok();
}

Status Server::check_version(const std::string& name, int64_t version, const std::string& path,
                             const ModelConfig& config, const std::vector<IoInfo>& inputs, std::string* verdict) const {
  const std::string where = "model '" + name + "' version " + std::to_string(version) + ": check on load";
  check::CheckOptions co;
  co.front = {path, path, ""};
  co.devices = config.session.devices;
  co.threads = 1;
  co.dims = config.check_dims;
  co.precision = config.session.precision;
  co.schedules = {"front_only", "same_process", "threads"};
  // Sample inputs beside the model, where the user left them.
  const std::string dir = options_.repository + "/" + name + "/check_inputs";
  for (const auto& io : inputs) {
    const std::string file = dir + "/" + io::safe_file_name(io.name) + ".npy";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(std::filesystem::symlink_status(file, ec))) continue;
    auto t = io::read_npy(file);
    if (!t.is_ok()) return t.status().with_context(where + ": ");
    co.inputs[io.name] = std::move(t).value();
  }
  auto report = check::run_check(co);
  if (!report.is_ok()) {
    *verdict = "error";
    return Status(StatusCode::kFailedPrecondition,
                  where + " could not run: " + report.status().message() +
                      " (give inputs in " + dir + "/<input>.npy, or sizes in config.json's check_dims)");
  }
  *verdict = report->verdict();
  if (report->exit_code() == 0) {
    log("info", "check_passed", name, where + ": clean (front_only, same_process, threads)");
    return Status::ok();
  }
  return Status(StatusCode::kFailedPrecondition,
                where + ": " + report->verdict() + ": " + report->first_bad_step() + " — the model is not served");
}

std::vector<Server::ModelState> Server::models() const {
  std::lock_guard lock(mu_);
  std::vector<ModelState> r;
  for (const auto& [n, m] : models_) r.push_back(m);
  return r;
}

Result<std::shared_ptr<ModelHost>> Server::lookup(const std::string& m, const std::string& v) const {
  std::lock_guard lock(mu_);
  auto it = models_.find(m);
  if (it == models_.end()) return not_found("unknown model '" + printable(m) + "'");
  const ModelState& s = it->second;
  if (s.versions.empty())
    return Status(s.state == "LOADING" ? StatusCode::kUnavailable : StatusCode::kNotFound,
                  "model '" + printable(m) + "' is not loaded" + (s.reason.empty() ? "" : ": " + s.reason));
  if (v.empty()) return s.versions.back();
  for (const auto& h : s.versions)
    if (std::to_string(h->version()) == v) return h;
  return not_found("model '" + printable(m) + "' has no version '" + printable(v) + "' loaded");
}

std::shared_ptr<ModelHost> Server::find(const std::string& m, const std::string& v, int* status,
                                        std::string* error) const {
  auto h = lookup(m, v);
  if (h.is_ok()) return std::move(h).value();
  *status = http_status(h.status().code());
  *error = h.status().message();
  return nullptr;
}

bool Server::ready() const {
  bool r = started_;
  for (const auto& m : models())
    for (const auto& host : m.versions) r = r && host->ready();
  return r;
}

std::vector<std::string> Server::versions(const std::string& name) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> r;
  if (auto it = models_.find(name); it != models_.end())
    for (const auto& h : it->second.versions) r.push_back(std::to_string(h->version()));
  return r;
}

std::vector<Server::IndexEntry> Server::index(bool only_ready) const {
  std::set<std::string> names;
  if (auto listed = list_models(options_.repository, nullptr); listed.is_ok()) names.insert(listed->begin(), listed->end());
  std::map<std::string, ModelState> known;
  for (auto& m : models()) {
    names.insert(m.name);
    known[m.name] = m;
  }
  std::vector<IndexEntry> index;
  for (const auto& n : names) {
    auto it = known.find(n);
    if (it == known.end()) {
      if (!only_ready) index.push_back({n, "", "UNAVAILABLE", "not loaded"});
      continue;
    }
    const ModelState& m = it->second;
    if (m.versions.empty()) {
      if (!only_ready) index.push_back({n, "", m.state, m.reason});
      continue;
    }
    for (const auto& host : m.versions) {
      bool ready = m.state == "READY" && host->ready();
      if (only_ready && !ready) continue;
      index.push_back({n, std::to_string(host->version()),
                       ready ? "READY" : (m.state == "READY" ? "UNAVAILABLE" : m.state),
                       ready ? "" : (m.reason.empty() ? "an instance is not ready" : m.reason)});
    }
  }
  return index;
}

Result<NamedTensors> Server::run(ModelHost& host, const NamedTensors& inputs,
                                 const std::vector<std::string>& outputs) const {
  auto out = host.infer(inputs, outputs);
  if (!out.is_ok() && out.status().code() != StatusCode::kResourceExhausted)
    log("error", "run_failed", host.name(), out.status().message());
  return out;
}

void Server::routes() {
  httplib::Server& h = *http_;
  h.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    reply_error(res, 500, "internal error: " + what);
  });
  h.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) reply_error(res, 404, "no such endpoint: " + req.method + " " + req.path);
    else if (res.status == 413) reply_error(res, 413, "the request body is larger than the server accepts");
    else if (res.status == 400)
      reply_error(res, 400, "the HTTP request could not be read (malformed, or a POST without Content-Length)");
    else reply_error(res, res.status, "request refused (HTTP " + std::to_string(res.status) + ")");
  });

  h.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { reply_json(res, json::object()); });
  h.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) {
    if (ready()) reply_json(res, json::object());
    else reply_error(res, 400, "not ready");
  });
  h.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"name", "bulkhead"},
                     {"version", BULKHEAD_VERSION},
                     {"extensions", {"binary_tensor_data", "model_repository"}}});
  });
  auto metadata = [this](const httplib::Request& req, httplib::Response& res) {
    int status = 0;
    std::string err;
    std::string v = req.matches.size() > 2 ? req.matches[2].str() : "";
    auto host = find(req.matches[1], v, &status, &err);
    if (!host) return reply_error(res, status, err);
    reply_json(res, {{"name", host->name()},
                     {"versions", this->versions(host->name())},
                     {"platform", "onnx"},
                     {"inputs", io_json(host->inputs())},
                     {"outputs", io_json(host->outputs())}});
  };
  h.Get(R"(/v2/models/([^/]+))", metadata);
  h.Get(R"(/v2/models/([^/]+)/versions/([^/]+))", metadata);
  auto model_ready = [this](const httplib::Request& req, httplib::Response& res) {
    int status = 0;
    std::string err;
    std::string v = req.matches.size() > 2 ? req.matches[2].str() : "";
    auto host = find(req.matches[1], v, &status, &err);
    if (!host) return reply_error(res, status == 503 ? 400 : status, err);
    bool ready = host->ready();
    reply_json(res, {{"name", host->name()}, {"ready", ready}}, ready ? 200 : 400);
  };
  h.Get(R"(/v2/models/([^/]+)/ready)", model_ready);
  h.Get(R"(/v2/models/([^/]+)/versions/([^/]+)/ready)", model_ready);
  // The body is read here rather than by cpp-httplib (whose appends of 4 KiB pieces made a
  // 16 MiB request cost ~100 ms of copying), into one buffer of the announced length from
  // the request-body cache (a large body's pages are not fresh every request), placed so
  // that the binary part after the JSON starts 64-byte aligned: numeric inputs sent with
  // the binary extension are then views of it, not copies. A body without a Content-Length
  // (chunked) is gathered in a string and its inputs copied.
  auto infer = [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    uint64_t announced = 0;
    const bool sized = parse_size(req.get_header_value("Content-Length"), &announced);
    uint64_t header_length_value = 0;
    const bool has_header_length = req.has_header("Inference-Header-Content-Length");
    const bool header_length_ok =
        has_header_length && parse_size(req.get_header_value("Inference-Header-Content-Length"), &header_length_value);
    std::shared_ptr<Buffer> held;
    size_t pad = 0;
    if (sized && announced > 0 && announced <= options_.max_body_bytes) {
      if (header_length_ok && header_length_value < announced) pad = (64 - header_length_value % 64) % 64;
      auto b = body_cache_->allocate(static_cast<size_t>(announced) + pad, 64);
      if (b.is_ok()) held = std::move(b).value();
    }
    std::string body;
    size_t got = 0;
    bool too_large = false;
    bool read = reader([&](const char* data, size_t n) {
      if (got + n > options_.max_body_bytes) {
        too_large = true;
        return false;
      }
      if (held && got + n > announced) {  // more than announced: gather in a string instead
        body.assign(static_cast<const char*>(held->data()) + pad, got);
        held.reset();
      }
      if (held) std::memcpy(static_cast<char*>(held->data()) + pad + got, data, n);
      else body.append(data, n);
      got += n;
      return true;
    });
    if (too_large || (sized && announced > options_.max_body_bytes) || res.status == 413)
      return reply_error(res, 413, "the request body is larger than the server accepts");
    if (!read) return reply_error(res, 400, "the request body could not be read");
    int status = 0;
    std::string err;
    std::string v = req.matches.size() > 2 ? req.matches[2].str() : "";
    auto host = find(req.matches[1], v, &status, &err);
    if (!host) return reply_error(res, status, err);
    std::optional<uint64_t> header_length;
    if (has_header_length) {
      if (!header_length_ok) return reply_error(res, 400, "Inference-Header-Content-Length is not a byte count");
      header_length = header_length_value;
    }
    const std::string_view view = held ? std::string_view(static_cast<const char*>(held->data()) + pad, got) : body;
    // The JSON part is parsed into a document several times its size: bounded apart from
    // the body (binary tensor bytes are copied at most once, so they may take the rest).
    const uint64_t json_bytes = header_length ? std::min<uint64_t>(*header_length, view.size()) : view.size();
    if (json_bytes > options_.max_json_bytes)
      return reply_error(res, 413, "the request's JSON is " + std::to_string(json_bytes) + " bytes, over the " +
                                       std::to_string(options_.max_json_bytes) +
                                       " the server parses: send large tensors with the binary tensor extension");
    auto parsed = parse_infer_request(view, header_length, host->inputs(), host->outputs(), {}, held);
    held.reset();  // the inputs that are views of it hold it
    body = std::string();  // the others hold their own copy
    if (!parsed.is_ok()) return reply_error(res, 400, "model '" + host->name() + "': " + parsed.status().message());
    std::vector<std::string> wanted;
    for (const auto& o : parsed->outputs) wanted.push_back(o.name);
    auto out = run(*host, parsed->inputs, wanted);
    if (!out.is_ok()) return reply_error(res, http_status(out.status().code()), out.status().message());
    auto encoded = encode_infer_response(host->name(), std::to_string(host->version()), *parsed, *out);
    if (!encoded.is_ok()) return reply_error(res, 500, encoded.status().message());
    res.status = 200;
    const size_t binary_size = encoded->binary_size();
    const bool binary = binary_size > 0;
    if (binary) res.set_header("Inference-Header-Content-Length", std::to_string(encoded->json.size()));
    // Written to the socket from the encoded JSON and the outputs' own bytes (set_content
    // would copy the whole reply, twice for the binary form).
    auto reply = std::make_shared<EncodedResponse>(std::move(encoded).value());
    const size_t total = reply->json.size() + binary_size;
    res.set_content_provider(total, binary ? "application/octet-stream" : "application/json",
                             [reply](size_t offset, size_t length, httplib::DataSink& sink) {
                               // The piece holding `offset`: the JSON, then each binary piece.
                               size_t start = 0;
                               auto write_from = [&](std::string_view piece) {
                                 while (length > 0 && offset < start + piece.size()) {
                                   const size_t at = offset - start;
                                   const size_t n = std::min(length, piece.size() - at);
                                   if (!sink.write(piece.data() + at, n)) return false;
                                   offset += n;
                                   length -= n;
                                 }
                                 start += piece.size();
                                 return true;
                               };
                               if (!write_from(reply->json)) return false;
                               for (const auto& piece : reply->pieces)
                                 if (length == 0 || !write_from(piece)) return length == 0;
                               return true;
                             });
  };
  h.Post(R"(/v2/models/([^/]+)/infer)", infer);
  h.Post(R"(/v2/models/([^/]+)/versions/([^/]+)/infer)", infer);

  h.Post("/v2/repository/index", [this](const httplib::Request& req, httplib::Response& res) {
    bool only_ready = false;
    if (!req.body.empty()) {
      json body;
      try {
        body = json::parse(req.body);
      } catch (const json::exception&) {
        return reply_error(res, 400, "the request body is not valid JSON");
      }
      if (!body.is_object()) return reply_error(res, 400, "expected a JSON object");
      if (body.contains("ready")) {
        if (!body["ready"].is_boolean()) return reply_error(res, 400, "'ready' must be true or false");
        only_ready = body["ready"].get<bool>();
      }
    }
    json index = json::array();
    for (const auto& e : this->index(only_ready)) {
      json row = {{"name", e.name}, {"state", e.state}, {"reason", e.reason}};
      if (!e.version.empty()) row["version"] = e.version;
      index.push_back(row);
    }
    reply_json(res, index);
  });
  h.Post(R"(/v2/repository/models/([^/]+)/load)", [this](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1];
    if (!valid_model_name(name)) return reply_error(res, 400, "'" + printable(name) + "' is not a valid model name");
    Status st = load_model(name);
    if (!st.is_ok()) {
      log("error", "load_failed", name, st.message());
      return reply_error(res, st.code() == StatusCode::kNotFound ? 404 : 400, st.message());
    }
    reply_json(res, json::object());
  });
  h.Post(R"(/v2/repository/models/([^/]+)/unload)", [this](const httplib::Request& req, httplib::Response& res) {
    Status st = unload_model(req.matches[1]);
    if (!st.is_ok()) return reply_error(res, http_status(st.code()), st.message());
    reply_json(res, json::object());
  });
  h.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kDashboardHtml, "text/html; charset=utf-8");
  });
  h.Get("/status.json", [this](const httplib::Request&, httplib::Response& res) {
    json models = json::array();
    bool ready = started_;
    for (const auto& m : this->models()) {
      if (m.versions.empty()) {
        models.push_back({{"name", m.name}, {"state", m.state}, {"reason", m.reason}, {"check", m.check}});
        continue;
      }
      for (const auto& host : m.versions) {
        const ModelHost::Stats st = host->stats();
        const bool r = host->ready();
        ready = ready && r;
        models.push_back({{"name", m.name},
                          {"version", std::to_string(host->version())},
                          {"state", m.state},
                          {"reason", m.reason},
                          {"ready", r},
                          {"devices", host->config().session.devices},
                          {"isolation", host->config().session.isolation},
                          {"instances", host->config().instances},
                          {"requests", st.requests},
                          {"failures", st.failures},
                          {"refused", st.refused},
                          {"waiting", st.waiting},
                          {"running", st.running},
                          {"worker_restarts", st.worker_restarts},
                          {"check", m.check}});
      }
    }
    reply_json(res, {{"name", "bulkhead"}, {"version", BULKHEAD_VERSION}, {"ready", ready}, {"models", models}});
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
}

std::string Server::metrics_text() const {
  std::ostringstream os;
  struct Row {
    std::string labels;
    ModelHost::Stats s;
  };
  std::vector<Row> rows;
  for (const auto& m : models())
    for (const auto& h : m.versions)
      rows.push_back({"model=\"" + h->name() + "\",version=\"" + std::to_string(h->version()) + "\"", h->stats()});
  auto counter = [&](const char* name, const char* help, const char* type, auto get) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    for (const auto& r : rows) os << name << "{" << r.labels << "} " << get(r.s) << "\n";
  };
  counter("bulkhead_requests_total", "Inference requests answered.", "counter",
          [](const ModelHost::Stats& s) { return s.requests; });
  counter("bulkhead_request_failures_total", "Inference requests whose run failed.", "counter",
          [](const ModelHost::Stats& s) { return s.failures; });
  counter("bulkhead_requests_refused_total", "Inference requests refused: queue full or model unloading.", "counter",
          [](const ModelHost::Stats& s) { return s.refused; });
  counter("bulkhead_queue_depth", "Requests waiting for an instance.", "gauge",
          [](const ModelHost::Stats& s) { return s.waiting; });
  counter("bulkhead_requests_running", "Requests running.", "gauge",
          [](const ModelHost::Stats& s) { return s.running; });
  counter("bulkhead_worker_restarts_total", "Worker processes replaced (process isolation).", "counter",
          [](const ModelHost::Stats& s) { return s.worker_restarts; });
  os << "# HELP bulkhead_open_devices Devices open in the server (held by a loaded model).\n"
        "# TYPE bulkhead_open_devices gauge\nbulkhead_open_devices "
     << env_.open_device_count() << "\n";
  const char* hist = "bulkhead_request_duration_milliseconds";
  os << "# HELP " << hist << " Inference request latency, waiting included.\n# TYPE " << hist << " histogram\n";
  for (const auto& r : rows) {
    uint64_t cum = 0;
    for (size_t b = 0; b < r.s.latency_buckets.size(); ++b) {
      cum += r.s.latency_buckets[b];
      std::string le = b < ModelHost::kLatencyBucketsMs.size() ? std::to_string(static_cast<int64_t>(ModelHost::kLatencyBucketsMs[b])) : "+Inf";
      os << hist << "_bucket{" << r.labels << ",le=\"" << le << "\"} " << cum << "\n";
    }
    os << hist << "_sum{" << r.labels << "} " << r.s.latency_sum_ms << "\n";
    os << hist << "_count{" << r.labels << "} " << cum << "\n";
  }
  const char* batch = "bulkhead_batch_size";
  os << "# HELP " << batch << " Requests served by one run (dynamic batching; 1 without it).\n# TYPE " << batch
     << " histogram\n";
  for (const auto& r : rows) {
    uint64_t cum = 0;
    for (size_t b = 0; b < r.s.batch_buckets.size(); ++b) {
      cum += r.s.batch_buckets[b];
      std::string le = b < ModelHost::kBatchBuckets.size() ? std::to_string(static_cast<int64_t>(ModelHost::kBatchBuckets[b])) : "+Inf";
      os << batch << "_bucket{" << r.labels << ",le=\"" << le << "\"} " << cum << "\n";
    }
    os << batch << "_sum{" << r.labels << "} " << r.s.batched_requests << "\n";
    os << batch << "_count{" << r.labels << "} " << r.s.runs << "\n";
  }
  return os.str();
}

}  // namespace bulkhead::serve
