#include "serve/repository.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "io/file.h"

namespace bulkhead::serve {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A real folder (not a link) at `p`.
bool is_real_dir(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_real_file(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A positive decimal version number without sign or leading zeros.
bool parse_version(const std::string& s, int64_t* v) {
  if (s.empty() || s.size() > 18 || s[0] == '0') return false;
  int64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + (c - '0');
  }
  *v = n;
  return true;
}

const char* kFields =
    "devices, threads, isolation, instances, queue_depth, request_timeout_ms, worker_timeout_ms, graph_capture, "
    "submission_policy, optimization_level, precision, versions, check_dims, max_batch_size, max_queue_delay_us";

}  // namespace

bool valid_model_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

Result<ModelConfig> parse_model_config(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    std::string what = e.what();
    return invalid_argument(where + ": not valid JSON: " + printable(what.substr(0, 200)));
  }
  if (!j.is_object()) return invalid_argument(where + ": expected a JSON object");
  ModelConfig c;
  c.session.devices = {"cpu"};
  // Session options go through SessionOptions::apply, which checks them; the others here.
  std::string spec;
  auto field_error = [&](const std::string& k, const std::string& why) {
    return invalid_argument(where + ": field '" + printable(k) + "': " + why);
  };
  auto integer = [&](const std::string& k, const json& v, int64_t lo, int64_t hi, int64_t* out) -> Status {
    if (!v.is_number_integer()) return field_error(k, "expected an integer");
    int64_t n = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
    if (n < lo || n > hi) return field_error(k, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    *out = n;
    return Status::ok();
  };
  auto string = [&](const std::string& k, const json& v, std::string* out) -> Status {
    if (!v.is_string()) return field_error(k, "expected a string");
    *out = v.get<std::string>();
    if (out->find(';') != std::string::npos || out->find('=') != std::string::npos)
      return field_error(k, "'" + printable(*out) + "' is not a valid value");
    return Status::ok();
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    int64_t n = 0;
    std::string s;
    if (k == "devices") {
      std::vector<std::string> devs;
      if (v.is_string()) {
        BH_RETURN_IF_ERROR(string(k, v, &s));
        spec += "devices=" + s + ";";
        continue;
      }
      if (!v.is_array() || v.empty()) return field_error(k, "expected a non-empty list of device names");
      for (const auto& d : v) {
        if (!d.is_string() || d.get<std::string>().empty()) return field_error(k, "expected a list of device names");
        std::string name = d.get<std::string>();
        if (name.find_first_of(",;=") != std::string::npos)
          return field_error(k, "'" + printable(name) + "' is not a device name");
        devs.push_back(name);
      }
      std::string joined;
      for (const auto& d : devs) joined += (joined.empty() ? "" : ",") + d;
      spec += "devices=" + joined + ";";
    } else if (k == "threads") {
      BH_RETURN_IF_ERROR(integer(k, v, 0, SessionOptions::kMaxThreads, &n));
      spec += "threads=" + std::to_string(n) + ";";
    } else if (k == "isolation") {
      BH_RETURN_IF_ERROR(string(k, v, &s));
      if (s != "in-process" && s != "process") return field_error(k, "expected \"in-process\" or \"process\"");
      spec += "isolation=" + s + ";";
    } else if (k == "instances") {
      BH_RETURN_IF_ERROR(integer(k, v, 1, 64, &n));
      c.instances = static_cast<int>(n);
    } else if (k == "queue_depth") {
      BH_RETURN_IF_ERROR(integer(k, v, 0, 100000, &n));
      c.queue_depth = static_cast<int>(n);
    } else if (k == "request_timeout_ms") {
      BH_RETURN_IF_ERROR(integer(k, v, 0, int64_t{86400} * 1000, &n));
      c.request_timeout_ms = n;
    } else if (k == "worker_timeout_ms") {
      BH_RETURN_IF_ERROR(integer(k, v, 1, int64_t{86400} * 1000, &n));
      spec += "worker_timeout_ms=" + std::to_string(n) + ";";
    } else if (k == "graph_capture") {
      if (!v.is_boolean()) return field_error(k, "expected true or false");
      spec += std::string("graph_capture=") + (v.get<bool>() ? "1" : "0") + ";";
    } else if (k == "submission_policy") {
      BH_RETURN_IF_ERROR(string(k, v, &s));
      spec += "submit_policy=" + s + ";";
    } else if (k == "optimization_level") {
      BH_RETURN_IF_ERROR(integer(k, v, 0, 2, &n));
      spec += "optimization_level=" + std::to_string(n) + ";";
    } else if (k == "precision") {
      BH_RETURN_IF_ERROR(string(k, v, &s));
      spec += "precision=" + s + ";";
    } else if (k == "versions") {
      if (v.is_string() && v.get<std::string>() == "latest") {
        c.versions = ModelConfig::Versions::kLatest;
      } else if (v.is_string() && v.get<std::string>() == "all") {
        c.versions = ModelConfig::Versions::kAll;
      } else if (v.is_array() && !v.empty()) {
        c.versions = ModelConfig::Versions::kListed;
        for (const auto& x : v) {
          BH_RETURN_IF_ERROR(integer(k, x, 1, INT64_MAX, &n));
          c.listed_versions.push_back(n);
        }
      } else {
        return field_error(k, "expected \"latest\", \"all\" or a list of version numbers");
      }
    } else if (k == "check_dims") {
      if (!v.is_object()) return field_error(k, "expected an object of dimension names and sizes");
      for (auto d = v.begin(); d != v.end(); ++d) {
        BH_RETURN_IF_ERROR(integer(k + "." + d.key(), d.value(), 1, 1 << 20, &n));
        c.check_dims[d.key()] = n;
      }
    } else if (k == "max_batch_size") {
      BH_RETURN_IF_ERROR(integer(k, v, 1, 4096, &n));
      c.max_batch_size = static_cast<int>(n);
    } else if (k == "max_queue_delay_us") {
      BH_RETURN_IF_ERROR(integer(k, v, 0, int64_t{10} * 1000 * 1000, &n));
      c.max_queue_delay_us = n;
    } else {
      return invalid_argument(where + ": unknown field '" + printable(k) + "' (known: " + kFields + ")");
    }
  }
  if (Status st = c.session.apply(spec); !st.is_ok()) return invalid_argument(where + ": " + st.message());
  if (Status st = c.session.validate(); !st.is_ok()) return invalid_argument(where + ": " + st.message());
  return c;
}

Result<std::vector<std::string>> list_models(const std::string& repository, std::vector<std::string>* skipped) {
  if (!is_real_dir(repository))
    return not_found("the model repository '" + printable(repository) + "' is not a folder");
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(repository, ec), end;
  if (ec) return not_found("cannot read the model repository '" + printable(repository) + "': " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return not_found("cannot read the model repository '" + printable(repository) + "': " + ec.message());
    std::string name = it->path().filename().string();
    std::string full = repository + "/" + name;
    if (!is_real_dir(full)) continue;  // files beside the models (READMEs) are not models
    if (!valid_model_name(name)) {
      if (skipped && name[0] != '.')
        skipped->push_back("folder '" + printable(name) +
                           "' skipped: a model's name is letters, digits, '_', '-' and '.'");
      continue;
    }
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<ModelFiles> model_files(const std::string& repository, const std::string& name) {
  const std::string where = "model '" + printable(name) + "'";
  if (!valid_model_name(name)) return invalid_argument(where + ": not a valid model name");
  const std::string dir = repository + "/" + name;
  if (!is_real_dir(dir)) return not_found(where + ": no folder '" + printable(dir) + "' in the repository");
  ModelFiles f;
  const std::string cfg = dir + "/config.json";
  struct stat st;
  if (::lstat(cfg.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return invalid_argument(where + ": " + printable(cfg) + " is not a regular file");
    BH_ASSIGN_OR_RETURN(std::string text, io::read_regular_file(cfg, 1 << 20, "configuration"));
    BH_ASSIGN_OR_RETURN(f.config, parse_model_config(text, where + ": " + printable(cfg)));
  }
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t v = 0;
    std::string sub = it->path().filename().string();
    if (!parse_version(sub, &v) || !is_real_dir(dir + "/" + sub)) continue;
    std::string model = dir + "/" + sub + "/model.onnx";
    if (is_real_file(model)) found.emplace_back(v, model);
  }
  if (ec) return not_found(where + ": cannot read '" + printable(dir) + "': " + ec.message());
  std::sort(found.begin(), found.end());
  if (found.empty()) return not_found(where + ": no version folder with a model.onnx (expected " + printable(dir) + "/1/model.onnx)");
  switch (f.config.versions) {
    case ModelConfig::Versions::kLatest:
      f.versions = {found.back()};
      break;
    case ModelConfig::Versions::kAll:
      f.versions = found;
      break;
    case ModelConfig::Versions::kListed:
      for (int64_t want : f.config.listed_versions) {
        auto it = std::find_if(found.begin(), found.end(), [&](const auto& p) { return p.first == want; });
        if (it == found.end())
          return not_found(where + ": " + printable(cfg) + ": field 'versions': version " + std::to_string(want) +
                           " has no " + printable(dir) + "/" + std::to_string(want) + "/model.onnx");
        if (std::find(f.versions.begin(), f.versions.end(), *it) == f.versions.end()) f.versions.push_back(*it);
      }
      std::sort(f.versions.begin(), f.versions.end());
      break;
  }
  return f;
}

}  // namespace bulkhead::serve
