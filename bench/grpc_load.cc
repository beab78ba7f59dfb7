// grpc_load: a gRPC load generator for `bulkhead serve --grpc-port` (bench/serve_bench.sh).
//
//   grpc_load --target 127.0.0.1:PORT --request FILE [--concurrency C] [--duration S]
//             [--max-requests N]
//
// FILE holds one serialized inference.ModelInferRequest; C client threads (each on its own
// connection, as wrk's connections are) send it back to back for S seconds (default 5) or
// until N requests (default 1,000,000) are answered, whichever comes first. Prints
//   RESULT <requests> <seconds> <p50 ms> <p99 ms> <errors>
// and the first error's status. Loopback only: a target other than 127.0.0.1 or localhost
// is refused.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "grpc_predict_v2.grpc.pb.h"

namespace {

int usage(const char* why) {
  std::fprintf(stderr, "grpc_load: %s\nusage: grpc_load --target 127.0.0.1:PORT --request FILE [--concurrency C] "
                       "[--duration S] [--max-requests N]\n", why);
  return 2;
}

bool number(const char* s, long lo, long hi, long* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (!*s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target, request_file;
  long concurrency = 1, duration = 5, max_requests = 1000000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return usage(("'" + a + "' needs a value").c_str());
    const char* v = argv[++i];
    if (a == "--target") target = v;
    else if (a == "--request") request_file = v;
    else if (a == "--concurrency") { if (!number(v, 1, 1024, &concurrency)) return usage("--concurrency: 1 to 1024"); }
    else if (a == "--duration") { if (!number(v, 1, 600, &duration)) return usage("--duration: 1 to 600 seconds"); }
    else if (a == "--max-requests") { if (!number(v, 1, 100000000, &max_requests)) return usage("--max-requests: 1 to 1e8"); }
    else return usage(("unknown option '" + a + "'").c_str());
  }
  if (target.rfind("127.0.0.1:", 0) != 0 && target.rfind("localhost:", 0) != 0)
    return usage("--target must be 127.0.0.1:PORT or localhost:PORT (load goes to loopback only)");
  std::ifstream f(request_file, std::ios::binary);
  if (!f) return usage(("cannot read --request '" + request_file + "'").c_str());
  std::stringstream bytes;
  bytes << f.rdbuf();
  inference::ModelInferRequest request;
  if (!request.ParseFromString(bytes.str())) return usage("--request is not a serialized ModelInferRequest");

  std::atomic<long> issued{0};
  std::mutex mu;
  std::vector<double> latencies;
  long errors = 0;
  std::string first_error;
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::seconds(duration);
  std::vector<std::thread> threads;
  for (long t = 0; t < concurrency; ++t) {
    threads.emplace_back([&] {
      grpc::ChannelArguments args;
      args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection of its own
      args.SetMaxReceiveMessageSize(-1);
      args.SetMaxSendMessageSize(-1);
      auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
      auto stub = inference::GRPCInferenceService::NewStub(channel);
      std::vector<double> mine;
      long my_errors = 0;
      std::string my_first;
      while (std::chrono::steady_clock::now() < until && issued.fetch_add(1) < max_requests) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        inference::ModelInferResponse response;
        const auto t0 = std::chrono::steady_clock::now();
        grpc::Status st = stub->ModelInfer(&ctx, request, &response);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (st.ok()) {
          mine.push_back(ms);
        } else if (my_errors++ == 0) {
          my_first = std::to_string(st.error_code()) + ": " + st.error_message();
        }
      }
      std::lock_guard lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
      errors += my_errors;
      if (first_error.empty()) first_error = my_first;
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    if (latencies.empty()) return 0.0;
    size_t i = static_cast<size_t>(p * static_cast<double>(latencies.size() - 1) + 0.5);
    return latencies[std::min(i, latencies.size() - 1)];
  };
  std::printf("RESULT %zu %.3f %.3f %.3f %ld\n", latencies.size(), seconds, pct(0.50), pct(0.99), errors);
  if (!first_error.empty()) std::fprintf(stderr, "grpc_load: first error: %s\n", first_error.c_str());
  return 0;
}
