// The backend plugin host (I4): loading, ABI negotiation, the library's lifetime, partial
// failures and routing, with tests/plugin/hostsim.c — a C plugin whose objects are
// counted in memory the test owns (its `track` option).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include "backend/backend.h"
#include "bulkhead/bulkhead.hpp"
#include "session/env_impl.h"
#include "support/test_util.h"

namespace bulkhead {
namespace {

struct Track {  // tests/plugin/hostsim.c's HostsimTrack
  int64_t backends = 0, devices = 0, sessions = 0, kernels = 0, buffers = 0, runs = 0;
  int64_t devices_opened = 0, flushes = 0, computes = 0;
  int64_t live() const { return backends + devices + sessions + kernels + buffers + runs; }
};

const std::string kPlugin = HOSTSIM_PLUGIN;

std::string track_option(Track* t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "track=%llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(t)));
  return buf;
}

// Whether the dynamic loader still has the library open (without opening it).
bool library_loaded(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != nullptr;
}

// y = Sigmoid(Reshape(MatMul(Relu(x + b), W), [2, 3])): hostsim runs all but Sigmoid.
std::string model() {
  return test::model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[3,4] x) => (float[2,3] y)
<float[1] b = {-0.25}, float[4,2] w = {1, 2, 3, 4, -1, -2, 0.5, 0.25}, int64[2] shape = {2, 3}> {
  a = Add(x, b)
  r = Relu(a)
  m = MatMul(r, w)
  s = Reshape(m, shape)
  y = Sigmoid(s)
})");
}

// Only what hostsim runs (no fallback): failures of its kernels surface.
std::string hostsim_only_model() {
  return test::model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, float[2,3] z) => (float[2,3] y) { a = Add(x, z)  y = Relu(a) })");
}

Tensor output(const NamedTensors& outs, const std::string& name) {
  for (auto& [n, t] : outs)
    if (n == name) return t;
  return Tensor();
}

NamedTensors inputs() { return {{"x", test::random_tensor({3, 4}, 7)}}; }

Tensor run_on(const Env& env, const std::string& devices) {
  SessionOptions o;
  o.devices = {};
  for (size_t b = 0, e; b <= devices.size(); b = e + 1) {
    e = devices.find(',', b);
    if (e == std::string::npos) e = devices.size();
    o.devices.push_back(devices.substr(b, e - b));
  }
  auto s = env.load_bytes(model(), "plugin-model", o);
  if (!s.is_ok()) {
    ADD_FAILURE() << s.status().to_string();
    return Tensor();
  }
  auto r = s->run(inputs());
  if (!r.is_ok()) {
    ADD_FAILURE() << r.status().to_string();
    return Tensor();
  }
  return output(*r, "y");
}

SessionOptions on(std::vector<std::string> devices) {
  SessionOptions o;
  o.devices = std::move(devices);
  return o;
}

void expect_near(const Tensor& a, const Tensor& b) {
  ASSERT_TRUE(a.defined() && b.defined());
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-6) << i;
}

TEST(Plugin, LoadsRunsAndMatchesTheCpu) {
  Env env;
  ASSERT_TRUE(env.load_backend(kPlugin).is_ok());
  Tensor cpu = run_on(env, "cpu");
  Tensor plug = run_on(env, "hostsim,cpu");
  expect_near(plug, cpu);
  auto s = env.load_bytes(model(), "m", on({"hostsim", "cpu"}));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto placement = s->placement();
  ASSERT_EQ(placement.size(), 2u);
  EXPECT_EQ(placement[0].first, "hostsim:0");
  EXPECT_EQ(placement[0].second, 4);  // Add, Relu, MatMul, Reshape
  EXPECT_EQ(placement[1].second, 1);  // Sigmoid
}

TEST(Plugin, DevicesShowTheLibraryAbiAndWhoRegisteredIt) {
  Env env;
  ASSERT_TRUE(env.load_backend(kPlugin, "devices=2").is_ok());
  int found = 0;
  for (auto& d : env.devices()) found += d.backend == "hostsim";
  EXPECT_EQ(found, 2);
  bool seen = false;
  for (auto& [name, o] : env.backend_origins()) {
    if (name == "cpu") {
      EXPECT_EQ(o.library, "");
      EXPECT_EQ(o.registered_by, "built in");
    }
    if (name != "hostsim") continue;
    seen = true;
    EXPECT_EQ(o.library, kPlugin);
    EXPECT_EQ(o.abi_version, 1u);
    EXPECT_EQ(o.registered_by, "Env::load_backend");
    EXPECT_EQ(o.version, "1.0");
  }
  EXPECT_TRUE(seen);
}

void expect_error(const Status& s, const std::string& part) {
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
}

TEST(Plugin, BadLibrariesAreOneClearErrorAndLeaveTheEnvAsItWas) {
  Env env;
  size_t before = env.backends().size();
  expect_error(env.load_backend("/nonexistent/libbulkhead_x.so"), "cannot be loaded");
  expect_error(env.load_backend("libbulkhead_hostsim.so"), "give a path");
  expect_error(env.load_backend(""), "empty library path");
  test::TempDir dir;
  dir.write("junk.so", "not an ELF file");
  expect_error(env.load_backend(dir.file("junk.so")), "cannot be loaded");
  expect_error(env.load_backend(HOSTSIM_NO_ENTRY), "exports no bh_backend_plugin_entry");
  Status future = env.load_backend(HOSTSIM_FUTURE);
  expect_error(future, "speaks backend plugin ABI version 2; this bulkhead speaks version 1");
  expect_error(env.load_backend(kPlugin, "colour=blue"), "unknown option 'colour'");
  expect_error(env.load_backend(kPlugin, "devices=99"), "devices=99");
  EXPECT_EQ(env.backends().size(), before);
  EXPECT_FALSE(library_loaded(HOSTSIM_FUTURE));
  EXPECT_FALSE(library_loaded(HOSTSIM_NO_ENTRY));
  EXPECT_FALSE(library_loaded(kPlugin));
  // The Env still works, and the plugin loads after all that.
  ASSERT_TRUE(env.load_backend(kPlugin).is_ok());
  expect_error(env.load_backend(kPlugin), "a backend named 'hostsim' is already registered");
  expect_near(run_on(env, "hostsim,cpu"), run_on(env, "cpu"));
}

// A device of an unregistered backend finds libbulkhead_<name>.so in the search path
// (here: beside the test program); a hostile name is never turned into a path.
TEST(Plugin, ADeviceOfAnUnknownBackendIsDiscoveredInTheSearchPath) {
  Env env;
  expect_near(run_on(env, "hostsim,cpu"), run_on(env, "cpu"));
  bool seen = false;
  for (auto& [name, o] : env.backend_origins())
    if (name == "hostsim") {
      seen = true;
      EXPECT_EQ(o.registered_by.rfind("discovered in ", 0), 0u) << o.registered_by;
    }
  EXPECT_TRUE(seen);
  for (std::string bad : {"../tests/bulkhead_hostsim:0", "HOSTSIM", "a/b", "x.so"}) {
    auto s = env.load_bytes(model(), "m", on({bad}));
    ASSERT_FALSE(s.is_ok()) << bad;
    EXPECT_NE(s.status().message().find("unknown device"), std::string::npos) << s.status().to_string();
  }
}

TEST(Plugin, BuiltInBackendsCannotBeUnloaded) {
  Env env;
  expect_error(env.unload_backend("cpu"), "built in");
  expect_error(env.unload_backend("nosuch"), "no backend named 'nosuch'");
}

TEST(Plugin, UnloadStopsNewSessionsAndClosesTheLibraryAfterTheLastUser) {
  Track t;
  Session kept;
  {
    Env env;
    ASSERT_TRUE(env.load_backend(kPlugin, track_option(&t)).is_ok());
    auto s = env.load_bytes(model(), "m", on({"hostsim", "cpu"}));
    ASSERT_TRUE(s.is_ok()) << s.status().to_string();
    kept = *s;
    ASSERT_TRUE(env.unload_backend("hostsim").is_ok());
    auto again = env.load_bytes(model(), "m", on({"hostsim", "cpu"}));
    ASSERT_FALSE(again.is_ok());
    EXPECT_NE(again.status().message().find("unknown device 'hostsim'"), std::string::npos) << again.status().to_string();
  }
  // The Env is gone and the backend unloaded; the session still runs on its device.
  EXPECT_TRUE(library_loaded(kPlugin));
  EXPECT_EQ(t.devices, 1);
  auto r = kept.run(inputs());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_GT(t.computes, 0);
  kept = Session();
  EXPECT_EQ(t.live(), 0) << "devices " << t.devices << " sessions " << t.sessions << " kernels " << t.kernels
                         << " buffers " << t.buffers;
  EXPECT_FALSE(library_loaded(kPlugin));
}

TEST(Plugin, TwoSessionsShareADeviceThatGoesWithTheSecond) {
  Track t;
  Env env;
  ASSERT_TRUE(env.load_backend(kPlugin, track_option(&t)).is_ok());
  auto model_s = env.load_bytes(model(), "model", on({"hostsim", "cpu"}));
  auto draft_s = env.load_bytes(model(), "draft", on({"hostsim", "cpu"}));
  ASSERT_TRUE(model_s.is_ok() && draft_s.is_ok());
  EXPECT_EQ(t.devices_opened, 1);
  EXPECT_EQ(t.sessions, 2);
  *model_s = Session();
  EXPECT_EQ(t.devices, 1);
  ASSERT_TRUE(draft_s->run(inputs()).is_ok());
  *draft_s = Session();
  EXPECT_EQ(t.devices, 0);
  EXPECT_EQ(t.sessions, 0);
  EXPECT_EQ(t.backends, 1);  // the Env still holds the backend
  EXPECT_TRUE(library_loaded(kPlugin));
  ASSERT_TRUE(env.unload_backend("hostsim").is_ok());
  EXPECT_EQ(t.backends, 0);
  EXPECT_FALSE(library_loaded(kPlugin));
}

TEST(Plugin, ATensorKeepsItsDeviceAndLibraryAfterEverythingElseIsGone) {
  Track t;
  Tensor on_device;
  {
    Env env;
    ASSERT_TRUE(env.load_backend(kPlugin, track_option(&t)).is_ok());
    auto z = env.impl()->allocate_zeroed("hostsim:0", DataType::kFloat32, {4});
    ASSERT_TRUE(z.is_ok()) << z.status().to_string();
    on_device = *z;
    Tensor src = Tensor::from_vector<float>(DataType::kFloat32, {4}, {1, 2, 3, 4});
    ASSERT_TRUE(env.copy(src, on_device).is_ok());
  }
  EXPECT_TRUE(library_loaded(kPlugin));
  EXPECT_EQ(t.buffers, 1);
  on_device = Tensor();
  EXPECT_EQ(t.live(), 0);
  EXPECT_FALSE(library_loaded(kPlugin));
}

TEST(Plugin, AHostLoadedLibraryIsNeverClosedByBulkhead) {
  void* h = dlopen(kPlugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto entry = reinterpret_cast<Env::BackendEntry>(dlsym(h, "bh_backend_plugin_entry"));
  ASSERT_NE(entry, nullptr);
  for (int i = 0; i < 3; ++i) {
    Env env;
    ASSERT_TRUE(env.add_backend_library(entry, "the host's hostsim").is_ok());
    for (auto& [name, o] : env.backend_origins())
      if (name == "hostsim") {
        EXPECT_EQ(o.registered_by, "host (add_backend_library)");
        EXPECT_EQ(o.library, "the host's hostsim");
      }
    expect_near(run_on(env, "hostsim,cpu"), run_on(env, "cpu"));
    ASSERT_TRUE(env.unload_backend("hostsim").is_ok());
  }
  // Only the host's own reference holds it: a dlclose by bulkhead would have unloaded it.
  EXPECT_TRUE(library_loaded(kPlugin));
  dlclose(h);
  EXPECT_FALSE(library_loaded(kPlugin));
}

TEST(Plugin, TwoEnvsLoadingOneLibraryShareNothing) {
  Track a, b;
  Env e1, e2;
  ASSERT_TRUE(e1.load_backend(kPlugin, track_option(&a)).is_ok());
  ASSERT_TRUE(e2.load_backend(kPlugin, track_option(&b) + ",devices=2").is_ok());
  auto s1 = e1.load_bytes(model(), "m1", on({"hostsim", "cpu"}));
  auto s2 = e2.load_bytes(model(), "m2", on({"hostsim:1", "cpu"}));
  ASSERT_TRUE(s1.is_ok() && s2.is_ok());
  EXPECT_EQ(a.devices, 1);
  EXPECT_EQ(b.devices, 1);
  EXPECT_EQ(a.backends, 1);
  EXPECT_EQ(b.backends, 1);
  ASSERT_TRUE(e1.unload_backend("hostsim").is_ok());
  *s1 = Session();
  EXPECT_EQ(a.live(), 0);
  EXPECT_EQ(b.devices, 1);
  ASSERT_TRUE(s2->run(inputs()).is_ok());
  EXPECT_TRUE(library_loaded(kPlugin));
}

TEST(Plugin, LoadedOnAThreadThatMakesNoSessionAndReleasedOnAnother) {
  Track t;
  auto env = std::make_unique<Env>();
  std::thread([&] { ASSERT_TRUE(env->load_backend(kPlugin, track_option(&t)).is_ok()); }).join();
  auto s = env->load_bytes(model(), "m", on({"hostsim", "cpu"}));
  ASSERT_TRUE(s.is_ok());
  // Created on this thread, run from workers.
  std::vector<std::thread> workers;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    workers.emplace_back([&] {
      for (int k = 0; k < 5; ++k) ok += s->run(inputs()).is_ok();
    });
  for (auto& w : workers) w.join();
  EXPECT_EQ(ok.load(), 20);
  std::thread([&] {
    *s = Session();
    env.reset();
  }).join();
  EXPECT_EQ(t.live(), 0);
  EXPECT_FALSE(library_loaded(kPlugin));
}

TEST(Plugin, SessionsConstructedOnSeparateThreadsAtOnce) {
  Track t;
  Env env;
  ASSERT_TRUE(env.load_backend(kPlugin, track_option(&t)).is_ok());
  Tensor want = run_on(env, "cpu");
  std::vector<Session> sessions(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      auto s = env.load_bytes(model(), "m", on({"hostsim", "cpu"}));
      if (s.is_ok()) sessions[i] = *s;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(t.devices_opened, 1);  // one device, shared by the four
  EXPECT_EQ(t.sessions, 4);
  threads.clear();
  std::atomic<int> good{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      if (!sessions[i].valid()) return;
      auto r = sessions[i].run(inputs());
      if (!r.is_ok()) return;
      Tensor y = output(*r, "y");
      bool near = y.shape() == want.shape();
      for (int64_t k = 0; near && k < y.numel(); ++k) near = std::abs(y.data<float>()[k] - want.data<float>()[k]) < 1e-6;
      good += near;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 4);
}

// A failure injected at each step of initialisation, device opening, session creation
// and running leaves nothing behind, and the next load works.
TEST(Plugin, AFailureAtEveryStepLeavesNothingBehind) {
  for (std::string step : {"create_backend", "open_device", "list_ops", "open_session", "allocate", "create_kernel",
                           "begin_run", "flush"}) {
    SCOPED_TRACE(step);
    Track t;
    Track t2;  // outlives the Env: the Env's backends count into it as they go
    {
      Env env;
      Status loaded = env.load_backend(kPlugin, track_option(&t) + ",fail_at=" + step);
      Status failed = loaded;
      if (loaded.is_ok()) {
        auto s = env.load_bytes(hostsim_only_model(), "m", on({"hostsim"}));
        if (!s.is_ok()) {
          failed = s.status();
        } else {
          auto r = s->run({{"x", test::random_tensor({2, 3}, 1)}, {"z", test::random_tensor({2, 3}, 2)}});
          failed = r.is_ok() ? Status::ok() : r.status();
        }
      }
      expect_error(failed, "injected failure at " + step);
      EXPECT_EQ(t.devices + t.sessions + t.kernels + t.buffers + t.runs, 0);
      // The Env stays usable: load again (after unloading what did load) and run.
      if (loaded.is_ok()) {
        ASSERT_TRUE(env.unload_backend("hostsim").is_ok());
      }
      ASSERT_TRUE(env.load_backend(kPlugin, track_option(&t2)).is_ok());
      expect_near(run_on(env, "hostsim,cpu"), run_on(env, "cpu"));
    }
    EXPECT_EQ(t.live(), 0);
    EXPECT_EQ(t2.live(), 0);
    EXPECT_FALSE(library_loaded(kPlugin));
  }
}

long resident_kib() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, rss = 0;
  f >> pages >> rss;
  return rss * 4;
}

TEST(Plugin, UnloadAndReloadFiftyTimesWithResidentMemoryFlat) {
  Env env;
  long at10 = 0;
  for (int i = 0; i < 50; ++i) {
    Track t;
    ASSERT_TRUE(env.load_backend(kPlugin, track_option(&t)).is_ok()) << i;
    {
      auto s = env.load_bytes(model(), "m", on({"hostsim", "cpu"}));
      ASSERT_TRUE(s.is_ok());
      ASSERT_TRUE(s->run(inputs()).is_ok());
    }
    ASSERT_TRUE(env.unload_backend("hostsim").is_ok());
    ASSERT_EQ(t.live(), 0) << i;
    ASSERT_FALSE(library_loaded(kPlugin)) << i;
    if (i == 9) at10 = resident_kib();
  }
  long growth = resident_kib() - at10;
  std::printf("resident growth over 40 reloads: %ld KiB\n", growth);
#if !defined(BULKHEAD_SANITIZE_ADDRESS) && !defined(BULKHEAD_SANITIZE_THREAD)
  EXPECT_LT(growth, 2048);
#endif
}

// Process-level copies between every pair of domains, and a route between two plugin
// devices (no transfer of their own) staged through the host.
TEST(Plugin, CopiesBetweenEveryPairOfDomains) {
  Env env;
  ASSERT_TRUE(env.load_backend(kPlugin, "devices=2").is_ok());
  Tensor src = test::random_tensor({5, 3}, 3);
  auto a = env.impl()->allocate_zeroed("hostsim:0", DataType::kFloat32, {5, 3});
  auto b = env.impl()->allocate_zeroed("hostsim:1", DataType::kFloat32, {5, 3});
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_NE(a->domain(), b->domain());
  ASSERT_TRUE(env.copy(src, *a).is_ok());
  ASSERT_TRUE(env.copy(*a, *b).is_ok());  // hostsim:0 → host → hostsim:1
  EXPECT_EQ(env.impl()->router()->route_name(a->domain(), b->domain()), "hostsim:0 → host → hostsim:1");
  Tensor back = Tensor::host(DataType::kFloat32, {5, 3});
  ASSERT_TRUE(env.copy(*b, back).is_ok());
  EXPECT_TRUE(test::bitwise_equal(back, src));
  // A device whose transfers are gone: the error names both domains.
  Domain gone = a->domain();
  gone.id = Domain::new_id();
  std::string msg = env.impl()->router()->can_copy(gone, b->domain()) ? "" : "no route";
  EXPECT_EQ(msg, "no route");
}

}  // namespace
}  // namespace bulkhead
