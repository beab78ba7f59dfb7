#include "check/quantize.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "check/quantize_prepare.h"
#include "check/split.h"
#include "io/file.h"
#include "ir/onnx_import.h"
#include "onnx/onnx_pb.h"

namespace bulkhead::check {
namespace {

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
};

// uint8 parameters of a real range: the range widened to hold 0 (so that 0, padding,
// is exact), scale = width / 255.
void uint8_params(const Range& r, float* scale, uint8_t* zero) {
  const double lo = std::min(0.0, r.lo), hi = std::max(0.0, r.hi);
  double s = (hi - lo) / 255.0;
  if (!(s > 0) || !std::isfinite(s)) s = 1.0;
  *scale = static_cast<float>(s);
  *zero = static_cast<uint8_t>(std::clamp(std::nearbyint(-lo / static_cast<double>(*scale)), 0.0, 255.0));
}

onnx::TensorProto scalar_f32(const std::string& name, float v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_float_data(v);
  return t;
}

onnx::TensorProto raw_tensor(const std::string& name, int type, const std::vector<int64_t>& dims, const void* data, size_t bytes) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(static_cast<const char*>(data), bytes));
  return t;
}

onnx::NodeProto qdq_node(const std::string& op, const std::string& name, const std::vector<std::string>& in,
                         const std::string& out, int axis = -2) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : in) n.add_input(i);
  n.add_output(out);
  if (axis != -2) {
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  return n;
}

// Attribute `name` of `n` as an int or a float, `dflt` when absent.
int64_t int_attr(const onnx::NodeProto& n, const std::string& name, int64_t dflt) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return dflt;
}
float float_attr(const onnx::NodeProto& n, const std::string& name, float dflt) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.f();
  return dflt;
}

// Every name read by `g`'s nodes and its subgraphs (for the initializers still in use).
void collect_reads(const onnx::GraphProto& g, std::unordered_map<std::string, int>& uses) {
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      if (!i.empty()) ++uses[i];
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_reads(a.g(), uses);
      for (const auto& sg : a.graphs()) collect_reads(sg, uses);
    }
  }
  for (const auto& o : g.output()) ++uses[o.name()];
}

}  // namespace

Result<QuantizeResult> quantize_model(const std::string& path, const QuantizeOptions& o) {
  if (o.samples.empty()) return invalid_argument("quantisation needs at least one calibration sample");
  if (o.method != "minmax" && o.method != "percentile")
    return invalid_argument("unknown calibration method '" + o.method + "' (minmax or percentile)");
  if (o.method == "percentile" && !(o.percentile > 50 && o.percentile <= 100))
    return invalid_argument("percentile must be in (50, 100], got " + std::to_string(o.percentile));
  BH_ASSIGN_OR_RETURN(std::string bytes, io::read_regular_file(path, io::kDefaultMaxFileBytes, "model"));
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes)) return invalid_model("'" + path + "' is not a valid ONNX model");
  const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/'));
  QuantizeResult res;
  // Opset 9 and below have no QuantizeLinear: move the model to opset 10 first.
  {
    auto up = upgrade_to_opset10(model);
    if (!up.is_ok()) return up.status().with_context("'" + path + "': ");
    res.opset_before = *up;
  }
  int64_t opset = 0;
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
  res.opset = opset;
  res.per_channel = opset >= 13;  // per-axis DequantizeLinear
  onnx::GraphProto& g = *model.mutable_graph();
  for (auto& t : *g.mutable_initializer()) BH_RETURN_IF_ERROR(inline_external(t, dir));
  // Unnamed nodes get the names bulkhead reports them by ("<op>_<index>"), before any
  // node moves, so that --keep-float takes the names a user sees.
  for (int i = 0; i < g.node_size(); ++i)
    if (g.node(i).name().empty()) g.mutable_node(i)->set_name(g.node(i).op_type() + "_" + std::to_string(i));
  // Weights written as Constant nodes (exporters do), or built by ConstantOfShape from a
  // constant shape (the ONNX test suite's "light" models), become initializers first.
  // Constant nodes first, so that a ConstantOfShape finds its shape among the initializers.
  for (const bool of_shape : {false, true}) {
    std::unordered_set<std::string> taken;
    std::unordered_map<std::string, int> shape_init;
    for (int i = 0; i < g.initializer_size(); ++i) taken.insert(g.initializer(i).name()), shape_init[g.initializer(i).name()] = i;
    for (const auto& in : g.input()) taken.insert(in.name());
    auto* nodes = g.mutable_node();
    for (int i = nodes->size() - 1; i >= 0; --i) {
      const onnx::NodeProto& n = nodes->Get(i);
      if (!(n.domain().empty() || n.domain() == "ai.onnx") || n.output_size() != 1 || taken.count(n.output(0))) continue;
      onnx::TensorProto t;
      if (!of_shape && n.op_type() == "Constant" && n.attribute_size() == 1 && n.attribute(0).name() == "value" && n.attribute(0).has_t()) {
        t = n.attribute(0).t();
      } else if (of_shape && n.op_type() == "ConstantOfShape" && n.input_size() == 1 && shape_init.count(n.input(0)) &&
                 (model.ir_version() < 4 || !std::any_of(g.input().begin(), g.input().end(),
                                                         [&](const onnx::ValueInfoProto& v) { return v.name() == n.input(0); }))) {
        BH_ASSIGN_OR_RETURN(Tensor shape, ir::tensor_from_proto(g.initializer(shape_init[n.input(0)]), ir::DataFolder{dir}));
        if (shape.dtype() != DataType::kInt64 || shape.rank() != 1) continue;
        int64_t numel = 1;
        bool ok = true;
        for (int64_t k = 0; k < shape.numel() && ok; ++k) {
          const int64_t d = shape.data<int64_t>()[k];
          ok = d >= 0 && d <= (int64_t{1} << 31) && numel <= (int64_t{1} << 28) / std::max<int64_t>(d, 1);
          numel *= d;
        }
        if (!ok) continue;
        float v = 0;
        if (n.attribute_size() == 1 && n.attribute(0).name() == "value" && n.attribute(0).has_t()) {
          BH_ASSIGN_OR_RETURN(Tensor value, ir::tensor_from_proto(n.attribute(0).t(), ir::DataFolder{dir}));
          if (value.dtype() != DataType::kFloat32 || value.numel() != 1) continue;
          v = value.data<float>()[0];
        } else if (n.attribute_size() != 0) {
          continue;
        }
        t.set_data_type(onnx::TensorProto::FLOAT);
        for (int64_t k = 0; k < shape.numel(); ++k) t.add_dims(shape.data<int64_t>()[k]);
        std::vector<float> fill(static_cast<size_t>(numel), v);
        t.set_raw_data(std::string(reinterpret_cast<const char*>(fill.data()), fill.size() * sizeof(float)));
      } else {
        continue;
      }
      t.set_name(n.output(0));
      BH_RETURN_IF_ERROR(inline_external(t, dir));
      *g.add_initializer() = std::move(t);
      if (model.ir_version() < 4) {
        auto* vi = g.add_input();
        vi->set_name(n.output(0));
        auto* tt = vi->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(g.initializer(g.initializer_size() - 1).data_type());
        auto* shape = tt->mutable_shape();
        for (auto d : g.initializer(g.initializer_size() - 1).dims()) shape->add_dim()->set_dim_value(d);
      }
      nodes->DeleteSubrange(i, 1);
    }
  }

  // Normalisations and per-channel affines after a Conv go into its float weights.
  BH_ASSIGN_OR_RETURN(res.folded, fold_into_convs(model, dir));

  std::unordered_map<std::string, int> init;  // initializer name -> index
  for (int i = 0; i < g.initializer_size(); ++i) init[g.initializer(i).name()] = i;
  std::unordered_set<std::string> graph_inputs, names;
  for (const auto& in : g.input()) graph_inputs.insert(in.name()), names.insert(in.name());
  for (const auto& t : g.initializer()) names.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& out : n.output()) names.insert(out);
  const std::set<std::string> keep(o.keep_float.begin(), o.keep_float.end());
  auto node_name = [&](int i) { return g.node(i).name(); };
  auto constant_f32 = [&](const std::string& name, int min_rank, int max_rank) -> const onnx::TensorProto* {
    auto it = init.find(name);
    // IR >= 4: an initializer also listed as an input is a default the caller may override:
    // not a weight. IR < 4 lists every initializer as an input.
    if (it == init.end() || (graph_inputs.count(name) && model.ir_version() >= 4)) return nullptr;
    const onnx::TensorProto& t = g.initializer(it->second);
    if (t.data_type() != onnx::TensorProto::FLOAT || t.dims_size() < min_rank || t.dims_size() > max_rank) return nullptr;
    return &t;
  };

  // The value a target's output is quantised at: past the Relus that are the only reader
  // of what they read (Conv → Relu → Q is one int8 kernel whose saturation at the zero
  // point is the Relu; Conv → Q → DQ → Relu → Q would run the Relu in float between).
  std::unordered_map<std::string, std::vector<int>> readers;
  std::unordered_set<std::string> graph_outputs;
  for (const auto& v : g.output()) graph_outputs.insert(v.name());
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& in : g.node(i).input())
      if (!in.empty()) readers[in].push_back(i);
  auto after_relus = [&](std::string v) {
    for (;;) {
      auto it = readers.find(v);
      if (graph_outputs.count(v) || it == readers.end() || it->second.size() != 1) return v;
      const onnx::NodeProto& r = g.node(it->second[0]);
      if (r.op_type() != "Relu" || !(r.domain().empty() || r.domain() == "ai.onnx") || r.output_size() != 1 ||
          keep.count(r.name()))
        return v;
      v = r.output(0);
    }
  };

  // The nodes to quantise and the activations to calibrate.
  std::vector<int> targets;
  std::vector<std::string> activations;
  std::unordered_set<std::string> act_set;
  auto add_act = [&](const std::string& v) {
    if (act_set.insert(v).second) activations.push_back(v);
  };
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (!(n.domain().empty() || n.domain() == "ai.onnx") || n.output_size() < 1 || n.output(0).empty()) continue;
    const bool conv = n.op_type() == "Conv" && n.input_size() >= 2 && constant_f32(n.input(1), 3, 5) &&
                      (n.input_size() < 3 || n.input(2).empty() || constant_f32(n.input(2), 1, 1));
    const bool matmul = n.op_type() == "MatMul" && n.input_size() == 2 && constant_f32(n.input(1), 2, 2);
    const bool deconv = n.op_type() == "ConvTranspose" && n.input_size() >= 2 && constant_f32(n.input(1), 3, 5) &&
                        int_attr(n, "group", 1) == 1 &&
                        (n.input_size() < 3 || n.input(2).empty() || constant_f32(n.input(2), 1, 1));
    // Gemm as a fully connected layer: A' = A, alpha 1, a constant B and a bias of one
    // value per output column (beta 1) or none.
    bool gemm = n.op_type() == "Gemm" && n.input_size() >= 2 && n.input_size() <= 3 && constant_f32(n.input(1), 2, 2) &&
                int_attr(n, "transA", 0) == 0 && float_attr(n, "alpha", 1.f) == 1.f;
    if (gemm && n.input_size() > 2 && !n.input(2).empty()) {
      const onnx::TensorProto* b = constant_f32(n.input(1), 2, 2);
      const onnx::TensorProto* c = constant_f32(n.input(2), 1, 1);
      gemm = c && float_attr(n, "beta", 1.f) == 1.f && c->dims(0) == b->dims(int_attr(n, "transB", 0) ? 0 : 1);
    }
    if (!conv && !matmul && !gemm && !deconv) continue;
    if (init.count(n.input(0))) continue;  // a constant activation: nothing to calibrate
    if (keep.count(node_name(i))) {
      ++res.kept;
      continue;
    }
    targets.push_back(i);
    add_act(n.input(0));
    // A graph output stays float: a QuantizeLinear there would have no reader.
    if (const std::string out = after_relus(n.output(0)); !graph_outputs.count(out)) add_act(out);
    (conv ? res.convs : matmul ? res.matmuls : gemm ? res.gemms : res.conv_transposes)++;
  }
  if (targets.empty())
    return invalid_argument("'" + path + "' has no Conv, ConvTranspose, MatMul or Gemm with constant float32 weights to quantise");
  for (const auto& k : keep) {
    bool found = false;
    for (int i = 0; i < g.node_size(); ++i) found = found || node_name(i) == k;
    if (!found) return invalid_argument("--keep-float: no node named '" + k + "' in '" + path + "'");
  }

  // Calibration: the float model, with every activation to calibrate as an output.
  std::map<std::string, Range> ranges;
  {
    onnx::ModelProto probe = model;
    std::unordered_set<std::string> outs;
    for (const auto& out : probe.graph().output()) outs.insert(out.name());
    for (const auto& v : activations)
      if (!outs.count(v)) {
        auto* vi = probe.mutable_graph()->add_output();
        vi->set_name(v);
        vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
      }
    std::string pb;
    if (!probe.SerializeToString(&pb)) return internal_error("cannot serialise the calibration model");
    Env env;
    SessionOptions so;
    so.threads = o.threads;
    so.optimization_level = 1;
    BH_ASSIGN_OR_RETURN(Session s, env.load_bytes(pb, path, so));
    RunOptions ro;
    ro.outputs = activations;
    for (size_t k = 0; k < o.samples.size(); ++k) {
      auto r = s.run(o.samples[k], ro);
      if (!r.is_ok()) return r.status().with_context("calibration sample " + std::to_string(k + 1) + ": ");
      for (auto& [name, t] : *r) {
        if (t.dtype() != DataType::kFloat32) return unsupported("activation '" + name + "' is " + dtype_name(t.dtype()) + ", not float32");
        const float* p = t.data<float>();
        const int64_t n = t.numel();
        Range& rg = ranges[name];
        if (n == 0) continue;
        for (int64_t i = 0; i < n; ++i)
          if (!std::isfinite(p[i])) return invalid_argument("calibration sample " + std::to_string(k + 1) + ": activation '" + name + "' holds a non-finite value");
        if (o.method == "minmax") {
          auto [mn, mx] = std::minmax_element(p, p + n);
          rg.lo = std::min<double>(rg.lo, *mn);
          rg.hi = std::max<double>(rg.hi, *mx);
        } else {
          std::vector<float> v(p, p + n);
          const double keep_share = o.percentile / 100.0;
          const int64_t klo = static_cast<int64_t>(std::floor((1.0 - keep_share) * static_cast<double>(n - 1)));
          const int64_t khi = static_cast<int64_t>(std::ceil(keep_share * static_cast<double>(n - 1)));
          std::nth_element(v.begin(), v.begin() + klo, v.end());
          rg.lo = std::min<double>(rg.lo, v[klo]);
          std::nth_element(v.begin(), v.begin() + khi, v.end());
          rg.hi = std::max<double>(rg.hi, v[khi]);
        }
      }
    }
  }

  int counter = 0;
  auto fresh = [&](const std::string& base) {
    std::string n = base;
    while (names.count(n)) n = base + "_" + std::to_string(++counter);
    names.insert(n);
    return n;
  };
  std::vector<onnx::NodeProto> front;                     // weight and bias dequantisers, graph-input QDQ
  std::unordered_map<std::string, std::vector<onnx::NodeProto>> after;  // value -> its Q/DQ, placed after its producer
  std::unordered_map<std::string, std::string> dq_of;     // activation -> its dequantised name
  std::vector<onnx::TensorProto> new_inits;
  std::unordered_map<std::string, float> act_scale;
  for (const auto& v : activations) {
    float scale = 1;
    uint8_t zero = 0;
    uint8_params(ranges[v], &scale, &zero);
    act_scale[v] = scale;
    const std::string sn = fresh(v + "_scale"), zn = fresh(v + "_zero_point"), qn = fresh(v + "_quantized"),
                      dn = fresh(v + "_dequantized");
    new_inits.push_back(scalar_f32(sn, scale));
    new_inits.push_back(raw_tensor(zn, onnx::TensorProto::UINT8, {}, &zero, 1));
    std::vector<onnx::NodeProto> pair{qdq_node("QuantizeLinear", fresh(v + "_QuantizeLinear"), {v, sn, zn}, qn),
                                      qdq_node("DequantizeLinear", fresh(v + "_DequantizeLinear"), {qn, sn, zn}, dn)};
    if (graph_inputs.count(v)) front.insert(front.end(), pair.begin(), pair.end());
    else after[v] = std::move(pair);
    dq_of[v] = dn;
    ++res.activations;
  }

  // Weights and biases.
  std::unordered_map<int, std::pair<std::string, std::string>> weight_of;  // node -> (w, b) dequantised names
  for (int i : targets) {
    const onnx::NodeProto& n = g.node(i);
    const bool conv = n.op_type() == "Conv";
    const bool gemm = n.op_type() == "Gemm";
    const bool deconv = n.op_type() == "ConvTranspose";
    BH_ASSIGN_OR_RETURN(Tensor w, ir::tensor_from_proto(g.initializer(init[n.input(1)]), ir::DataFolder{dir}));
    // The weights' output-channel axis: a Conv's 0, a MatMul's 1, a Gemm's 0 when transB, a
    // ConvTranspose's 1 ([C, M, k...]).
    const int w_axis = conv || (gemm && int_attr(n, "transB", 0)) ? 0 : 1;
    const int64_t M = w.dim(w_axis);  // output channels
    const int64_t total = w.numel();
    int64_t inner = 1;  // elements after the channel axis
    for (int d = w_axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
    auto channel = [&](int64_t idx) { return (idx / std::max<int64_t>(inner, 1)) % std::max<int64_t>(M, 1); };
    const int64_t nscale = res.per_channel ? M : 1;
    std::vector<float> ws(static_cast<size_t>(nscale), 0.f);
    const float* wp = w.data<float>();
    for (int64_t k = 0; k < total; ++k) {
      const int64_t c = res.per_channel ? channel(k) : 0;
      ws[c] = std::max(ws[c], std::fabs(wp[k]));
    }
    for (float& s : ws) s = s > 0 && std::isfinite(s) ? s / 127.f : 1.f;
    std::vector<int8_t> wq(static_cast<size_t>(total));
    for (int64_t k = 0; k < total; ++k) {
      const float s = ws[res.per_channel ? channel(k) : 0];
      wq[k] = static_cast<int8_t>(std::clamp(std::nearbyint(wp[k] / s), -127.f, 127.f));
    }
    std::vector<int64_t> wdims(w.shape().begin(), w.shape().end());
    const std::string base = n.input(1);
    const std::string qn = fresh(base + "_quantized"), sn = fresh(base + "_scale"), zn = fresh(base + "_zero_point"),
                      dn = fresh(base + "_dequantized");
    new_inits.push_back(raw_tensor(qn, onnx::TensorProto::INT8, wdims, wq.data(), wq.size()));
    std::vector<int8_t> zeros(static_cast<size_t>(nscale), 0);
    const std::vector<int64_t> sdims = res.per_channel ? std::vector<int64_t>{nscale} : std::vector<int64_t>{};
    new_inits.push_back(raw_tensor(sn, onnx::TensorProto::FLOAT, sdims, ws.data(), ws.size() * sizeof(float)));
    new_inits.push_back(raw_tensor(zn, onnx::TensorProto::INT8, sdims, zeros.data(), zeros.size()));
    front.push_back(qdq_node("DequantizeLinear", fresh(base + "_DequantizeLinear"), {qn, sn, zn}, dn,
                             res.per_channel ? w_axis : -2));
    std::string bdn;
    if ((conv || gemm || deconv) && n.input_size() > 2 && !n.input(2).empty()) {
      BH_ASSIGN_OR_RETURN(Tensor b, ir::tensor_from_proto(g.initializer(init[n.input(2)]), ir::DataFolder{dir}));
      if (b.numel() != M) return invalid_model("node '" + n.name() + "': bias has " + std::to_string(b.numel()) + " values for " + std::to_string(M) + " channels");
      const float xs = act_scale[n.input(0)];
      std::vector<float> bs(static_cast<size_t>(M));
      std::vector<int32_t> bq(static_cast<size_t>(M));
      for (int64_t m = 0; m < M; ++m) {
        bs[m] = xs * ws[res.per_channel ? m : 0];
        const double q = std::nearbyint(static_cast<double>(b.data<float>()[m]) / bs[m]);
        bq[m] = static_cast<int32_t>(std::clamp(q, -2147483647.0, 2147483647.0));
      }
      const std::string bb = n.input(2);
      const std::string bqn = fresh(bb + "_quantized"), bsn = fresh(bb + "_scale"), bdn2 = fresh(bb + "_dequantized");
      new_inits.push_back(raw_tensor(bqn, onnx::TensorProto::INT32, {M}, bq.data(), bq.size() * 4));
      if (res.per_channel) {
        new_inits.push_back(raw_tensor(bsn, onnx::TensorProto::FLOAT, {M}, bs.data(), bs.size() * 4));
        front.push_back(qdq_node("DequantizeLinear", fresh(bb + "_DequantizeLinear"), {bqn, bsn}, bdn2, 0));
      } else {
        new_inits.push_back(scalar_f32(bsn, bs[0]));
        front.push_back(qdq_node("DequantizeLinear", fresh(bb + "_DequantizeLinear"), {bqn, bsn}, bdn2));
      }
      bdn = bdn2;
    }
    weight_of[i] = {dn, bdn};
  }

  // The new node list: dequantisers first, each node followed by the Q/DQ of what it
  // writes; every reader of a quantised activation reads its dequantised form.
  std::vector<onnx::NodeProto> nodes = front;
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto n = g.node(i);
    for (int k = 0; k < n.input_size(); ++k) {
      auto it = dq_of.find(n.input(k));
      if (it != dq_of.end()) n.set_input(k, it->second);
    }
    if (auto wt = weight_of.find(i); wt != weight_of.end()) {
      n.set_input(1, wt->second.first);
      if (!wt->second.second.empty()) n.set_input(2, wt->second.second);
    }
    nodes.push_back(std::move(n));
    for (const auto& out : g.node(i).output())
      if (auto a = after.find(out); a != after.end()) nodes.insert(nodes.end(), a->second.begin(), a->second.end());
  }
  g.clear_node();
  for (auto& n : nodes) *g.add_node() = std::move(n);
  for (auto& t : new_inits) *g.add_initializer() = std::move(t);
  // Float weights nothing reads any more.
  std::unordered_map<std::string, int> uses;
  collect_reads(g, uses);
  auto* inits = g.mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i) {
    const std::string& nm = inits->Get(i).name();
    if (!uses.count(nm) && (!graph_inputs.count(nm) || model.ir_version() < 4)) inits->DeleteSubrange(i, 1);
  }
  if (model.ir_version() < 4) {
    // IR < 4 lists every initializer as an input: drop the inputs of removed weights,
    // and list the new initializers.
    std::unordered_set<std::string> have;
    for (const auto& t : g.initializer()) have.insert(t.name());
    auto* ins = g.mutable_input();
    for (int i = ins->size() - 1; i >= 0; --i)
      if (init.count(ins->Get(i).name()) && !have.count(ins->Get(i).name()) && !uses.count(ins->Get(i).name()))
        ins->DeleteSubrange(i, 1);
    std::unordered_set<std::string> listed;
    for (const auto& in : g.input()) listed.insert(in.name());
    for (const auto& t : g.initializer())
      if (!listed.count(t.name())) {
        auto* vi = g.add_input();
        vi->set_name(t.name());
        auto* tt = vi->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(t.data_type());
        auto* shape = tt->mutable_shape();
        for (auto d : t.dims()) shape->add_dim()->set_dim_value(d);
      }
  }
  if (!model.SerializeToString(&res.model)) return internal_error("cannot serialise the quantised model");
  return res;
}

}  // namespace bulkhead::check
