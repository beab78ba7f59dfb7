#include "check/quantize_prepare.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "check/split.h"
#include "ir/onnx_import.h"

namespace bulkhead::check {
namespace {

bool default_domain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

void drop_attr(onnx::NodeProto& n, const std::string& name) {
  auto* as = n.mutable_attribute();
  for (int i = as->size() - 1; i >= 0; --i)
    if (as->Get(i).name() == name) as->DeleteSubrange(i, 1);
}

onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t.add_int64_data(x);
  return t;
}

// Every value name of the model, subgraphs included: new names must not collide.
void collect_names(const onnx::GraphProto& g, std::unordered_set<std::string>& names) {
  for (const auto& v : g.input()) names.insert(v.name());
  for (const auto& t : g.initializer()) names.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) names.insert(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_names(a.g(), names);
      for (const auto& sg : a.graphs()) collect_names(sg, names);
    }
  }
}

class Upgrader {
 public:
  explicit Upgrader(std::unordered_set<std::string>& names) : names_(names) {}

  Status graph(onnx::GraphProto& g) {
    for (auto& n : *g.mutable_node()) {
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) BH_RETURN_IF_ERROR(graph(*a.mutable_g()));
        for (auto& sg : *a.mutable_graphs()) BH_RETURN_IF_ERROR(graph(sg));
      }
      if (!default_domain(n)) continue;
      const std::string where = "node '" + n.name() + "' (" + n.op_type() + "): ";
      if (n.op_type() == "Slice") {
        const auto* starts = attr(n, "starts");
        const auto* ends = attr(n, "ends");
        if (!starts || !ends)
          return invalid_model(where + "a Slice of opset < 10 needs its starts and ends attributes");
        if (n.input_size() != 1) return invalid_model(where + "a Slice of opset < 10 takes one input");
        const auto* axes = attr(n, "axes");
        std::vector<int64_t> s(starts->ints().begin(), starts->ints().end()), e(ends->ints().begin(), ends->ints().end());
        n.add_input(add(g, n.name() + "_starts", s));
        n.add_input(add(g, n.name() + "_ends", e));
        if (axes) n.add_input(add(g, n.name() + "_axes", std::vector<int64_t>(axes->ints().begin(), axes->ints().end())));
        drop_attr(n, "starts");
        drop_attr(n, "ends");
        drop_attr(n, "axes");
      } else if (n.op_type() == "TopK") {
        const auto* k = attr(n, "k");
        if (!k || n.input_size() != 1) return invalid_model(where + "a TopK of opset < 10 needs its k attribute and one input");
        n.add_input(add(g, n.name() + "_k", {k->i()}));
        drop_attr(n, "k");
      } else if (n.op_type() == "Upsample") {
        // Resize-10 is Upsample-9 renamed: inputs X and scales, attribute mode.
        n.set_op_type("Resize");
      }
    }
    return Status::ok();
  }

 private:
  std::string add(onnx::GraphProto& g, const std::string& base, const std::vector<int64_t>& v) {
    std::string name = base;
    for (int k = 1; names_.count(name); ++k) name = base + "_" + std::to_string(k);
    names_.insert(name);
    *g.add_initializer() = int64_tensor(name, v);
    return name;
  }
  std::unordered_set<std::string>& names_;
};

}  // namespace

Result<int64_t> upgrade_to_opset10(onnx::ModelProto& model) {
  int64_t opset = 0;
  onnx::OperatorSetIdProto* def = nullptr;
  for (auto& op : *model.mutable_opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version(), def = &op;
  if (opset >= 10) return opset;
  if (!def) {
    def = model.add_opset_import();
    def->set_domain("");
  }
  std::unordered_set<std::string> names;
  collect_names(model.graph(), names);
  BH_RETURN_IF_ERROR(Upgrader(names).graph(*model.mutable_graph()));
  def->set_version(10);
  if (model.ir_version() < 4) {
    // IR < 4 lists every initializer as a graph input and means a constant; from IR 4
    // on such an input is a default a caller may override. Keep them constants.
    std::unordered_set<std::string> inits;
    for (const auto& t : model.graph().initializer()) inits.insert(t.name());
    auto* ins = model.mutable_graph()->mutable_input();
    for (int i = ins->size() - 1; i >= 0; --i)
      if (inits.count(ins->Get(i).name())) ins->DeleteSubrange(i, 1);
  }
  if (model.ir_version() < 5) model.set_ir_version(5);  // the IR of opset 10
  return opset;
}

Result<int> fold_into_convs(onnx::ModelProto& model, const std::string& dir) {
  onnx::GraphProto& g = *model.mutable_graph();
  int folded = 0;
  for (bool again = true; again;) {
    again = false;
    std::unordered_map<std::string, int> init, producer;
    std::unordered_map<std::string, std::vector<int>> readers;
    std::unordered_set<std::string> inputs, outputs;
    for (int i = 0; i < g.initializer_size(); ++i) init[g.initializer(i).name()] = i;
    for (const auto& v : g.input()) inputs.insert(v.name());
    for (const auto& v : g.output()) outputs.insert(v.name());
    for (int i = 0; i < g.node_size(); ++i) {
      for (const auto& in : g.node(i).input())
        if (!in.empty()) readers[in].push_back(i);
      for (const auto& o : g.node(i).output()) producer[o] = i;
    }
    // Values a subgraph reads by name (from this graph) keep their names.
    std::unordered_set<std::string> sub_reads;
    std::function<void(const onnx::GraphProto&)> reads_of = [&](const onnx::GraphProto& sg) {
      for (const auto& n : sg.node()) {
        for (const auto& in : n.input()) sub_reads.insert(in);
        for (const auto& a : n.attribute()) {
          if (a.has_g()) reads_of(a.g());
          for (const auto& s2 : a.graphs()) reads_of(s2);
        }
      }
    };
    for (const auto& n : g.node())
      for (const auto& a : n.attribute()) {
        if (a.has_g()) reads_of(a.g());
        for (const auto& sg : a.graphs()) reads_of(sg);
      }
    // IR >= 4: an initializer that is also a graph input is a default a caller may
    // override, not a weight.
    const bool defaults_overridable = model.ir_version() >= 4;
    auto constant = [&](const std::string& name) -> Result<Tensor> {
      auto it = init.find(name);
      if (it == init.end() || (inputs.count(name) && defaults_overridable)) return Status(StatusCode::kNotFound, "");
      BH_ASSIGN_OR_RETURN(Tensor t, ir::tensor_from_proto(g.initializer(it->second), ir::DataFolder{dir}));
      if (t.dtype() != DataType::kFloat32) return Status(StatusCode::kNotFound, "");
      return t;
    };
    for (int i = 0; i < g.node_size() && !again; ++i) {
      const onnx::NodeProto& conv = g.node(i);
      // A ConvTranspose's output channels are its weight's axis 1 ([C, M, k...], group 1).
      const bool transpose = conv.op_type() == "ConvTranspose";
      if ((conv.op_type() != "Conv" && !transpose) || !default_domain(conv) || conv.input_size() < 2 ||
          conv.output_size() != 1)
        continue;
      if (transpose) {
        const auto* ga = attr(conv, "group");
        if (ga && ga->i() != 1) continue;
      }
      const std::string y = conv.output(0);
      if (outputs.count(y) || sub_reads.count(y) || readers[y].size() != 1) continue;
      const int ri = readers[y][0];
      const onnx::NodeProto& r = g.node(ri);
      if (!default_domain(r) || r.output_size() < 1) continue;
      auto w = constant(conv.input(1));
      if (!w.is_ok() || w->rank() < 3) continue;
      // Weights of output channel m: Conv [M, per] rows; ConvTranspose [C, M, per] blocks.
      const int64_t M = w->dim(transpose ? 1 : 0), C = transpose ? w->dim(0) : 1;
      const int64_t per = w->numel() / std::max<int64_t>(M * C, 1);
      Tensor b = Tensor::host(DataType::kFloat32, {M});
      std::fill(b.data<float>(), b.data<float>() + M, 0.f);
      if (conv.input_size() > 2 && !conv.input(2).empty()) {
        auto bt = constant(conv.input(2));
        if (!bt.is_ok() || bt->numel() != M) continue;
        std::copy(bt->data<float>(), bt->data<float>() + M, b.data<float>());
      }
      // y' = a[m] * y + c[m]
      std::vector<float> a(static_cast<size_t>(M), 1.f), c(static_cast<size_t>(M), 0.f);
      // One value per output channel of a [.., M, 1, 1] constant, or one value.
      auto per_channel = [&](const Tensor& k, std::vector<float>& out) {
        if (k.numel() == 1) {
          std::fill(out.begin(), out.end(), k.data<float>()[0]);
          return true;
        }
        if (k.numel() != M || k.rank() > w->rank()) return false;
        // Broadcast against [N, M, spatial...]: M must sit at axis 1 of the output.
        const int rank = w->rank();
        const int off = rank - k.rank();
        for (int d = 0; d < k.rank(); ++d)
          if (k.dim(d) != (d + off == 1 ? M : 1)) return false;
        std::copy(k.data<float>(), k.data<float>() + M, out.begin());
        return true;
      };
      if (r.op_type() == "BatchNormalization") {
        if (r.input_size() != 5 || r.input(0) != y) continue;
        if (r.output_size() > 1) {
          bool extra = false;
          for (int k = 1; k < r.output_size(); ++k) extra = extra || !r.output(k).empty();
          if (extra) continue;  // training outputs
        }
        auto sc = constant(r.input(1)), bi = constant(r.input(2)), mean = constant(r.input(3)), var = constant(r.input(4));
        if (!sc.is_ok() || !bi.is_ok() || !mean.is_ok() || !var.is_ok()) continue;
        if (sc->numel() != M || bi->numel() != M || mean->numel() != M || var->numel() != M) continue;
        const auto* ea = attr(r, "epsilon");
        const double eps = ea ? ea->f() : 1e-5;
        for (int64_t m = 0; m < M; ++m) {
          const double s = sc->data<float>()[m] / std::sqrt(static_cast<double>(var->data<float>()[m]) + eps);
          a[m] = static_cast<float>(s);
          c[m] = static_cast<float>(bi->data<float>()[m] - mean->data<float>()[m] * s);
        }
      } else if (r.op_type() == "Mul" || r.op_type() == "Add") {
        if (r.input_size() != 2) continue;
        const std::string& other = r.input(0) == y ? r.input(1) : r.input(0);
        if (other == y) continue;
        auto k = constant(other);
        if (!k.is_ok()) continue;
        std::vector<float> v(static_cast<size_t>(M));
        if (!per_channel(*k, v)) continue;
        if (r.op_type() == "Mul") a = v;
        else c = v;
      } else {
        continue;
      }
      // New weight and bias tensors (the old ones may be shared with other nodes).
      Tensor w2 = w->clone_host();
      float* wp = w2.data<float>();
      for (int64_t c = 0; c < C; ++c)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t k = 0; k < per; ++k) wp[(c * M + m) * per + k] *= a[m];
      std::vector<float> b2(static_cast<size_t>(M));
      for (int64_t m = 0; m < M; ++m) b2[m] = b.data<float>()[m] * a[m] + c[m];
      std::unordered_set<std::string> names;
      collect_names(g, names);
      auto fresh = [&](const std::string& base) {
        std::string n = base;
        for (int k = 1; names.count(n); ++k) n = base + "_" + std::to_string(k);
        names.insert(n);
        return n;
      };
      const std::string wn = fresh(conv.name().empty() ? "conv_w_folded" : conv.name() + "_w_folded");
      const std::string bn = fresh(conv.name().empty() ? "conv_b_folded" : conv.name() + "_b_folded");
      onnx::TensorProto wt;
      wt.set_name(wn);
      wt.set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : w2.shape()) wt.add_dims(d);
      wt.set_raw_data(std::string(static_cast<const char*>(w2.raw()), w2.nbytes()));
      onnx::TensorProto bt;
      bt.set_name(bn);
      bt.set_data_type(onnx::TensorProto::FLOAT);
      bt.add_dims(M);
      bt.set_raw_data(std::string(reinterpret_cast<const char*>(b2.data()), b2.size() * sizeof(float)));
      *g.add_initializer() = std::move(wt);
      *g.add_initializer() = std::move(bt);
      onnx::NodeProto& cv = *g.mutable_node(i);
      cv.set_input(1, wn);
      if (cv.input_size() > 2) cv.set_input(2, bn);
      else cv.add_input(bn);
      cv.set_output(0, g.node(ri).output(0));
      g.mutable_node()->DeleteSubrange(ri, 1);
      ++folded;
      again = true;
    }
  }
  // Weights nothing reads any more.
  std::unordered_set<std::string> used;
  std::function<void(const onnx::GraphProto&)> reads = [&](const onnx::GraphProto& sg) {
    for (const auto& n : sg.node()) {
      for (const auto& in : n.input()) used.insert(in);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) reads(a.g());
        for (const auto& s : a.graphs()) reads(s);
      }
    }
    for (const auto& o : sg.output()) used.insert(o.name());
  };
  reads(g);
  std::unordered_set<std::string> inputs;
  for (const auto& v : g.input()) inputs.insert(v.name());
  auto* inits = g.mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i)
    if (!used.count(inits->Get(i).name()) && !inputs.count(inits->Get(i).name())) inits->DeleteSubrange(i, 1);
  return folded;
}

}  // namespace bulkhead::check
