// JSON documents whose strings came from models (names, messages): nlohmann::json refuses
// to write invalid UTF-8, so every string and key goes through valid_utf8() first.
#pragma once

#include <nlohmann/json.hpp>

#include "common/text.h"

namespace bulkhead {

// A copy of `j` whose strings and keys are valid UTF-8 (other bytes escaped as "\xNN").
inline nlohmann::json utf8_safe(const nlohmann::json& j) {
  if (j.is_string()) return valid_utf8(j.get<std::string>());
  if (j.is_array()) {
    nlohmann::json r = nlohmann::json::array();
    for (const auto& x : j) r.push_back(utf8_safe(x));
    return r;
  }
  if (j.is_object()) {
    nlohmann::json r = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it) r[valid_utf8(it.key())] = utf8_safe(it.value());
    return r;
  }
  return j;
}

}  // namespace bulkhead
