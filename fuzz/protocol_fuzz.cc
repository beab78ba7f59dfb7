// libFuzzer harness: what a worker process or its supervisor may receive from a peer that
// is broken or hostile — every message decoder of the process-isolation protocol
// (isolate/protocol.h), the tensor descriptors over a shared region
// (isolate/value_transfer.h), and raw records on the socket (isolate/channel.h). Each
// must reject what is malformed with an error, never read outside its input.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bulkhead/memory.h"
#include "isolate/channel.h"
#include "isolate/protocol.h"
#include "isolate/value_transfer.h"

using namespace bulkhead;
using namespace bulkhead::isolate;

namespace {

// Seeds: one well-formed message of each kind, as the two processes send them, written
// to $BULKHEAD_FUZZ_SEEDS (scripts/fuzz.sh) before fuzzing starts.
void write_seeds(const std::string& dir) {
  auto put = [&](const std::string& name, uint8_t which, const std::string& payload) {
    std::string bytes(1, static_cast<char>(which));
    bytes += payload;
    FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
    if (!f) return;
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  };
  LoadRequest l;
  l.model = "model.onnx";
  l.options.devices = {"cpu"};
  put("load", 0, encode(l));
  ModelInfo mi;
  IoInfo io;
  io.name = "x";
  io.dtype = DataType::kFloat32;
  io.shape = {1, -1};
  io.dim_names = {"", "N"};
  io.has_shape = true;
  io.type_string = "float32[1,N]";
  mi.all_inputs = {io};
  mi.required = {true};
  mi.bindable = {true};
  mi.outputs = {io};
  mi.placement = {{"cpu:0", 3}};
  put("model_info", 1, encode(mi));
  // Descriptors of real values, packed into a region as the supervisor packs inputs.
  auto host = HostAllocator::create("seeds");
  NamedValues values;
  values.emplace_back("x", Value(Tensor::from_vector<float>(DataType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6})));
  Tensor s = Tensor::host(DataType::kString, {2});
  s.strings()[0] = "ab";
  s.strings()[1] = "";
  values.emplace_back("s", Value(s));
  values.emplace_back("seq", Value::make_sequence({Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {7})}, DataType::kInt64));
  auto packed = pack_values(values, [&](uint64_t n) { return host->allocate(n); }, "input");
  RunRequest q;
  q.outputs = {"y"};
  q.region_bytes = packed.is_ok() ? packed->region_bytes : 0;
  q.region_id = 1;
  q.values = packed.is_ok() ? packed->descriptors : "";
  put("run_request", 2, encode(q));
  RunReply a;
  a.values = q.values;
  a.region_bytes = q.region_bytes;
  a.region_id = 2;
  a.profile = {{"n", "Relu", 0.5, "float32[1] -> float32[1]"}};
  a.handled_ms = 0.75;
  put("run_reply", 3, encode(a));
  put("status", 4, encode(invalid_argument("input 'x': expected shape float32[1,N]")));
  put("values_region", 5, q.values);
  put("values_no_region", 6, q.values);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* d = std::getenv("BULKHEAD_FUZZ_SEEDS")) {
    write_seeds(d);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t which = data[0] % 8;
  std::string payload(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (which) {
    case 0: (void)decode_load_request(payload); break;
    case 1: (void)decode_model_info(payload); break;
    case 2: (void)decode_run_request(payload); break;
    case 3: (void)decode_run_reply(payload); break;
    case 4: (void)decode_status(payload); break;
    case 5:
    case 6: {
      // Descriptors over a small region of host memory, as a worker maps one.
      static auto host = HostAllocator::create("fuzz region");
      auto region = host->allocate(4096);
      if (!region.is_ok()) return 0;
      std::memset((*region)->data(), 0x5a, 4096);
      auto v = unpack_values(payload, which == 5 ? *region : nullptr, which == 5 ? 4096 : 0, "fuzz");
      if (v.is_ok())
        for (auto& [n, val] : *v) {
          // Every tensor it made must lie inside the region: touch every byte.
          volatile uint8_t sink = 0;
          auto touch = [&](const Tensor& t) {
            if (t.dtype() == DataType::kString) {
              for (int64_t i = 0; i < t.numel(); ++i) sink = sink + static_cast<uint8_t>(t.strings()[i].size());
            } else if (t.raw()) {
              for (size_t i = 0; i < t.nbytes(); ++i) sink = sink + static_cast<const uint8_t*>(t.raw())[i];
            }
          };
          if (val.is_tensor()) touch(val.tensor);
          for (auto& t : val.sequence) touch(t);
        }
      break;
    }
    case 7: {
      // One raw record on the socket, as a peer could send it.
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return 0;
      Channel rx{UniqueFd(sv[0])};
      if (payload.size() < 200000) (void)!::send(sv[1], payload.data(), payload.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      ::close(sv[1]);
      Message m;
      std::string err;
      (void)rx.recv(m, 0, &err);
      break;
    }
  }
  return 0;
}
