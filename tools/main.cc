#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "cli.h"
#include "common/text.h"
#include "io/file_set.h"

namespace bulkhead::cli {

// Every error line goes through here: bytes from a model or a user that would steer the
// terminal (control bytes, invalid UTF-8) are printed escaped.
int fail(const std::string& cmd, const std::string& message, int code) {
  std::string line = printable(message);
  std::fprintf(stderr, "bulkhead %s: error: %s\n", cmd.c_str(), line.c_str());
  return code;
}

int fail(const std::string& cmd, const Status& s, int code) { return fail(cmd, s.message(), code); }

}  // namespace bulkhead::cli

namespace {

// --backend-lib PATH (repeatable, before or after the command): each library is loaded
// once here so that a bad one is one clear error, then named in BULKHEAD_BACKEND_LIBS so
// that every Env of the command — and its worker processes — loads it.
int take_backend_libs(int argc, char** argv) {
  std::string libs;
  if (const char* e = std::getenv("BULKHEAD_BACKEND_LIBS")) libs = e;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], path;
    if (a == "--backend-lib" && i + 1 < argc) path = argv[++i];
    else if (a.rfind("--backend-lib=", 0) == 0) path = a.substr(14);
    else continue;
    if (path.find(':') != std::string::npos)
      return bulkhead::cli::fail("--backend-lib", "'" + path + "': a library path may not contain ':'", 2);
    bulkhead::Env probe;
    if (auto st = probe.load_backend(path); !st.is_ok()) return bulkhead::cli::fail("--backend-lib", st, 2);
    // Absolute, so that worker processes (isolation "process") load the same file.
    std::error_code ec;
    std::string abs = std::filesystem::absolute(path, ec).string();
    libs += (libs.empty() ? "" : ":") + (ec ? path : abs);
  }
  if (!libs.empty()) setenv("BULKHEAD_BACKEND_LIBS", libs.c_str(), 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Outputs are written all or nothing, even when the process is told to end mid-write.
  bulkhead::io::remove_temporaries_on_signals();
  if (int rc = take_backend_libs(argc, argv)) return rc;
  CLI::App app{"bulkhead — run several ONNX models in one process without them touching each other's data"};
  app.set_version_flag("--version", std::string("bulkhead ") + bulkhead::version());
  std::vector<std::string> backend_libs;  // taken above; declared here for --help and parsing
  app.add_option("--backend-lib", backend_libs, "Load a backend plugin library (a path; repeatable; also BULKHEAD_BACKEND_LIBS)");
  app.fallthrough();
  app.require_subcommand(1);
  bulkhead::cli::add_devices(app);
  bulkhead::cli::add_run(app);
  bulkhead::cli::add_conformance(app);
  bulkhead::cli::add_demo(app);
  bulkhead::cli::add_worker(app);
  bulkhead::cli::add_check(app);
  bulkhead::cli::add_split(app);
  bulkhead::cli::add_selftest(app);
  bulkhead::cli::add_quantize(app);
  bulkhead::cli::add_serve(app);
  // An unknown command is named as such (CLI11 would say "A subcommand is required").
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    std::string names;
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      known |= sub->check_name(argv[1]);
      if (!sub->get_group().empty()) names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "bulkhead: error: unknown command '%s' (commands: %s; see bulkhead --help)\n",
                   bulkhead::printable(argv[1]).c_str(), names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    std::fprintf(stderr, "bulkhead: error: %s (see bulkhead --help)\n", msg.c_str());
    // `check` reserves exit code 2 for "contamination found"; its usage errors are 1.
    return argc > 1 && std::string(argv[1]) == "check" ? 1 : 2;
  }
  return 0;
}
