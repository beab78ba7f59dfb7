#include <cstdio>
#include <iostream>

#include "bulkhead/bulkhead.hpp"
#include "cli.h"

namespace bulkhead::cli {

int fail(const std::string& cmd, const Status& s) {
  std::fprintf(stderr, "bulkhead %s: error: %s\n", cmd.c_str(), s.message().c_str());
  return 1;
}

int fail(const std::string& cmd, const std::string& message, int code) {
  std::fprintf(stderr, "bulkhead %s: error: %s\n", cmd.c_str(), message.c_str());
  return code;
}

}  // namespace bulkhead::cli

int main(int argc, char** argv) {
  CLI::App app{"bulkhead — run several ONNX models in one process without them touching each other's data"};
  app.set_version_flag("--version", std::string("bulkhead ") + bulkhead::version());
  app.require_subcommand(1);
  bulkhead::cli::add_devices(app);
  bulkhead::cli::add_run(app);
  bulkhead::cli::add_conformance(app);
  bulkhead::cli::add_demo(app);
  bulkhead::cli::add_worker(app);
  bulkhead::cli::add_check(app);
  bulkhead::cli::add_split(app);
  bulkhead::cli::add_selftest(app);
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
