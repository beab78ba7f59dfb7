// The `faulty` backend: a test instrument that reproduces the four field failures
// (FIELD-REPORTS.md A-D) on purpose and deterministically, one device per fault, so that
// `bulkhead check` and the tests can prove they catch each one. Registered in every Env
// but never chosen unless a session names it ("faulty:shared-scratch" or "faulty:1").
//
// It runs the CPU backend's kernels, obtained through the Backend interface. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace bulkhead {

struct FaultyOptions {
  std::string name = "faulty";  // the backend's name in device specs
  int dropped_dispatch = 6;     // dropped-dependency: the dispatch (1-based) whose consumer loses its barrier
};

std::shared_ptr<Backend> make_faulty_backend(FaultyOptions options = {});

}  // namespace bulkhead
