// libFuzzer harness: arbitrary bytes as an ONNX model through the importer and bulkhead's
// shape and type inference (ir/onnx_import.h, ir/infer.h). Any crash, hang or sanitizer
// report is a bug: a corrupt model must be one clear error.
#include <cstddef>
#include <cstdint>

#include "ir/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = bulkhead::ir::load_model_from_bytes(data, size, "fuzz.onnx", bulkhead::ir::DataFolder{});
  (void)m;
  return 0;
}
