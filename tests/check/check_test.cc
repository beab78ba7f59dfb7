// The isolation checker: its hashes and metrics, the model splitter, the schedules on the
// CPU (clean) and on the faulty backend (each fault caught at the right step), and the
// report files.
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "check/check.h"
#include "check/metrics.h"
#include "check/report.h"
#include "check/sha256.h"
#include "check/split.h"
#include "onnx/onnx_pb.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

using check::CheckOptions;
using check::CheckReport;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(check::sha256_hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(check::sha256_hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(check::sha256_hex(two_blocks.data(), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  check::Sha256 h;  // in uneven pieces, to exercise the block buffer
  for (size_t i = 0; i < million.size(); i += 777) h.update(million.data() + i, std::min<size_t>(777, million.size() - i));
  EXPECT_EQ(h.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Metrics, IdenticalNanZeroAndShape) {
  Tensor a = Tensor::from_vector<float>(DataType::kFloat32, {4}, {1, -2, 3, 4});
  auto m = check::compare(a, a.clone_host());
  EXPECT_EQ(m.max_abs, 0);
  EXPECT_DOUBLE_EQ(m.cosine, 1);
  EXPECT_TRUE(std::isinf(m.psnr) && m.psnr > 0);
  EXPECT_EQ(m.ref_max_abs, 4);

  Tensor n = Tensor::from_vector<float>(DataType::kFloat32, {4}, {NAN, -2, 0, 4});
  m = check::compare(n, a);
  EXPECT_EQ(m.nonfinite_mismatch, 1);
  EXPECT_DOUBLE_EQ(m.nan_frac, 0.25);
  EXPECT_DOUBLE_EQ(m.zero_frac, 0.25);
  EXPECT_DOUBLE_EQ(m.max_abs, 3);  // over the finite pairs

  Tensor z = Tensor::from_vector<float>(DataType::kFloat32, {4}, {0, 0, 0, 0});
  m = check::compare(z, a);
  EXPECT_EQ(m.cosine, 0);
  EXPECT_DOUBLE_EQ(m.zero_frac, 1);

  m = check::compare(Tensor::host(DataType::kFloat32, {2, 2}), a);
  EXPECT_TRUE(m.shape_mismatch);

  Tensor i = Tensor::from_vector<int64_t>(DataType::kInt64, {3}, {1, 5, 7});
  Tensor j = Tensor::from_vector<int64_t>(DataType::kInt64, {3}, {1, 5, 8});
  EXPECT_EQ(check::compare(i, j).max_abs, 1);
  EXPECT_NE(check::tensor_hash(i), check::tensor_hash(j));
  EXPECT_EQ(check::tensor_hash(i), check::tensor_hash(i.clone_host()));
}

// The built-in pipeline: F and G as files.
class Pipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = demo::pipeline_front_bytes();
    auto g = demo::pipeline_back_bytes();
    ASSERT_TRUE(f.is_ok() && g.is_ok());
    dir_.write("F.onnx", *f);
    dir_.write("G.onnx", *g);
  }
  CheckOptions options(const std::string& device, std::vector<std::string> schedules = {}) {
    CheckOptions o;
    o.front = {"F.onnx", dir_.file("F.onnx"), ""};
    o.back = check::ModelSource{"G.onnx", dir_.file("G.onnx"), ""};
    o.devices = {device};
    o.worker_binary = BULKHEAD_BINARY;
    o.thread_iterations = 3;
    o.schedules = std::move(schedules);
    return o;
  }
  TempDir dir_;
};

std::vector<std::string> in_process_schedules() {
  return {"front_only", "back_only", "same_process", "order_after_g", "threads", "recover", "pipeline"};
}

TEST_F(Pipeline, CpuIsClean) {
  auto r = check::run_check(options("cpu", in_process_schedules()));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->exit_code(), 0) << r->first_bad_step();
  EXPECT_EQ(r->schedules.size(), 7u);
  for (auto& s : r->schedules) {
    EXPECT_TRUE(s.clean()) << s.name << " " << s.error;
    EXPECT_FALSE(s.steps.empty()) << s.name;
    for (auto& st : s.steps) {
      EXPECT_TRUE(st.ran) << st.error;
      EXPECT_TRUE(st.inputs_unchanged);
      for (auto& o : st.outputs) EXPECT_LE(o.metrics.max_abs, o.tolerance) << s.name << "/" << st.label << "/" << o.name;
    }
  }
  // Inputs alternate: variant B differs from A, so the references differ too.
  EXPECT_NE(check::tensor_hash(r->inputs[0][0].second), check::tensor_hash(r->inputs[1][0].second));
}

// Each planted fault of the `faulty` backend is caught, at the step where the field saw it.
struct FaultCase {
  const char* device;
  const char* schedule;
  const char* step;
};

TEST_F(Pipeline, EveryFaultIsCaughtAtItsFirstBadStep) {
  const FaultCase cases[] = {
      {"faulty:shared-scratch", "same_process", "F3"},   // G's run poisons F's later runs (report A)
      {"faulty:global-slot", "same_process", "F2"},      // creating G redirects F (report B)
      {"faulty:dropped-dependency", "front_only", "F1"}, // a consumer reads zeros (report C)
      {"faulty:stale-replay", "recover", "F'1"},         // a re-created F replays the old F's capture (report D)
  };
  for (const auto& c : cases) {
    auto r = check::run_check(options(c.device, in_process_schedules()));
    ASSERT_TRUE(r.is_ok()) << c.device << ": " << r.status().to_string();
    EXPECT_EQ(r->exit_code(), 2) << c.device;
    EXPECT_EQ(r->verdict(), "contaminated") << c.device;
    std::string want = std::string(c.schedule) + "/" + c.step + ":";
    EXPECT_EQ(r->first_bad_step().rfind(want, 0), 0u) << c.device << ": " << r->first_bad_step();
  }
  auto none = check::run_check(options("faulty:none", in_process_schedules()));
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none->exit_code(), 0) << none->first_bad_step();
}

TEST_F(Pipeline, SharedScratchIsOneWayAndCrossProcessIsClean) {
  auto r = check::run_check(options("faulty:shared-scratch", {"front_only", "back_only", "same_process", "cross_process"}));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->schedules.size(), 4u);
  EXPECT_TRUE(r->schedules[0].clean());  // F alone
  EXPECT_TRUE(r->schedules[1].clean());  // G alone
  EXPECT_TRUE(r->schedules[3].clean()) << r->schedules[3].error;  // F and G in separate worker processes
  const auto& sp = r->schedules[2].steps;
  ASSERT_EQ(sp.size(), 5u);
  // F1 F2 G1 clean; F3 poisoned; G2 (G's own data) clean.
  EXPECT_TRUE(sp[0].clean && sp[1].clean && sp[2].clean);
  EXPECT_FALSE(sp[3].clean);
  EXPECT_TRUE(sp[4].clean);
}

TEST_F(Pipeline, CpuCrossProcessIsClean) {
  auto r = check::run_check(options("cpu", {"cross_process"}));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->exit_code(), 0) << r->schedules[0].error << r->first_bad_step();
  EXPECT_EQ(r->schedules[0].steps.size(), 4u);
}

TEST_F(Pipeline, CommandLineExitCodes) {
  auto sh = [&](const std::string& args) {
    std::string cmd = "cd " + dir_.path() + " && " + BULKHEAD_BINARY + " check " + args + " >out.txt 2>err.txt";
    int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  EXPECT_EQ(sh("--pipeline F.onnx G.onnx --schedules front_only,same_process --no-report"), 0);
  EXPECT_EQ(sh("--pipeline F.onnx G.onnx -d faulty:shared-scratch --schedules same_process --report rep"), 2);
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_.file("rep/report.html")));
  std::ifstream out(dir_.file("out.txt"));
  std::stringstream ss;
  ss << out.rdbuf();
  EXPECT_NE(ss.str().find("verdict: contaminated"), std::string::npos) << ss.str();
  EXPECT_NE(ss.str().find("same_process/F3"), std::string::npos) << ss.str();
  // Errors: 1, one line.
  EXPECT_EQ(sh("missing.onnx"), 1);
  EXPECT_EQ(sh("--pipeline F.onnx G.onnx --schedules bogus"), 1);
  EXPECT_EQ(sh("--pipeline F.onnx G.onnx -d nosuch"), 1);
  EXPECT_EQ(sh("--pipeline F.onnx G.onnx --threads 0"), 1);
  EXPECT_EQ(sh("--pipeline F.onnx G.onnx --input image=nothere.npy"), 1);
  EXPECT_EQ(sh("--pipeline F.onnx G.onnx --no-such-flag"), 1);
  std::ifstream err(dir_.file("err.txt"));
  std::stringstream es;
  es << err.rdbuf();
  std::string e = es.str();
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1) << e;
}

TEST_F(Pipeline, SingleModelTwoSessionsIsClean) {
  auto o = options("cpu", {"front_only", "same_process", "threads", "recover"});
  o.back.reset();
  auto r = check::run_check(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->exit_code(), 0) << r->first_bad_step();
  EXPECT_FALSE(r->pipeline);
}

TEST_F(Pipeline, BadOptionsAreErrors) {
  auto o = options("cpu", {"no_such_schedule"});
  auto r = check::run_check(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unknown schedule 'no_such_schedule'"), std::string::npos);

  o = options("cpu", {"front_only"});
  o.inputs["nope"] = Tensor::host(DataType::kFloat32, {1});
  r = check::run_check(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unknown input 'nope'"), std::string::npos);

  // A device list that cannot host the model is one error before any schedule runs.
  o = options("nosuchdevice", {"front_only"});
  r = check::run_check(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("unknown device 'nosuchdevice'"), std::string::npos) << r.status().message();
}

// Bad input is never contamination: the report's --dim cases end with exit 1 and one
// line naming the problem (N = 2^62 ended "contaminated", N = 10^12 with bad_alloc).
TEST_F(Pipeline, BadDimensionsAreErrorsNotContamination) {
  dir_.write("sym.onnx", model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,4] x) => (float[N,4] y) { y = Relu(x) })"));
  struct Case {
    std::string args;
    int code;
    std::string expect;
  };
  for (const Case& c : {Case{"--dim N=4611686018427387904", 1, "is too large: its size overflows 64 bits"},
                        Case{"--dim N=1000000000000", 1, "more than the 2.0 GiB bulkhead generates for one input"},
                        Case{"--dim NOPE=3", 1, "no input of 'sym.onnx' has a dimension named 'NOPE' (its symbolic dimensions are: N)"},
                        Case{"--dim N=3x", 1, "bad --dim 'N=3x'"},
                        Case{"--dim N=0", 1, "bad --dim 'N=0'"},
                        Case{"--dim N=5 --dim N=6", 1, "--dim N given twice"},
                        Case{"--dim N=5", 0, ""}}) {
    std::string cmd = "cd " + dir_.path() + " && " + BULKHEAD_BINARY + " check sym.onnx --schedules front_only,same_process --no-report " +
                      c.args + " >out.txt 2>err.txt";
    int st = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(st)) << c.args;
    EXPECT_EQ(WEXITSTATUS(st), c.code) << c.args;
    std::ifstream ef(dir_.file("err.txt"));
    std::stringstream es;
    es << ef.rdbuf();
    std::string e = es.str();
    if (c.code == 0) {
      EXPECT_TRUE(e.empty()) << c.args << ": " << e;
    } else {
      EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1) << c.args << ": " << e;
      EXPECT_NE(e.find(c.expect), std::string::npos) << c.args << ": " << e;
    }
  }
}

// Names from a hostile model reach the report as data: JSON stays valid UTF-8, HTML is
// escaped, rerun.sh quotes them (running it executes nothing from the name), and a model's
// external data goes into the bundle so that the bundle re-runs.
TEST_F(Pipeline, HostileNamesAndExternalDataInTheReport) {
  const std::string evil_in = "X'$(touch " + dir_.file("OWNED") + ")'<b>";
  const std::string bad_utf8 = "y\xff\xfe<script>";
  onnx::ModelProto mp;
  mp.set_ir_version(8);
  mp.add_opset_import()->set_version(17);
  auto* g = mp.mutable_graph();
  g->set_name("evil");
  auto value = [](onnx::ValueInfoProto* v, const std::string& name) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(4);
  };
  value(g->add_input(), evil_in);
  value(g->add_output(), bad_utf8);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("data/w.bin");
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input(evil_in);
  n->add_input("w");
  n->add_output(bad_utf8);
  std::string bytes;
  mp.SerializeToString(&bytes);
  std::filesystem::create_directories(dir_.file("evil/data"));
  dir_.write("evil/model.onnx", bytes);
  float wv[4] = {1, 2, 3, 4};
  dir_.write("evil/data/w.bin", std::string(reinterpret_cast<const char*>(wv), sizeof wv));

  CheckOptions o;
  o.front = {"model.onnx", dir_.file("evil/model.onnx"), ""};
  o.schedules = {"front_only", "same_process"};
  auto r = check::run_check(o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->exit_code(), 0) << r->first_bad_step();
  const std::string out = dir_.file("report");
  ASSERT_TRUE(check::write_report(*r, out).is_ok());

  std::ifstream jf(out + "/report.json");
  auto j = nlohmann::json::parse(jf);  // throws on invalid UTF-8 or a half-written file
  EXPECT_EQ(j["front"]["outputs"][0], "y\\xFF\\xFE<script>");
  std::ifstream hf(out + "/report.html");
  std::stringstream hs;
  hs << hf.rdbuf();
  EXPECT_EQ(hs.str().find("<script>"), std::string::npos);
  EXPECT_NE(hs.str().find("&lt;script&gt;"), std::string::npos);

  const std::string b = out + "/bundle";
  EXPECT_TRUE(std::filesystem::is_regular_file(b + "/models/F/data/w.bin")) << "external data is bundled";
  std::string cmd = "cd " + b + " && BULKHEAD=" + BULKHEAD_BINARY + " ./rerun.sh >rerun.out 2>&1";
  int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("OWNED"))) << "rerun.sh ran a command from an input name";

  // A folder that is not an earlier report is never replaced, and a failed write leaves
  // nothing: the user's folder is untouched.
  std::filesystem::create_directories(dir_.file("mine"));
  dir_.write("mine/notes.txt", "mine");
  Status s = check::write_report(*r, dir_.file("mine"));
  EXPECT_FALSE(s.is_ok());
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_.file("mine/notes.txt")));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("mine/report.json")));
  // An earlier report is replaced whole.
  ASSERT_TRUE(check::write_report(*r, out).is_ok());
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_.path())) entries += e.path().filename().string().rfind("report.", 0) == 0;
  EXPECT_EQ(entries, 0) << "no report.tmp.* or report.old.* folder stays";
}

// Checks that `html` is well-formed XML-style markup (every tag closed, in order).
void expect_well_formed(const std::string& html) {
  std::vector<std::string> stack;
  size_t p = html.find("<html");
  ASSERT_NE(p, std::string::npos);
  std::regex tag(R"(<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>)");
  std::string body = html.substr(p);
  for (auto it = std::sregex_iterator(body.begin(), body.end(), tag); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    if (m[3] == "/") continue;
    if (m[1] == "/") {
      ASSERT_FALSE(stack.empty()) << "stray </" << m[2] << ">";
      ASSERT_EQ(stack.back(), m[2].str()) << "mismatched </" << m[2] << ">";
      stack.pop_back();
    } else {
      stack.push_back(m[2]);
    }
  }
  EXPECT_TRUE(stack.empty()) << "unclosed <" << (stack.empty() ? "" : stack.back()) << ">";
  EXPECT_EQ(html.find("&&"), std::string::npos);
}

TEST_F(Pipeline, ReportJsonHtmlAndBundle) {
  auto r = check::run_check(options("cpu", {"front_only", "same_process", "pipeline"}));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  std::string out = dir_.file("report");
  ASSERT_TRUE(check::write_report(*r, out).is_ok());

  std::ifstream jf(out + "/report.json");
  auto j = nlohmann::json::parse(jf);
  EXPECT_EQ(j["verdict"], "clean");
  ASSERT_EQ(j["schedules"].size(), 3u);
  EXPECT_EQ(j["schedules"][1]["name"], "same_process");
  EXPECT_EQ(j["schedules"][1]["steps"].size(), 5u);
  for (const char* k : {"max_abs", "rmse", "cosine", "psnr_db", "nan_fraction", "inf_fraction", "zero_fraction", "sha256", "tolerance"})
    EXPECT_TRUE(j["schedules"][0]["steps"][0]["outputs"][0].contains(k)) << k;

  std::ifstream hf(out + "/report.html");
  std::stringstream hs;
  hs << hf.rdbuf();
  std::string html = hs.str();
  expect_well_formed(html);
  size_t charts = 0;
  for (size_t p = html.find("<svg class=\"chart\""); p != std::string::npos; p = html.find("<svg class=\"chart\"", p + 1)) ++charts;
  EXPECT_EQ(charts, 3u);
  // Each chart is wide enough for its title (about 7 px a character at 12 px: titles were
  // cut at the chart's edge) and tall enough for its rotated step labels.
  std::regex svg_re(R"re(<svg class="chart"[^>]* width="(\d+)" height="(\d+)"[^>]*><text[^>]*>([^<]*)</text>)re");
  int sized = 0;
  for (std::sregex_iterator it(html.begin(), html.end(), svg_re), end; it != end; ++it, ++sized) {
    EXPECT_GE(std::stoi((*it)[1]), 7 * static_cast<int>((*it)[3].length())) << (*it)[3];
    EXPECT_GE(std::stoi((*it)[2]), 24 + 180 + 70);
  }
  EXPECT_EQ(sized, 3);
  // An exact match says so, not "PSNR 999.0" (and "inf" in the JSON).
  EXPECT_EQ(html.find(">999.0<"), std::string::npos);
  EXPECT_NE(html.find(">exact<"), std::string::npos);
  EXPECT_EQ(j["schedules"][0]["steps"][0]["outputs"][0]["psnr_db"], "inf");

  std::string b = out + "/bundle";
  for (const char* f : {"manifest.json", "expected.md", "rerun.sh", "models/F/model.onnx", "models/G/model.onnx", "inputs/A/image.npy",
                        "inputs/B/image.npy", "outputs/same_process/F3/main.npy", "outputs/pipeline/F1-to-G/probs.npy"})
    EXPECT_TRUE(std::filesystem::is_regular_file(b + "/" + f)) << f;
  std::ifstream mf(b + "/manifest.json");
  auto m = nlohmann::json::parse(mf);
  EXPECT_EQ(m["models"]["F"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(m["inputs"]["A"]["image"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_NE(m["command"].get<std::string>().find("check --pipeline models/F/model.onnx models/G/model.onnx"), std::string::npos);
  EXPECT_FALSE(m["machine"].get<std::string>().empty());

  // The bundle re-runs: same verdict from the bundled files.
  std::string cmd = "cd " + b + " && BULKHEAD=" + BULKHEAD_BINARY + " ./rerun.sh >/dev/null 2>&1";
  int st = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd;
  EXPECT_TRUE(std::filesystem::is_regular_file(b + "/rerun-report/report.json"));
}

TEST(Split, PartsComposeToTheWhole) {
  TempDir dir;
  auto whole = demo::classifier_model_bytes();
  ASSERT_TRUE(whole.is_ok());
  dir.write("m.onnx", *whole);
  auto r = check::split_model(dir.file("m.onnx"), 0.5);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_FALSE(r->boundary.empty());
  EXPECT_EQ(r->front_nodes + r->back_nodes, 9);
  Env env;
  // Level 1 computes each node the same way wherever the cut is: the parts compose to
  // the whole bit for bit. Level 2 (the default) picks each Conv's layouts from its
  // neighbours, so a cut may change which oneDNN kernel runs a node: equal within rounding.
  for (int level : {1, 2}) {
    SessionOptions o;
    o.optimization_level = level;
    auto s = env.load_bytes(*whole, "whole", o);
    auto f = env.load_bytes(r->front, "front", o);
    auto g = env.load_bytes(r->back, "back", o);
    ASSERT_TRUE(s.is_ok() && f.is_ok()) << f.status().to_string();
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    Tensor img = demo::classifier_image(0.3f);
    auto want = s->run({{"image", img}});
    auto mid = f->run({{"image", img}});
    ASSERT_TRUE(want.is_ok() && mid.is_ok());
    auto got = g->run(*mid);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    const Tensor& a = (*got)[0].second;
    const Tensor& b = (*want)[0].second;
    if (level == 1) {
      EXPECT_TRUE(bitwise_equal(a, b));
    } else {
      ASSERT_EQ(a.shape(), b.shape());
      for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5) << i;
    }
  }

  // Named cut values, and the errors.
  auto at = check::split_model(dir.file("m.onnx"), 0, {"s"});
  ASSERT_TRUE(at.is_ok()) << at.status().to_string();
  EXPECT_EQ(at->boundary, std::vector<std::string>{"s"});
  EXPECT_FALSE(check::split_model(dir.file("m.onnx"), 1.5).is_ok());
  EXPECT_FALSE(check::split_model(dir.file("m.onnx"), 0, {"nope"}).is_ok());
  EXPECT_FALSE(check::split_model(dir.file("missing.onnx"), 0.5).is_ok());
}

}  // namespace
}  // namespace bulkhead::test
