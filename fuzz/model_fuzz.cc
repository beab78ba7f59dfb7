// libFuzzer harness with a structured mutator: the input is a serialized ONNX model, and
// each mutation changes what a hostile or broken exporter would — an attribute's type or
// value, a dimension, an element type, an edge of the graph, an opset — then re-serializes
// it, so most inputs still parse and reach session creation (optimisation, layout,
// partitioning, kernel creation, constant folding). A session that builds is then run
// once on small generated inputs, under limits (tensor bytes, time, loop iterations) that
// keep one input from filling the machine.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "bulkhead/bulkhead.hpp"
#include "onnx/onnx_pb.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using Rng = std::mt19937_64;

int64_t edge_int(Rng& r) {
  static const int64_t kEdges[] = {0, 1, -1, 2, 3, 7, 64, 255, 256, -2, 1 << 20, INT32_MAX, INT32_MIN,
                                   int64_t{1} << 40, INT64_MAX, INT64_MIN, 1000000007};
  if (r() % 3 == 0) return static_cast<int64_t>(r() % 17) - 4;
  return kEdges[r() % (sizeof kEdges / sizeof kEdges[0])];
}

float edge_float(Rng& r) {
  static const float kEdges[] = {0.f, 1.f, -1.f, 0.5f, 1e-30f, 1e30f, -1e30f, 3.f, 1e-6f};
  if (r() % 5 == 0) return std::numeric_limits<float>::quiet_NaN();
  if (r() % 7 == 0) return std::numeric_limits<float>::infinity();
  return kEdges[r() % (sizeof kEdges / sizeof kEdges[0])];
}

// Every value name the graph knows, to rewire edges with.
std::vector<std::string> value_names(const onnx::GraphProto& g) {
  std::vector<std::string> n;
  for (auto& v : g.input()) n.push_back(v.name());
  for (auto& t : g.initializer()) n.push_back(t.name());
  for (auto& node : g.node())
    for (auto& o : node.output()) n.push_back(o);
  n.push_back("");
  return n;
}

onnx::TensorShapeProto* some_shape(onnx::GraphProto& g, Rng& r) {
  std::vector<onnx::ValueInfoProto*> vs;
  for (auto& v : *g.mutable_input()) vs.push_back(&v);
  for (auto& v : *g.mutable_output()) vs.push_back(&v);
  for (auto& v : *g.mutable_value_info()) vs.push_back(&v);
  if (vs.empty()) return nullptr;
  auto* v = vs[r() % vs.size()];
  return v->mutable_type()->mutable_tensor_type()->mutable_shape();
}

void mutate_attribute(onnx::NodeProto& n, Rng& r) {
  if (n.attribute_size() == 0 || r() % 6 == 0) {
    static const char* kNames[] = {"axis", "axes", "pads", "strides", "kernel_shape", "dilations", "group", "perm",
                                   "keepdims", "to", "mode", "value", "alpha", "beta", "transA", "batch_dims"};
    auto* a = n.add_attribute();
    a->set_name(kNames[r() % (sizeof kNames / sizeof kNames[0])]);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(edge_int(r));
    return;
  }
  auto* a = n.mutable_attribute(static_cast<int>(r() % n.attribute_size()));
  switch (r() % 7) {
    case 0: a->set_i(edge_int(r)); if (r() % 2) a->set_type(onnx::AttributeProto::INT); break;
    case 1: a->set_f(edge_float(r)); if (r() % 2) a->set_type(onnx::AttributeProto::FLOAT); break;
    case 2:
      if (a->ints_size()) a->set_ints(static_cast<int>(r() % a->ints_size()), edge_int(r));
      else a->add_ints(edge_int(r));
      break;
    case 3:
      if (a->ints_size() && r() % 2) a->mutable_ints()->RemoveLast();
      else a->add_ints(edge_int(r));
      break;
    case 4: a->set_type(static_cast<onnx::AttributeProto::AttributeType>(r() % 15)); break;
    case 5: a->set_s(r() % 2 ? "constant" : std::string(r() % 8, 'x')); break;
    case 6: n.mutable_attribute()->DeleteSubrange(static_cast<int>(r() % n.attribute_size()), 1); break;
  }
}

// One structural change of a model; false when it had nothing to change.
bool mutate_model(onnx::ModelProto& m, Rng& r) {
  auto* g = m.mutable_graph();
  switch (r() % 8) {
    case 0:  // an attribute
      if (g->node_size() == 0) return false;
      mutate_attribute(*g->mutable_node(static_cast<int>(r() % g->node_size())), r);
      return true;
    case 1: {  // a dimension
      auto* s = some_shape(*g, r);
      if (!s) return false;
      if (s->dim_size() == 0 || r() % 5 == 0) {
        s->add_dim()->set_dim_value(edge_int(r));
      } else {
        auto* d = s->mutable_dim(static_cast<int>(r() % s->dim_size()));
        if (r() % 4 == 0) d->set_dim_param(r() % 2 ? "N" : "M");
        else d->set_dim_value(r() % 2 ? edge_int(r) : static_cast<int64_t>(r() % 9));
      }
      if (r() % 9 == 0 && s->dim_size()) s->mutable_dim()->RemoveLast();
      return true;
    }
    case 2: {  // an element type
      int k = static_cast<int>(r() % 3);
      int32_t type = static_cast<int32_t>(r() % 27);
      if (k == 0 && g->input_size()) g->mutable_input(static_cast<int>(r() % g->input_size()))->mutable_type()->mutable_tensor_type()->set_elem_type(type);
      else if (k == 1 && g->output_size()) g->mutable_output(static_cast<int>(r() % g->output_size()))->mutable_type()->mutable_tensor_type()->set_elem_type(type);
      else if (g->initializer_size()) g->mutable_initializer(static_cast<int>(r() % g->initializer_size()))->set_data_type(type);
      else return false;
      return true;
    }
    case 3: {  // an edge
      if (g->node_size() == 0) return false;
      auto* n = g->mutable_node(static_cast<int>(r() % g->node_size()));
      auto names = value_names(*g);
      if (n->input_size() && r() % 3) n->set_input(static_cast<int>(r() % n->input_size()), names[r() % names.size()]);
      else if (r() % 2) n->add_input(names[r() % names.size()]);
      else if (n->output_size()) n->set_output(static_cast<int>(r() % n->output_size()), names[r() % names.size()]);
      return true;
    }
    case 4: {  // a node copied, removed, or its operator changed
      if (g->node_size() == 0) return false;
      int i = static_cast<int>(r() % g->node_size());
      if (r() % 3 == 0) {
        *g->add_node() = g->node(i);
      } else if (r() % 2) {
        g->mutable_node()->DeleteSubrange(i, 1);
      } else {
        static const char* kOps[] = {"Relu", "Add", "Conv", "MatMul", "Reshape", "Gather", "Slice", "Concat", "Loop",
                                     "If", "Resize", "Pad", "Transpose", "Cast", "Expand", "Tile", "Split", "ReduceSum"};
        g->mutable_node(i)->set_op_type(kOps[r() % (sizeof kOps / sizeof kOps[0])]);
      }
      return true;
    }
    case 5: {  // an initializer's shape or contents
      if (g->initializer_size() == 0) return false;
      auto* t = g->mutable_initializer(static_cast<int>(r() % g->initializer_size()));
      if (t->dims_size() && r() % 2) t->set_dims(static_cast<int>(r() % t->dims_size()), edge_int(r));
      else if (t->has_raw_data() && !t->raw_data().empty()) (*t->mutable_raw_data())[r() % t->raw_data().size()] ^= static_cast<char>(1 << (r() % 8));
      else t->add_dims(static_cast<int64_t>(r() % 4));
      return true;
    }
    case 6:  // an opset
      if (m.opset_import_size() == 0) return false;
      m.mutable_opset_import(0)->set_version(static_cast<int64_t>(r() % 30));
      return true;
    case 7:  // the IR version
      m.set_ir_version(static_cast<int64_t>(r() % 15));
      return true;
  }
  return false;
}

// Small inputs for a session: zeros of each input's shape, symbolic dimensions 2.
bool make_inputs(const bulkhead::Session& s, bulkhead::NamedTensors& out) {
  for (const auto& io : s.inputs()) {
    if (!io.is_tensor || !io.has_shape || io.dtype == bulkhead::DataType::kString || bulkhead::dtype_size(io.dtype) == 0) return false;
    bulkhead::Shape shape;
    int64_t n = 1;
    for (int64_t d : io.shape) {
      shape.push_back(d < 0 ? 2 : d);
      if (shape.back() > 4096) return false;
      n *= shape.back();
      if (n > 65536) return false;
    }
    bulkhead::Tensor t = bulkhead::Tensor::host(io.dtype, shape);
    if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
    out.emplace_back(io.name, t);
  }
  return true;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng r(seed);
  onnx::ModelProto m;
  if (size == 0 || !m.ParseFromArray(data, static_cast<int>(size)) || !m.has_graph() || r() % 16 == 0)
    return LLVMFuzzerMutate(data, size, max_size);
  int changes = 1 + static_cast<int>(r() % 3);
  bool any = false;
  for (int i = 0; i < changes; ++i) any |= mutate_model(m, r);
  if (!any) return LLVMFuzzerMutate(data, size, max_size);
  std::string out;
  if (!m.SerializeToString(&out) || out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bulkhead::Env* env = new bulkhead::Env();  // devices opened once, kept
  bulkhead::SessionOptions o;
  o.threads = 1;
  o.max_tensor_bytes = 64 << 20;
  o.max_loop_iterations = 1000;
  o.run_timeout_ms = 2000;
  auto s = env->load_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx", o);
  if (!s.is_ok()) return 0;
  bulkhead::NamedTensors inputs;
  if (make_inputs(*s, inputs)) (void)s->run(inputs);
  return 0;
}
