#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <thread>

#include "ir/onnx_import.h"
#include "onnx/onnx_pb.h"
#include "support/test_util.h"

namespace bulkhead::test {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Import, MissingFileNamesThePath) {
  Env env;
  auto s = env.load("/no/such/model.onnx");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("/no/such/model.onnx"), std::string::npos);
}

TEST(Import, EmptyGarbageAndTruncatedFilesAreInvalidModels) {
  TempDir dir;
  dir.write("empty.onnx", "");
  dir.write("garbage.onnx", "this is not a protobuf at all \x01\x02\xff");
  std::string rec = read_all(shared_dir() + "/models/ppocrv4_rec/model.onnx");
  ASSERT_GT(rec.size(), 1000u);
  dir.write("truncated.onnx", rec.substr(0, rec.size() / 2));
  Env env;
  for (const char* name : {"empty.onnx", "garbage.onnx", "truncated.onnx"}) {
    auto s = env.load(dir.file(name));
    ASSERT_FALSE(s.is_ok()) << name;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel) << name << ": " << s.status().to_string();
    EXPECT_NE(s.status().message().find(name), std::string::npos) << s.status().message();
  }
}

// A regular file is mapped; anything else (here a FIFO) is read to its end. Both give the
// same model; a directory is an error, not a crash.
// Models are read from regular files only: a pipe, a device or a folder could block or
// never end (/dev/zero), so each is refused at once with a line saying what it is.
TEST(Import, ModelsLoadFromRegularFilesOnly) {
  TempDir dir;
  const std::string path = shared_dir() + "/models/silero_vad_v5/model.onnx";
  auto from_file = ir::load_model(path);
  ASSERT_TRUE(from_file.is_ok()) << from_file.status().to_string();
  const std::string fifo = dir.file("pipe.onnx");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto from_pipe = ir::load_model(fifo);  // no writer: must not block
  ASSERT_FALSE(from_pipe.is_ok());
  EXPECT_NE(from_pipe.status().message().find("'" + fifo + "' is a FIFO, not a regular file"), std::string::npos)
      << from_pipe.status().message();
  auto from_dev = ir::load_model("/dev/zero");
  ASSERT_FALSE(from_dev.is_ok());
  EXPECT_NE(from_dev.status().message().find("character device"), std::string::npos) << from_dev.status().message();
  auto from_dir = ir::load_model(dir.path());
  ASSERT_FALSE(from_dir.is_ok());
  EXPECT_NE(from_dir.status().message().find("is a directory"), std::string::npos) << from_dir.status().message();
  EXPECT_EQ(from_dir.status().message().find("9223372036854775807"), std::string::npos);
  auto too_big = ir::load_model(path, 1000);
  ASSERT_FALSE(too_big.is_ok());
  EXPECT_NE(too_big.status().message().find("more than the limit of 1000 B"), std::string::npos) << too_big.status().message();
}

TEST(Import, UnsupportedOperatorNamesNodeAndOperator) {
  Env env;
  auto bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) { t = Relu(x) y = FrobnicateTensor(t) })");
  auto s = env.load_bytes(bytes, "frob.onnx");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(s.status().message().find("FrobnicateTensor"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("node '"), std::string::npos) << s.status().message();
}

TEST(Import, ConstantNodesBecomeInitializers) {
  Env env;
  auto bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] y) { c = Constant <value = float[3] {1.0, 2.0, 3.0}> () y = Mul(x, c) })");
  auto s = env.load_bytes(bytes, "const.onnx");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {3}, {2, 2, 2});
  auto out = s->run({{"x", x}});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ((*out)[0].second.data<float>()[2], 6.f);
}

TEST(Import, CycleIsAnInvalidModel) {
  Env env;
  auto bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) { a = Add(x, b) b = Relu(a) y = Identity(b) })");
  auto s = env.load_bytes(bytes, "cycle.onnx");
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel);
}

// A MatMul whose weight lives in an external data file beside the model.
onnx::ModelProto external_model(int64_t declared_length) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("ext");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_value(1);
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(4);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", "weights.bin");
  kv("offset", "16");
  kv("length", std::to_string(declared_length));
  auto* n = g->add_node();
  n->set_op_type("MatMul");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  return m;
}

TEST(Import, ExternalDataIsReadFromBesideTheModel) {
  TempDir dir;
  std::vector<float> wv = {1, 0, 0, 1, 1, 1, 2, -1};
  std::string blob(16, '\0');
  blob.append(reinterpret_cast<const char*>(wv.data()), wv.size() * 4);
  dir.write("weights.bin", blob);
  std::string bytes;
  external_model(32).SerializeToString(&bytes);
  dir.write("model.onnx", bytes);
  Env env;
  auto s = env.load(dir.file("model.onnx"));
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  auto out = s->run({{"x", Tensor::from_vector<float>(DataType::kFloat32, {1, 4}, {1, 2, 3, 4})}});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  const float* y = (*out)[0].second.data<float>();
  EXPECT_EQ(y[0], 1 + 0 + 3 + 8);
  EXPECT_EQ(y[1], 0 + 2 + 3 - 4);

  // A wrong declared length and a missing file are clear errors naming the tensor.
  external_model(28).SerializeToString(&bytes);
  dir.write("bad.onnx", bytes);
  auto bad = env.load(dir.file("bad.onnx"));
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("tensor 'w'"), std::string::npos) << bad.status().message();
  std::filesystem::remove(dir.file("weights.bin"));
  auto missing = env.load(dir.file("model.onnx"));
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("weights.bin"), std::string::npos) << missing.status().message();
}

TEST(Import, ExternalDataMayNotEscapeTheModelFolder) {
  TempDir dir;
  auto m = external_model(32);
  m.mutable_graph()->mutable_initializer(0)->mutable_external_data(0)->set_value("../../etc/passwd");
  std::string bytes;
  m.SerializeToString(&bytes);
  dir.write("model.onnx", bytes);
  Env env;
  auto s = env.load(dir.file("model.onnx"));
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel);

  // Symlinks are resolved before the check (the report: link.bin -> /etc/passwd was read);
  // FIFOs and folders inside the model's folder are refused without blocking; an offset
  // past the end is named as such.
  std::filesystem::create_symlink("/etc/passwd", dir.file("link.bin"));
  ASSERT_EQ(::mkfifo(dir.file("fifo.bin").c_str(), 0600), 0);
  std::filesystem::create_directory(dir.file("folder.bin"));
  dir.write("short.bin", std::string(64, '\0'));
  struct Case {
    std::string location, offset, expect;
  };
  for (const Case& c : {Case{"link.bin", "0", "resolves to '/etc/passwd', outside the model's folder"},
                        Case{"/etc/passwd", "0", "is an absolute path"},
                        Case{"fifo.bin", "0", "is a FIFO, not a regular file"},
                        Case{"folder.bin", "0", "is a directory, not a regular file"},
                        Case{"short.bin", "1000", "offset 1000 is past the end of 'short.bin' (64 bytes)"}}) {
    auto* w = m.mutable_graph()->mutable_initializer(0);
    w->mutable_external_data(0)->set_value(c.location);
    w->mutable_external_data(1)->set_value(c.offset);
    w->mutable_external_data(2)->set_value("32");
    m.SerializeToString(&bytes);
    dir.write("model.onnx", bytes);
    auto r = env.load(dir.file("model.onnx"));
    ASSERT_FALSE(r.is_ok()) << c.location;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.location << ": " << r.status().message();
    EXPECT_EQ(r.status().message().find("has -"), std::string::npos) << "a negative byte count: " << r.status().message();
  }
}

TEST(Import, SubgraphReadsOuterScopeValues) {
  Env env;
  auto bytes = model_text_bytes(R"(<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[2] x) => (float[2] y) {
  k = Constant <value = float[2] {10.0, 20.0}> ()
  y = If (c) <
    then_branch = t () => (float[2] a) { a = Add(x, k) },
    else_branch = e () => (float[2] b) { b = Sub(x, k) }
  >
})");
  auto s = env.load_bytes(bytes, "if.onnx");
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {2}, {1, 2});
  for (bool c : {true, false}) {
    Tensor cond = Tensor::host(DataType::kBool, {});
    *cond.data<bool>() = c;
    auto out = s->run({{"c", cond}, {"x", x}});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    EXPECT_EQ((*out)[0].second.data<float>()[1], c ? 22.f : -18.f);
  }
}

TEST(Import, ModelsOfManyIrAndOpsetVersionsLoad) {
  // A spread of the backend-data cases: IR 3 to 10, opsets 7 to 23.
  Env env;
  std::string base = shared_dir() + "/onnx-backend-data/node/";
  int loaded = 0;
  for (const char* c : {"test_abs", "test_conv_with_strides_padding", "test_lstm_defaults", "test_if",
                        "test_resize_upsample_scales_linear", "test_layer_normalization_2d_axis0",
                        "test_attention_3d", "test_reduce_max_empty_set"}) {
    auto m = ir::load_model(base + c + "/model.onnx");
    ASSERT_TRUE(m.is_ok()) << c << ": " << m.status().to_string();
    ++loaded;
  }
  EXPECT_EQ(loaded, 8);
  for (const char* m : {"light/light_resnet50.onnx", "light/light_inception_v1.onnx"}) {
    auto r = ir::load_model(shared_dir() + "/onnx-backend-data/" + m);
    ASSERT_TRUE(r.is_ok()) << m;
    EXPECT_EQ(r->ir_version, 3);
  }
}

// y = Relu(x) + b with b an initializer (listed as a graph input too, as IR 3 requires),
// at the given IR version and default-domain opset.
std::string relu_add_model(int64_t ir, int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(ir);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("relu_add");
  auto tensor_type = [](onnx::ValueInfoProto* v, const char* name) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(3);
  };
  tensor_type(g->add_input(), "x");
  if (ir < 4) tensor_type(g->add_input(), "b");
  tensor_type(g->add_output(), "y");
  auto* b = g->add_initializer();
  b->set_name("b");
  b->set_data_type(onnx::TensorProto::FLOAT);
  b->add_dims(3);
  for (float v : {1.f, 2.f, 3.f}) b->add_float_data(v);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->add_input("x");
  relu->add_output("r");
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->add_input("r");
  add->add_input("b");
  add->add_output("y");
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

TEST(Import, IrVersions3To13AndOpsets7To28Load) {
  Env env;
  Tensor x = Tensor::from_vector<float>(DataType::kFloat32, {3}, {-1, 5, -2});
  for (int64_t ir : {3, 13}) {
    for (int64_t opset : {7, 28}) {
      const std::string what = "IR " + std::to_string(ir) + ", opset " + std::to_string(opset);
      std::string bytes = relu_add_model(ir, opset);
      auto m = ir::load_model_from_bytes(bytes.data(), bytes.size(), "relu_add.onnx", ir::DataFolder{});
      ASSERT_TRUE(m.is_ok()) << what << ": " << m.status().to_string();
      EXPECT_EQ(m->ir_version, ir);
      EXPECT_EQ(m->opsets.at(""), opset);
      EXPECT_EQ(m->graph->info("r")->type_string(), "float32[3]") << what;
      auto s = env.load_bytes(bytes, "relu_add.onnx");
      ASSERT_TRUE(s.is_ok()) << what << ": " << s.status().to_string();
      auto out = s->run({{"x", x}});
      ASSERT_TRUE(out.is_ok()) << what << ": " << out.status().to_string();
      const float* y = (*out)[0].second.data<float>();
      EXPECT_EQ(y[0], 1.f);
      EXPECT_EQ(y[1], 7.f);
      EXPECT_EQ(y[2], 3.f);
    }
  }
}

// Nodes with fewer outputs than their operator defines reach shape inference without a
// crash (found by fuzz/import_fuzz.cc: Identity with no output was indexed at output 0;
// this test fails under the ASan+UBSan build without the fix).
TEST(Import, NodesWithoutTheirOutputsDoNotCrashInference) {
  for (const char* op : {"Identity", "MaxPool", "Relu", "Shape", "Loop"}) {
    onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(relu_add_model(8, 17)));
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->add_input("x");
    std::string bytes;
    m.SerializeToString(&bytes);
    auto r = ir::load_model_from_bytes(bytes.data(), bytes.size(), "few.onnx", ir::DataFolder{});
    if (!r.is_ok()) {
      EXPECT_NE(r.status().message().find("few.onnx"), std::string::npos) << op << ": " << r.status().message();
    }
  }
}

// A model outside what bulkhead implements, or one that breaks the ONNX graph rules, is
// an invalid-model error naming the version or the value — never a silent acceptance.
TEST(Import, VersionsOutsideTheSupportedRangeAndBrokenGraphsAreInvalidModels) {
  struct Case {
    const char* what;
    std::function<void(onnx::ModelProto&)> mutate;
    const char* expect;
  };
  const Case cases[] = {
      {"IR 99", [](onnx::ModelProto& m) { m.set_ir_version(99); }, "IR version 99 is not supported (bulkhead reads IR 3 to 13)"},
      {"IR 2", [](onnx::ModelProto& m) { m.set_ir_version(2); }, "IR version 2 is not supported"},
      {"opset 99", [](onnx::ModelProto& m) { m.mutable_opset_import(0)->set_version(99); },
       "opset 99 of domain 'ai.onnx' is not supported (bulkhead implements versions 1 to 28)"},
      {"opset 0", [](onnx::ModelProto& m) { m.mutable_opset_import(0)->set_version(0); }, "opset 0 of domain 'ai.onnx' is not supported"},
      {"no opset", [](onnx::ModelProto& m) { m.clear_opset_import(); }, "imports no opset"},
      {"opset imported twice", [](onnx::ModelProto& m) { m.add_opset_import()->set_version(17); }, "imported twice"},
      {"value produced twice",
       [](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(1)->set_output(0, "r"); },
       "value 'r' is produced twice"},
      {"node output over a graph input",
       [](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(0)->set_output(0, "x"); }, "output 'x' is also a graph input"},
      {"duplicate graph output", [](onnx::ModelProto& m) { *m.mutable_graph()->add_output() = m.graph().output(0); },
       "graph output 'y' is listed twice"},
      {"input declared twice", [](onnx::ModelProto& m) { *m.mutable_graph()->add_input() = m.graph().input(0); },
       "graph input 'x' is declared twice"},
      {"initializer twice", [](onnx::ModelProto& m) { *m.mutable_graph()->add_initializer() = m.graph().initializer(0); },
       "initializer 'b' is given twice"},
  };
  for (const Case& c : cases) {
    onnx::ModelProto m;
    ASSERT_TRUE(m.ParseFromString(relu_add_model(8, 17)));
    c.mutate(m);
    std::string bytes;
    m.SerializeToString(&bytes);
    auto r = ir::load_model_from_bytes(bytes.data(), bytes.size(), "bad.onnx", ir::DataFolder{});
    ASSERT_FALSE(r.is_ok()) << c.what;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel) << c.what;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.what << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("'bad.onnx'"), std::string::npos) << c.what << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace bulkhead::test

namespace bulkhead::test {
namespace {

// Dimensions come from the file: a corrupt tensor file must be an error line, never an
// allocation failure that aborts the process.
TEST(Import, CorruptTensorDimensionsAreErrorsNotCrashes) {
  TempDir dir;
  auto write = [&](const std::string& name, const onnx::TensorProto& t) {
    std::string bytes;
    t.SerializeToString(&bytes);
    dir.write(name, bytes);
    return dir.file(name);
  };
  onnx::TensorProto huge;
  huge.set_name("huge");
  huge.set_data_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4; ++i) huge.add_dims(int64_t{1} << 20);  // 2^80 elements
  auto r = ir::load_value_pb(write("huge.pb", huge), 't');
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("too many elements"), std::string::npos) << r.status().message();

  onnx::TensorProto big;  // 2^36 floats promised, none given
  big.set_name("big");
  big.set_data_type(onnx::TensorProto::FLOAT);
  big.add_dims(int64_t{1} << 18);
  big.add_dims(int64_t{1} << 18);
  r = ir::load_value_pb(write("big.pb", big), 't');
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("expected 68719476736 values, found 0"), std::string::npos) << r.status().message();

  big.set_raw_data(std::string(16, '\0'));
  r = ir::load_value_pb(write("bigraw.pb", big), 't');
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("raw data has 16 bytes"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace bulkhead::test
