// The model repository's layout and config.json (serve/repository.h), and ModelHost's
// queue (serve/model_host.h).
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/model_host.h"
#include "serve/repository.h"
#include "serve/server.h"
#include "support/test_util.h"

namespace bulkhead::serve {
namespace {

namespace fs = std::filesystem;

std::string config_error(const std::string& text) {
  auto r = parse_model_config(text, "model 'm': config.json");
  EXPECT_FALSE(r.is_ok()) << text;
  return r.is_ok() ? "" : r.status().message();
}

TEST(ServeConfig, EveryFieldParses) {
  auto c = parse_model_config(R"({"devices": ["cpu"], "threads": 2, "isolation": "process", "instances": 3,
      "queue_depth": 5, "request_timeout_ms": 250, "worker_timeout_ms": 9000, "graph_capture": false,
      "submission_policy": "split", "optimization_level": 1, "precision": "fp32", "versions": [1, 3],
      "max_batch_size": 8, "max_queue_delay_us": 2000})",
                              "m");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->session.threads, 2);
  EXPECT_EQ(c->session.isolation, "process");
  EXPECT_EQ(c->instances, 3);
  EXPECT_EQ(c->queue_depth, 5);
  EXPECT_EQ(c->request_timeout_ms, 250);
  EXPECT_EQ(c->session.worker_timeout_ms, 9000);
  EXPECT_FALSE(c->session.graph_capture);
  EXPECT_EQ(c->session.submit_policy, "split");
  EXPECT_EQ(c->session.optimization_level, 1);
  EXPECT_EQ(c->versions, ModelConfig::Versions::kListed);
  EXPECT_EQ(c->listed_versions, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c->max_batch_size, 8);
  EXPECT_EQ(c->max_queue_delay_us, 2000);
  auto d = parse_model_config("{}", "m");
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->instances, 1);
  EXPECT_EQ(d->versions, ModelConfig::Versions::kLatest);
  auto dims = parse_model_config(R"({"check_dims": {"N": 2, "W": 64}})", "m");
  ASSERT_TRUE(dims.is_ok());
  EXPECT_EQ(dims->check_dims.at("W"), 64);
  auto s = parse_model_config(R"({"devices": "vulkan:0,cpu"})", "m");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->session.devices, (std::vector<std::string>{"vulkan:0", "cpu"}));
}

TEST(ServeConfig, BadConfigurationsNameTheField) {
  EXPECT_NE(config_error("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(config_error("[1]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(config_error(R"({"instance": 2})").find("unknown field 'instance'"), std::string::npos);
  EXPECT_NE(config_error(R"({"instances": 0})").find("field 'instances': must be in [1, 64]"), std::string::npos);
  EXPECT_NE(config_error(R"({"instances": "2"})").find("field 'instances': expected an integer"), std::string::npos);
  EXPECT_NE(config_error(R"({"threads": 1.5})").find("field 'threads'"), std::string::npos);
  EXPECT_NE(config_error(R"({"isolation": "thread"})").find("field 'isolation'"), std::string::npos);
  EXPECT_NE(config_error(R"({"graph_capture": 1})").find("field 'graph_capture'"), std::string::npos);
  EXPECT_NE(config_error(R"({"devices": []})").find("field 'devices'"), std::string::npos);
  EXPECT_NE(config_error(R"({"devices": ["cpu;threads=9"]})").find("field 'devices'"), std::string::npos);
  EXPECT_NE(config_error(R"({"precision": "fp8"})").find("precision"), std::string::npos);
  EXPECT_NE(config_error(R"({"versions": "newest"})").find("field 'versions'"), std::string::npos);
  EXPECT_NE(config_error(R"({"versions": [0]})").find("field 'versions'"), std::string::npos);
  EXPECT_NE(config_error(R"({"queue_depth": 18446744073709551615})").find("field 'queue_depth'"), std::string::npos);
  EXPECT_NE(config_error(R"({"max_batch_size": 0})").find("field 'max_batch_size'"), std::string::npos);
  EXPECT_NE(config_error(R"({"max_queue_delay_us": -1})").find("field 'max_queue_delay_us'"), std::string::npos);
  EXPECT_NE(config_error(R"({"check_dims": {"N": 0}})").find("field 'check_dims.N'"), std::string::npos);
  EXPECT_NE(config_error(R"({"check_dims": [1]})").find("field 'check_dims'"), std::string::npos);
  // Every message starts with where it came from.
  EXPECT_EQ(config_error(R"({"x": 1})").rfind("model 'm': config.json: ", 0), 0u);
}

TEST(ServeRepository, LayoutVersionsAndHostileNames) {
  fs::path root = fs::temp_directory_path() / ("bh_repo_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto write = [](const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  };
  write(root / "a" / "1" / "model.onnx", "x");
  write(root / "a" / "3" / "model.onnx", "x");
  write(root / "a" / "02" / "model.onnx", "x");   // not a version: leading zero
  write(root / "a" / "abc" / "model.onnx", "x");  // not a version
  write(root / "b" / "config.json", R"({"versions": "all"})");
  write(root / "b" / "1" / "model.onnx", "x");
  write(root / "b" / "2" / "model.onnx", "x");
  write(root / "c" / "config.json", R"({"versions": [4]})");
  write(root / "c" / "1" / "model.onnx", "x");
  write(root / "empty" / "README", "x");
  write(root / "bad name" / "1" / "model.onnx", "x");
  write(root / ".hidden" / "1" / "model.onnx", "x");
  write(root / "notes.txt", "x");
  write(root / "outside" / "1" / "model.onnx", "x");
  fs::create_directory_symlink(root / "outside", root / "link");
  fs::create_directories(root / "d" / "1");
  fs::create_symlink(root / "outside" / "1" / "model.onnx", root / "d" / "1" / "model.onnx");

  std::vector<std::string> skipped;
  auto names = list_models(root.string(), &skipped);
  ASSERT_TRUE(names.is_ok()) << names.status().to_string();
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b", "c", "d", "empty", "outside"}));  // no link, no hidden
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("bad name"), std::string::npos);

  auto a = model_files(root.string(), "a");
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  ASSERT_EQ(a->versions.size(), 1u);
  EXPECT_EQ(a->versions[0].first, 3);  // latest
  auto b = model_files(root.string(), "b");
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->versions.size(), 2u);
  auto c = model_files(root.string(), "c");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("version 4"), std::string::npos);
  auto d = model_files(root.string(), "d");  // model.onnx is a link out of the folder
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("no version folder"), std::string::npos);
  auto e = model_files(root.string(), "empty");
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("model 'empty'"), std::string::npos);
  for (const char* hostile : {"..", "../a", "a/../b", "", ".hidden", "link/../a"}) {
    auto h = model_files(root.string(), hostile);
    EXPECT_FALSE(h.is_ok()) << hostile;
  }
  EXPECT_FALSE(model_files(root.string(), "link").is_ok());  // a link, not a folder
  EXPECT_FALSE(list_models((root / "nope").string(), nullptr).is_ok());
  fs::remove_all(root);
}

TEST(ServeLog, OneJsonObjectALineWhateverTheMessage) {
  std::string line = log_line("error", "run_failed", "m\xff", "bad\ninput \x01 'x'");
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto j = nlohmann::json::parse(line);  // valid JSON, valid UTF-8
  EXPECT_EQ(j["level"], "error");
  EXPECT_EQ(j["event"], "run_failed");
  EXPECT_EQ(j["message"], "bad\ninput \x01 'x'");
  EXPECT_EQ(line.rfind("{\"time\":\"", 0), 0u);  // time first, for people reading
  EXPECT_EQ(j["time"].get<std::string>().size(), 24u);  // 2026-12-04T21:10:00.123Z
  EXPECT_FALSE(nlohmann::json::parse(log_line("info", "x", "", "y")).contains("model"));
}

// A model whose runs take a while: a chain of element-wise ops on a large tensor.
std::string slow_model_path() {
  static const std::string path = [] {
    std::string text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (float[N] y) {
  a = Sin(x)
  b = Cos(a)
  c = Sin(b)
  y = Cos(c)
})";
    fs::path p = fs::temp_directory_path() / ("bh_slow_" + std::to_string(::getpid()) + ".onnx");
    std::ofstream(p, std::ios::binary) << test::model_text_bytes(text);
    return p.string();
  }();
  return path;
}

TEST(ServeModelHost, QueueBoundTimeLimitAndDrain) {
  Env env;
  ModelConfig c;
  c.session.threads = 1;
  c.instances = 1;
  c.queue_depth = 1;
  auto host = ModelHost::load(env, "slow", 1, slow_model_path(), c);
  ASSERT_TRUE(host.is_ok()) << host.status().to_string();
  ASSERT_TRUE((*host)->ready());
  const Tensor big = test::random_tensor({8 << 20}, 1);  // ~0.1 s per run
  const Tensor small = test::random_tensor({4}, 2);
  // Three at once on one instance with a queue of one: one runs, one waits, one is refused.
  std::atomic<int> ok{0}, refused{0}, other{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 3; ++i)
    ts.emplace_back([&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * i));
      auto r = (*host)->infer({{"x", big}}, {});
      if (r.is_ok()) ++ok;
      else if (r.status().code() == StatusCode::kResourceExhausted) ++refused;
      else ++other;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 2);
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(other.load(), 0);
  auto st = (*host)->stats();
  EXPECT_EQ(st.requests, 2u);
  EXPECT_EQ(st.refused, 1u);
  EXPECT_EQ(st.waiting + st.running, 0);

  // A bad input fails that request only.
  auto bad = (*host)->infer({{"nope", small}}, {});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("model 'slow'"), std::string::npos);
  EXPECT_TRUE((*host)->infer({{"x", small}}, {}).is_ok());

  // A request waiting past request_timeout_ms fails with kDeadlineExceeded.
  ModelConfig t = c;
  t.request_timeout_ms = 30;
  auto timed = ModelHost::load(env, "slow", 1, slow_model_path(), t);
  ASSERT_TRUE(timed.is_ok());
  std::thread first([&] { (void)(*timed)->infer({{"x", big}}, {}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto late = (*timed)->infer({{"x", big}}, {});
  first.join();
  ASSERT_FALSE(late.is_ok());
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);

  // Drain: in-flight requests finish, later ones are refused, readiness goes.
  std::thread running([&] { EXPECT_TRUE((*host)->infer({{"x", big}}, {}).is_ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  (*host)->drain();
  running.join();
  EXPECT_FALSE((*host)->ready());
  auto after = (*host)->infer({{"x", small}}, {});
  ASSERT_FALSE(after.is_ok());
  EXPECT_EQ(after.status().code(), StatusCode::kUnavailable);
}


std::string model_file(const std::string& tag, const std::string& text) {
  fs::path p = fs::temp_directory_path() / ("bh_" + tag + "_" + std::to_string(::getpid()) + ".onnx");
  std::ofstream(p, std::ios::binary) << test::model_text_bytes(text);
  return p.string();
}

TEST(ServeModelHost, DynamicBatchingAnswersEachRequestWithItsOwnRows) {
  const std::string sin_model = model_file("batch", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N, M] x) => (float[N, M] y) {
  y = Sin(x)
})");
  Env env;
  ModelConfig c;
  c.session.threads = 1;
  c.max_batch_size = 8;
  c.max_queue_delay_us = 300000;  // long: every request below arrives within it
  auto host = ModelHost::load(env, "sin", 1, sin_model, c);
  ASSERT_TRUE(host.is_ok()) << host.status().to_string();
  // Ten requests at once: rows 1 or 2, widths 4 or 5 (only equal widths batch together).
  constexpr int kRequests = 10;
  std::vector<Tensor> xs;
  for (int i = 0; i < kRequests; ++i) xs.push_back(test::random_tensor({i % 3 == 0 ? 2 : 1, i % 2 ? 5 : 4}, 10 + i));
  std::vector<Result<NamedTensors>> got(kRequests, Status(StatusCode::kInternal, "not run"));
  std::vector<std::thread> ts;
  for (int i = 0; i < kRequests; ++i) ts.emplace_back([&, i] { got[i] = (*host)->infer({{"x", xs[i]}}, {}); });
  for (auto& t : ts) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(got[i].is_ok()) << i << ": " << got[i].status().to_string();
    const Tensor& y = (*got[i])[0].second;
    ASSERT_EQ(y.shape(), xs[i].shape()) << i;
    for (int64_t k = 0; k < y.numel(); ++k) EXPECT_FLOAT_EQ(y.data<float>()[k], std::sin(xs[i].data<float>()[k])) << i;
  }
  auto st = (*host)->stats();
  EXPECT_EQ(st.requests, static_cast<uint64_t>(kRequests));
  EXPECT_EQ(st.batched_requests, static_cast<uint64_t>(kRequests));
  EXPECT_LT(st.runs, static_cast<uint64_t>(kRequests));  // some ran together
  EXPECT_GT(st.runs - st.batch_buckets[0], 0u);  // a run of more than one request
  EXPECT_EQ(st.waiting + st.running, 0);

  // More rows than max_batch_size: the client's error.
  auto big = (*host)->infer({{"x", test::random_tensor({9, 4}, 3)}}, {});
  ASSERT_FALSE(big.is_ok());
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("max_batch_size 8"), std::string::npos) << big.status().message();

  // Unloading does not wait out a batch's delay: the batch runs at once with what it has.
  ModelConfig slow = c;
  slow.max_queue_delay_us = 10 * 1000 * 1000;
  auto waiting = ModelHost::load(env, "sin", 1, sin_model, slow);
  ASSERT_TRUE(waiting.is_ok());
  const auto t0 = std::chrono::steady_clock::now();
  Result<NamedTensors> lone = Status(StatusCode::kInternal, "not run");
  std::thread alone([&] { lone = (*waiting)->infer({{"x", xs[0]}}, {}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  (*waiting)->drain();
  alone.join();
  EXPECT_TRUE(lone.is_ok()) << lone.status().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));  // not the 10 s delay

  // A model whose first dimension is not free cannot be batched: refused at load.
  const std::string fixed = model_file("fixed", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2, M] x) => (float[2, M] y) {
  y = Sin(x)
})");
  auto refused = ModelHost::load(env, "fixed", 1, fixed, c);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("max_batch_size: input 'x' has no free first dimension"),
            std::string::npos)
      << refused.status().message();
  fs::remove(sin_model);
  fs::remove(fixed);
}

}  // namespace
}  // namespace bulkhead::serve
