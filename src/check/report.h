// Writes a CheckReport as JSON, as a self-contained HTML page (tables and inline SVG
// charts, no scripts or external files), and as a repro bundle folder. Every file is
// written atomically (temporary file + rename): an interrupted check never leaves a
// half-written report. Thread-compatible: one writer per report.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "check/check.h"

namespace bulkhead::check {

nlohmann::json report_json(const CheckReport& r);
std::string report_html(const CheckReport& r);

// The repro bundle: manifest.json (SHA-256 of models and inputs, options, backend,
// driver and runtime versions, machine), models/, inputs/, outputs/<schedule>/<step>/,
// expected.md and rerun.sh (the one command that re-runs the check from the bundle).
Status write_bundle(const CheckReport& r, const std::string& dir);

// Writes report.json, report.html and bundle/ into `dir` (created if missing).
Status write_report(const CheckReport& r, const std::string& dir);

}  // namespace bulkhead::check
