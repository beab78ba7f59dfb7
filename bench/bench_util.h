// Helpers shared by the C++ benchmarks in bench/: one error line and exit, and the
// process's resident memory.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace bulkhead::bench {

// "<program>: error: <msg>" on stderr, exit 1.
[[noreturn]] inline void die(const char* program, const std::string& msg) {
  std::fprintf(stderr, "%s: error: %s\n", program, msg.c_str());
  std::exit(1);
}

// This process's resident memory now (/proc/self/statm), in MiB.
inline double rss_mib() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

}  // namespace bulkhead::bench
