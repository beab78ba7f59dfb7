// Subcommands of the `bulkhead` program. Each returns the process exit code and prints
// errors as one line on stderr: "bulkhead <cmd>: error: <what>".
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "bulkhead/status.h"
#include "common/text.h"

namespace bulkhead::check {
struct CheckReport;
}

namespace bulkhead::cli {

void add_devices(CLI::App& app);
void add_run(CLI::App& app);
void add_conformance(CLI::App& app);
void add_demo(CLI::App& app);
void add_worker(CLI::App& app);  // hidden: process isolation's worker
void add_check(CLI::App& app);
void add_split(CLI::App& app);
void add_selftest(CLI::App& app);
void add_quantize(CLI::App& app);
void add_serve(CLI::App& app);

// The verdict table of a check report, one line per schedule (check and demo).
void print_check_table(const check::CheckReport& r, bool with_header);

// Prints "bulkhead <cmd>: error: <message>" (non-printable bytes escaped) and returns
// `code`, the exit code.
int fail(const std::string& cmd, const Status& s, int code = 1);
int fail(const std::string& cmd, const std::string& message, int code = 1);

}  // namespace bulkhead::cli
