#include <cstdio>

#include "backend/backend.h"
#include "bulkhead/bulkhead.hpp"
#include "cli.h"
#include "session/env_impl.h"

namespace bulkhead::cli {

void add_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "List backends and devices, with driver versions and submission policies");
  cmd->callback([]() {
    Env env;
    auto devs = env.devices();  // first: it finds the plugins of the search path
    std::printf("%-10s %-4s %s\n", "backend", "abi", "library (version) — registered by");
    for (auto& [name, o] : env.backend_origins())
      std::printf("%-10s %-4s %s%s — %s\n", name.c_str(), o.abi_version ? std::to_string(o.abi_version).c_str() : "-",
                  o.library.empty() ? "(built in)" : o.library.c_str(),
                  o.version.empty() ? "" : (" (" + o.version + ")").c_str(), o.registered_by.c_str());
    for (auto& e : env.impl()->load_errors()) std::printf("(not loaded) %s\n", e.c_str());
    std::printf("\n");
    std::printf("%-10s %-50s %-16s %s\n", "device", "name", "driver", "submission policy");
    for (auto& d : devs)
      std::printf("%-10s %-50s %-16s %s\n", (d.backend + ":" + std::to_string(d.ordinal)).c_str(), d.name.c_str(),
                  d.driver.c_str(), d.submit_policy.c_str());
    for (auto& d : devs)
      if (d.backend == "cpu")
        std::printf("%s:%d bf16 units: %s\n", d.backend.c_str(), d.ordinal,
                    d.bf16_units.empty() ? "none (precision bf16 runs fp32 here)" : d.bf16_units.c_str());
    std::printf("%zu device(s); backends: ", devs.size());
    for (auto& b : env.backends()) std::printf("%s ", b.c_str());
    std::printf("\n");
  });
}

}  // namespace bulkhead::cli
