// Control flow (If, Loop, Scan, SequenceMap) and sequence / optional operators.
//
// Subgraphs are run through KernelContext::run_subgraph; the executor binds the values we
// pass to the subgraph's declared inputs and resolves outer-scope names itself. Tensors
// held in sequences are immutable views: these kernels never write into a tensor they did
// not allocate in the same call.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_util.h"

namespace bulkhead::cpu {
namespace {

// ---------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------

// A fresh host tensor that outlives the call (for sequence elements and loop values).
Result<Tensor> new_tensor(DataType dt, const Shape& s) {
  auto alloc = HostAllocator::create("cpu-control-flow");
  return Tensor::allocate(*alloc, dt, s);
}

int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) p *= s[i];
  return p;
}

// Copies n elements from src[soff..] to dst[doff..] (offsets in elements).
Status copy_elems(const Tensor& dst, int64_t doff, const Tensor& src, int64_t soff, int64_t n, const std::string& where) {
  if (n <= 0) return Status::ok();
  if (dst.dtype() != src.dtype())
    return invalid_argument(where + "element type mismatch: " + dtype_name(src.dtype()) + " vs " + dtype_name(dst.dtype()));
  if (dst.dtype() == DataType::kString) {
    const std::string* s = src.strings();
    std::string* d = dst.strings();
    if (!s || !d) return internal_error(where + "string tensor without storage");
    for (int64_t k = 0; k < n; ++k) d[doff + k] = s[soff + k];
    return Status::ok();
  }
  size_t es = dtype_size(dst.dtype());
  if (!src.raw() || !dst.raw()) return invalid_argument(where + "tensor is not in host memory");
  std::memcpy(static_cast<char*>(dst.raw()) + doff * es, static_cast<const char*>(src.raw()) + soff * es, n * es);
  return Status::ok();
}

// The slice at `idx` along `axis` (the axis removed). A view when the slice is contiguous.
Result<Tensor> slice_axis(const Tensor& t, int axis, int64_t idx, const std::string& where) {
  const Shape& s = t.shape();
  int64_t outer = prod(s, 0, axis), n = s[axis], inner = prod(s, axis + 1, s.size());
  Shape out = s;
  out.erase(out.begin() + axis);
  if (outer == 1 && t.dtype() != DataType::kString && t.buffer())
    return Tensor(t.dtype(), out, t.buffer(), t.offset() + static_cast<size_t>(idx * inner) * dtype_size(t.dtype()));
  BH_ASSIGN_OR_RETURN(Tensor r, new_tensor(t.dtype(), out));
  for (int64_t o = 0; o < outer; ++o) BH_RETURN_IF_ERROR(copy_elems(r, o * inner, t, (o * n + idx) * inner, inner, where));
  return r;
}

// Concatenates `parts` (all of the rank of `out`) along `axis` into `out`.
Status concat_into(const Tensor& out, const std::vector<Tensor>& parts, int axis, const std::string& where) {
  const Shape& os = out.shape();
  int64_t outer = prod(os, 0, axis), row = prod(os, axis, os.size());
  int64_t off = 0;
  for (const Tensor& p : parts) {
    int64_t inner = prod(p.shape(), axis, p.shape().size());
    for (int64_t o = 0; o < outer; ++o) BH_RETURN_IF_ERROR(copy_elems(out, o * row + off, p, o * inner, inner, where));
    off += inner;
  }
  return Status::ok();
}

Result<int64_t> read_int_scalar(const Tensor* t, const std::string& what, const std::string& where) {
  if (!t) return invalid_argument(where + what + " must be a tensor");
  if (t->dtype() != DataType::kInt64 && t->dtype() != DataType::kInt32)
    return invalid_argument(where + what + " must be int32 or int64, got " + t->describe());
  if (t->numel() != 1) return invalid_argument(where + what + " must hold exactly one element, got " + t->describe());
  if (!t->raw()) return invalid_argument(where + what + " is not in host memory");
  return t->dtype() == DataType::kInt64 ? t->data<int64_t>()[0] : static_cast<int64_t>(t->data<int32_t>()[0]);
}

Result<bool> read_bool_scalar(const Value* v, const std::string& what, const KernelContext& ctx) {
  if (v && v->is_tensor() && v->tensor.dtype() == DataType::kBool && v->tensor.numel() == 1 && v->tensor.raw())
    return *static_cast<const uint8_t*>(v->tensor.raw()) != 0;
  // Error paths only from here.
  const std::string& where = ctx.where();
  if (!v || !v->is_tensor()) return invalid_argument(where + what + " must be a bool tensor");
  const Tensor& t = v->tensor;
  if (t.dtype() != DataType::kBool) return invalid_argument(where + what + " must be bool, got " + t.describe());
  if (t.numel() != 1) return invalid_argument(where + what + " must hold exactly one element, got " + t.describe());
  return invalid_argument(where + what + " is not in host memory");
}

Result<Tensor> scalar_int64(int64_t v) {
  BH_ASSIGN_OR_RETURN(Tensor t, new_tensor(DataType::kInt64, {}));
  t.data<int64_t>()[0] = v;
  return t;
}

Result<Tensor> scalar_bool(bool v) {
  BH_ASSIGN_OR_RETURN(Tensor t, new_tensor(DataType::kBool, {}));
  *static_cast<uint8_t*>(t.raw()) = v ? 1 : 0;
  return t;
}

Status set_bool_output(KernelContext& ctx, int i, bool v) {
  BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_output(i, DataType::kBool, {}));
  *static_cast<uint8_t*>(t.raw()) = v ? 1 : 0;
  return Status::ok();
}

Result<std::shared_ptr<const ir::Graph>> graph_attr(const KernelInfo& info, const std::string& name) {
  const ir::Attribute* a = info.node.attr(name);
  if (!a || a->type != ir::AttrType::kGraph || !a->g)
    return invalid_argument(info.where() + "missing graph attribute '" + name + "'");
  return a->g;
}

// Shape and type of an empty stack of `elem` outputs: declared element shape when fully
// known, with `n` (0) inserted at `axis`.
Shape empty_stack_shape(const ir::ValueInfo* vi, int64_t axis_hint, int64_t n) {
  Shape s;
  if (vi && vi->shape) {
    bool fixed = true;
    for (const auto& d : *vi->shape) {
      if (!d.fixed()) fixed = false;
      s.push_back(d.value);
    }
    if (!fixed) s.clear();
    else {
      int64_t r = static_cast<int64_t>(s.size());
      int64_t a = axis_hint < 0 ? axis_hint + r + 1 : axis_hint;
      if (a < 0 || a > r) a = 0;
      s.insert(s.begin() + a, n);
      return s;
    }
  }
  return Shape{n};
}

DataType declared_dtype(const ir::ValueInfo* vi) {
  return vi && vi->dtype != DataType::kUndefined ? vi->dtype : DataType::kFloat32;
}

// Stacks per-iteration tensors along a new axis `axis` of output `i` (reversed when asked).
Status stack_output(KernelContext& ctx, int i, const std::vector<Tensor>& items, int64_t axis_attr, bool reverse,
                    const ir::ValueInfo* declared) {
  const std::string& where = ctx.where();
  if (items.empty()) {
    Shape s = empty_stack_shape(declared, axis_attr, 0);
    BH_ASSIGN_OR_RETURN(Tensor t, ctx.allocate_output(i, declared_dtype(declared), s));
    (void)t;
    return Status::ok();
  }
  const Tensor& first = items[0];
  int r = first.rank();
  BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, r + 1, where));
  for (const Tensor& t : items) {
    if (t.dtype() != first.dtype() || t.shape() != first.shape())
      return invalid_argument(where + "scan output " + std::to_string(i) + " changes from " + first.describe() + " to " +
                              t.describe() + " between iterations");
  }
  Shape os = first.shape();
  os.insert(os.begin() + axis, static_cast<int64_t>(items.size()));
  BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(i, first.dtype(), os));
  std::vector<Tensor> parts;
  parts.reserve(items.size());
  Shape ps = first.shape();
  ps.insert(ps.begin() + axis, 1);
  for (size_t k = 0; k < items.size(); ++k) parts.push_back(items[reverse ? items.size() - 1 - k : k].reshaped(ps));
  return concat_into(out, parts, axis, where);
}

std::vector<Value> input_values(KernelContext& ctx, int begin, int end) {
  std::vector<Value> v;
  for (int i = begin; i < end; ++i) {
    const Value* p = ctx.input_value(i);
    v.push_back(p ? *p : Value::none());
  }
  return v;
}

// ---------------------------------------------------------------------------------------
// If
// ---------------------------------------------------------------------------------------

Result<std::unique_ptr<Kernel>> make_if(const KernelInfo& info) {
  BH_ASSIGN_OR_RETURN(auto then_g, graph_attr(info, "then_branch"));
  BH_ASSIGN_OR_RETURN(auto else_g, graph_attr(info, "else_branch"));
  if (then_g->outputs.size() != else_g->outputs.size())
    return invalid_argument(info.where() + "then_branch has " + std::to_string(then_g->outputs.size()) +
                            " outputs but else_branch has " + std::to_string(else_g->outputs.size()));
  return make_kernel([](KernelContext& ctx) -> Status {
    BH_ASSIGN_OR_RETURN(bool c, read_bool_scalar(ctx.input_value(0), "cond", ctx));
    const char* branch = c ? "then_branch" : "else_branch";
    BH_ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.run_subgraph(branch, {}));
    if (static_cast<int>(outs.size()) != ctx.num_outputs())
      return invalid_argument(ctx.where() + branch + " produced " + std::to_string(outs.size()) + " outputs, the node has " +
                              std::to_string(ctx.num_outputs()));
    for (int i = 0; i < ctx.num_outputs(); ++i)
      if (ctx.output_wanted(i)) BH_RETURN_IF_ERROR(ctx.set_output(i, std::move(outs[i])));
    return Status::ok();
  });
}

// ---------------------------------------------------------------------------------------
// Loop
// ---------------------------------------------------------------------------------------

class LoopKernel final : public Kernel {
 public:
  explicit LoopKernel(std::shared_ptr<const ir::Graph> body) : body_(std::move(body)) {}

  Status compute(KernelContext& ctx) const override {
    const std::string& where = ctx.where();
    const int n_carried = std::max(0, ctx.num_inputs() - 2);
    const int n_body_out = static_cast<int>(body_->outputs.size());
    const int n_scan = n_body_out - 1 - n_carried;
    if (n_scan < 0)
      return invalid_argument(where + "body has " + std::to_string(n_body_out) + " outputs, expected at least " +
                              std::to_string(1 + n_carried) + " (cond + loop-carried values)");
    if (ctx.num_outputs() > n_carried + n_scan)
      return invalid_argument(where + "node has " + std::to_string(ctx.num_outputs()) + " outputs, the body yields " +
                              std::to_string(n_carried + n_scan));
    if (static_cast<int>(body_->inputs.size()) != 2 + n_carried)
      return invalid_argument(where + "body has " + std::to_string(body_->inputs.size()) + " inputs, expected " +
                              std::to_string(2 + n_carried));

    const bool has_m = ctx.has_input(0);
    const bool has_cond = ctx.has_input(1);
    int64_t max_trip = 0;
    if (has_m) {
      BH_ASSIGN_OR_RETURN(max_trip, read_int_scalar(ctx.input(0), "trip count M", where));
    }
    bool cond = true;
    if (has_cond) {
      BH_ASSIGN_OR_RETURN(cond, read_bool_scalar(ctx.input_value(1), "cond", ctx));
    }
    if (!has_m && !has_cond)
      return invalid_argument(where + "both the trip count M and cond are omitted: the loop would never end");

    std::vector<Value> carried = input_values(ctx, 2, 2 + n_carried);
    std::vector<std::vector<Tensor>> scans(n_scan);

    int64_t it = 0;
    while ((!has_m || it < max_trip) && (!has_cond || cond)) {
      std::vector<Value> in;
      in.reserve(2 + n_carried);
      BH_ASSIGN_OR_RETURN(Tensor iter_t, scalar_int64(it));
      BH_ASSIGN_OR_RETURN(Tensor cond_t, scalar_bool(cond));
      in.emplace_back(std::move(iter_t));
      in.emplace_back(std::move(cond_t));
      for (auto& v : carried) in.push_back(std::move(v));
      auto r = ctx.run_subgraph("body", std::move(in));
      if (!r.is_ok()) return r.status();
      std::vector<Value> outs = std::move(r).value();
      if (static_cast<int>(outs.size()) != n_body_out)
        return invalid_argument(where + "body returned " + std::to_string(outs.size()) + " values, expected " +
                                std::to_string(n_body_out));
      if (has_cond) {
        BH_ASSIGN_OR_RETURN(cond, read_bool_scalar(&outs[0], "body output cond", ctx));
      }
      for (int i = 0; i < n_carried; ++i) carried[i] = std::move(outs[1 + i]);
      for (int k = 0; k < n_scan; ++k) {
        Value& v = outs[1 + n_carried + k];
        if (!v.is_tensor())
          return invalid_argument(where + "scan output " + std::to_string(k) + " of the body is not a tensor (" +
                                  v.describe() + ")");
        scans[k].push_back(std::move(v.tensor));
      }
      ++it;
    }

    for (int i = 0; i < n_carried && i < ctx.num_outputs(); ++i)
      if (ctx.output_wanted(i)) BH_RETURN_IF_ERROR(ctx.set_output(i, std::move(carried[i])));
    for (int k = 0; k < n_scan && n_carried + k < ctx.num_outputs(); ++k) {
      if (!ctx.output_wanted(n_carried + k)) continue;
      BH_RETURN_IF_ERROR(stack_output(ctx, n_carried + k, scans[k], 0, false, &body_->outputs[1 + n_carried + k]));
    }
    return Status::ok();
  }

 private:
  std::shared_ptr<const ir::Graph> body_;
};

Result<std::unique_ptr<Kernel>> make_loop(const KernelInfo& info) {
  BH_ASSIGN_OR_RETURN(auto body, graph_attr(info, "body"));
  return std::unique_ptr<Kernel>(std::make_unique<LoopKernel>(std::move(body)));
}

// ---------------------------------------------------------------------------------------
// Scan (opset 9+)
// ---------------------------------------------------------------------------------------

class Scan9Kernel final : public Kernel {
 public:
  Scan9Kernel(std::shared_ptr<const ir::Graph> body, int64_t num_scan_inputs, std::vector<int64_t> in_axes,
              std::vector<int64_t> in_dirs, std::vector<int64_t> out_axes, std::vector<int64_t> out_dirs)
      : body_(std::move(body)),
        m_(num_scan_inputs),
        in_axes_(std::move(in_axes)),
        in_dirs_(std::move(in_dirs)),
        out_axes_(std::move(out_axes)),
        out_dirs_(std::move(out_dirs)) {}

  Status compute(KernelContext& ctx) const override {
    const std::string& where = ctx.where();
    const int n_in = ctx.num_inputs();
    const int m = static_cast<int>(m_);
    const int n_state = n_in - m;
    if (n_state < 0)
      return invalid_argument(where + "num_scan_inputs " + std::to_string(m) + " exceeds the " + std::to_string(n_in) +
                              " inputs");
    const int n_body_out = static_cast<int>(body_->outputs.size());
    const int k_out = n_body_out - n_state;
    if (k_out < 0 || static_cast<int>(body_->inputs.size()) != n_state + m)
      return invalid_argument(where + "body signature (" + std::to_string(body_->inputs.size()) + " inputs, " +
                              std::to_string(n_body_out) + " outputs) does not match " + std::to_string(n_state) +
                              " state variables and " + std::to_string(m) + " scan inputs");
    if (ctx.num_outputs() > n_state + k_out)
      return invalid_argument(where + "node has more outputs than the body yields");
    if (!in_axes_.empty() && static_cast<int>(in_axes_.size()) != m)
      return invalid_argument(where + "scan_input_axes has " + std::to_string(in_axes_.size()) + " entries, expected " +
                              std::to_string(m));
    if (!in_dirs_.empty() && static_cast<int>(in_dirs_.size()) != m)
      return invalid_argument(where + "scan_input_directions has " + std::to_string(in_dirs_.size()) +
                              " entries, expected " + std::to_string(m));
    if (!out_axes_.empty() && static_cast<int>(out_axes_.size()) != k_out)
      return invalid_argument(where + "scan_output_axes has " + std::to_string(out_axes_.size()) +
                              " entries, expected " + std::to_string(k_out));
    if (!out_dirs_.empty() && static_cast<int>(out_dirs_.size()) != k_out)
      return invalid_argument(where + "scan_output_directions has " + std::to_string(out_dirs_.size()) +
                              " entries, expected " + std::to_string(k_out));

    std::vector<Value> state = input_values(ctx, 0, n_state);
    std::vector<const Tensor*> xs(m);
    std::vector<int> axes(m);
    int64_t len = -1;
    for (int j = 0; j < m; ++j) {
      xs[j] = ctx.input(n_state + j);
      if (!xs[j]) return invalid_argument(where + "scan input " + std::to_string(j) + " must be a tensor");
      if (xs[j]->rank() < 1) return invalid_argument(where + "scan input " + std::to_string(j) + " is a scalar");
      BH_ASSIGN_OR_RETURN(axes[j], normalize_axis(in_axes_.empty() ? 0 : in_axes_[j], xs[j]->rank(), where));
      int64_t l = xs[j]->shape()[axes[j]];
      if (len >= 0 && l != len)
        return invalid_argument(where + "scan inputs disagree on the sequence length (" + std::to_string(len) + " vs " +
                                std::to_string(l) + ")");
      len = l;
    }
    if (len < 0) len = 0;

    std::vector<std::vector<Tensor>> scans(k_out);
    for (int64_t t = 0; t < len; ++t) {
      std::vector<Value> in;
      in.reserve(n_state + m);
      for (auto& v : state) in.push_back(std::move(v));
      for (int j = 0; j < m; ++j) {
        bool rev = !in_dirs_.empty() && in_dirs_[j] != 0;
        BH_ASSIGN_OR_RETURN(Tensor s, slice_axis(*xs[j], axes[j], rev ? len - 1 - t : t, where));
        in.emplace_back(std::move(s));
      }
      BH_ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.run_subgraph("body", std::move(in)));
      if (static_cast<int>(outs.size()) != n_body_out)
        return invalid_argument(where + "body returned " + std::to_string(outs.size()) + " values, expected " +
                                std::to_string(n_body_out));
      for (int i = 0; i < n_state; ++i) state[i] = std::move(outs[i]);
      for (int k = 0; k < k_out; ++k) {
        Value& v = outs[n_state + k];
        if (!v.is_tensor()) return invalid_argument(where + "scan output " + std::to_string(k) + " is not a tensor");
        scans[k].push_back(std::move(v.tensor));
      }
    }
    for (int i = 0; i < n_state && i < ctx.num_outputs(); ++i)
      if (ctx.output_wanted(i)) BH_RETURN_IF_ERROR(ctx.set_output(i, std::move(state[i])));
    for (int k = 0; k < k_out && n_state + k < ctx.num_outputs(); ++k) {
      if (!ctx.output_wanted(n_state + k)) continue;
      int64_t axis = out_axes_.empty() ? 0 : out_axes_[k];
      bool rev = !out_dirs_.empty() && out_dirs_[k] != 0;
      BH_RETURN_IF_ERROR(stack_output(ctx, n_state + k, scans[k], axis, rev, &body_->outputs[n_state + k]));
    }
    return Status::ok();
  }

 private:
  std::shared_ptr<const ir::Graph> body_;
  int64_t m_;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
};

Result<std::unique_ptr<Kernel>> make_scan9(const KernelInfo& info) {
  BH_ASSIGN_OR_RETURN(auto body, graph_attr(info, "body"));
  if (!info.node.has_attr("num_scan_inputs"))
    return invalid_argument(info.where() + "missing attribute num_scan_inputs");
  int64_t m = info.node.attr_int("num_scan_inputs", 0);
  if (m < 1) return invalid_argument(info.where() + "num_scan_inputs must be >= 1, got " + std::to_string(m));
  return std::unique_ptr<Kernel>(std::make_unique<Scan9Kernel>(
      std::move(body), m, info.node.attr_ints("scan_input_axes"), info.node.attr_ints("scan_input_directions"),
      info.node.attr_ints("scan_output_axes"), info.node.attr_ints("scan_output_directions")));
}

// ---------------------------------------------------------------------------------------
// Scan (opset 8): a leading batch axis on every input, the sequence axis after it, and an
// optional sequence_lens input first.
// ---------------------------------------------------------------------------------------

class Scan8Kernel final : public Kernel {
 public:
  Scan8Kernel(std::shared_ptr<const ir::Graph> body, int64_t num_scan_inputs, std::vector<int64_t> dirs)
      : body_(std::move(body)), m_(num_scan_inputs), dirs_(std::move(dirs)) {}

  Status compute(KernelContext& ctx) const override {
    const std::string& where = ctx.where();
    const int n_in = ctx.num_inputs();
    const int m = static_cast<int>(m_);
    const int n_state = n_in - 1 - m;
    if (n_state < 0) return invalid_argument(where + "num_scan_inputs exceeds the number of inputs");
    const int n_body_out = static_cast<int>(body_->outputs.size());
    const int k_out = n_body_out - n_state;
    if (k_out < 0 || static_cast<int>(body_->inputs.size()) != n_state + m)
      return invalid_argument(where + "body signature does not match the state variables and scan inputs");
    if (ctx.num_outputs() > n_state + k_out) return invalid_argument(where + "node has more outputs than the body yields");
    if (!dirs_.empty() && static_cast<int>(dirs_.size()) != m)
      return invalid_argument(where + "directions has " + std::to_string(dirs_.size()) + " entries, expected " +
                              std::to_string(m));

    int64_t batch = -1, max_len = -1;
    std::vector<const Tensor*> states(n_state), xs(m);
    for (int i = 0; i < n_state; ++i) {
      states[i] = ctx.input(1 + i);
      if (!states[i] || states[i]->rank() < 1)
        return invalid_argument(where + "state variable " + std::to_string(i) + " must be a tensor with a batch axis");
      if (batch >= 0 && states[i]->dim(0) != batch) return invalid_argument(where + "batch sizes of the inputs differ");
      batch = states[i]->dim(0);
    }
    for (int j = 0; j < m; ++j) {
      xs[j] = ctx.input(1 + n_state + j);
      if (!xs[j] || xs[j]->rank() < 2)
        return invalid_argument(where + "scan input " + std::to_string(j) + " must be a tensor of rank >= 2");
      if (batch >= 0 && xs[j]->dim(0) != batch) return invalid_argument(where + "batch sizes of the inputs differ");
      batch = xs[j]->dim(0);
      if (max_len >= 0 && xs[j]->dim(1) != max_len)
        return invalid_argument(where + "scan inputs disagree on the sequence length");
      max_len = xs[j]->dim(1);
    }
    if (batch < 0) batch = 0;
    if (max_len < 0) max_len = 0;
    std::vector<int64_t> lens(batch, max_len);
    if (ctx.has_input(0)) {
      const Tensor* sl = ctx.input(0);
      if (!sl || (sl->dtype() != DataType::kInt64 && sl->dtype() != DataType::kInt32) || sl->numel() != batch)
        return invalid_argument(where + "sequence_lens must be an integer tensor of " + std::to_string(batch) +
                                " elements");
      lens = read_int_tensor(*sl);
      for (int64_t l : lens)
        if (l < 0 || l > max_len)
          return invalid_argument(where + "sequence_lens value " + std::to_string(l) + " is outside [0, " +
                                  std::to_string(max_len) + "]");
    }

    // Per batch item: final states and per-step outputs.
    std::vector<std::vector<Tensor>> final_states(n_state, std::vector<Tensor>(batch));
    std::vector<std::vector<std::vector<Tensor>>> outs_per_batch(k_out, std::vector<std::vector<Tensor>>(batch));
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Value> st;
      for (int i = 0; i < n_state; ++i) {
        BH_ASSIGN_OR_RETURN(Tensor s, slice_axis(*states[i], 0, b, where));
        st.emplace_back(std::move(s));
      }
      std::vector<Tensor> seqs(m);
      for (int j = 0; j < m; ++j) {
        BH_ASSIGN_OR_RETURN(seqs[j], slice_axis(*xs[j], 0, b, where));
      }
      for (int64_t t = 0; t < lens[b]; ++t) {
        std::vector<Value> in;
        for (auto& v : st) in.push_back(std::move(v));
        for (int j = 0; j < m; ++j) {
          bool rev = !dirs_.empty() && dirs_[j] != 0;
          BH_ASSIGN_OR_RETURN(Tensor s, slice_axis(seqs[j], 0, rev ? lens[b] - 1 - t : t, where));
          in.emplace_back(std::move(s));
        }
        BH_ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.run_subgraph("body", std::move(in)));
        if (static_cast<int>(outs.size()) != n_body_out)
          return invalid_argument(where + "body returned " + std::to_string(outs.size()) + " values, expected " +
                                  std::to_string(n_body_out));
        st.assign(outs.begin(), outs.begin() + n_state);
        for (int k = 0; k < k_out; ++k) {
          if (!outs[n_state + k].is_tensor())
            return invalid_argument(where + "scan output " + std::to_string(k) + " is not a tensor");
          outs_per_batch[k][b].push_back(outs[n_state + k].tensor);
        }
      }
      for (int i = 0; i < n_state; ++i) {
        if (!st[i].is_tensor()) return invalid_argument(where + "state output " + std::to_string(i) + " is not a tensor");
        final_states[i][b] = st[i].tensor;
      }
    }

    for (int i = 0; i < n_state && i < ctx.num_outputs(); ++i) {
      if (!ctx.output_wanted(i)) continue;
      if (batch == 0) {
        BH_ASSIGN_OR_RETURN(Tensor o, ctx.allocate_output(i, states[i]->dtype(), states[i]->shape()));
        (void)o;
        continue;
      }
      const Tensor& f0 = final_states[i][0];
      Shape os = f0.shape();
      os.insert(os.begin(), batch);
      BH_ASSIGN_OR_RETURN(Tensor o, ctx.allocate_output(i, f0.dtype(), os));
      int64_t n = f0.numel();
      for (int64_t b = 0; b < batch; ++b) {
        const Tensor& fb = final_states[i][b];
        if (fb.shape() != f0.shape() || fb.dtype() != f0.dtype())
          return invalid_argument(where + "final state " + std::to_string(i) + " differs in shape across the batch");
        BH_RETURN_IF_ERROR(copy_elems(o, b * n, fb, 0, n, where));
      }
    }
    for (int k = 0; k < k_out && n_state + k < ctx.num_outputs(); ++k) {
      if (!ctx.output_wanted(n_state + k)) continue;
      const Tensor* proto = nullptr;
      for (int64_t b = 0; b < batch && !proto; ++b)
        if (!outs_per_batch[k][b].empty()) proto = &outs_per_batch[k][b][0];
      if (!proto) {
        Shape s = empty_stack_shape(&body_->outputs[n_state + k], 0, max_len);
        s.insert(s.begin(), batch);
        BH_ASSIGN_OR_RETURN(Tensor o, ctx.allocate_output(n_state + k, declared_dtype(&body_->outputs[n_state + k]), s));
        if (o.dtype() != DataType::kString && o.nbytes()) std::memset(o.raw(), 0, o.nbytes());
        continue;
      }
      Shape os = proto->shape();
      int64_t n = proto->numel();
      os.insert(os.begin(), max_len);
      os.insert(os.begin(), batch);
      BH_ASSIGN_OR_RETURN(Tensor o, ctx.allocate_output(n_state + k, proto->dtype(), os));
      if (o.dtype() != DataType::kString && o.nbytes()) std::memset(o.raw(), 0, o.nbytes());
      for (int64_t b = 0; b < batch; ++b) {
        for (size_t t = 0; t < outs_per_batch[k][b].size(); ++t) {
          const Tensor& e = outs_per_batch[k][b][t];
          if (e.shape() != proto->shape() || e.dtype() != proto->dtype())
            return invalid_argument(where + "scan output " + std::to_string(k) + " changes shape between iterations");
          BH_RETURN_IF_ERROR(copy_elems(o, (b * max_len + static_cast<int64_t>(t)) * n, e, 0, n, where));
        }
      }
    }
    return Status::ok();
  }

 private:
  std::shared_ptr<const ir::Graph> body_;
  int64_t m_;
  std::vector<int64_t> dirs_;
};

Result<std::unique_ptr<Kernel>> make_scan8(const KernelInfo& info) {
  BH_ASSIGN_OR_RETURN(auto body, graph_attr(info, "body"));
  int64_t m = info.node.attr_int("num_scan_inputs", 0);
  if (m < 1) return invalid_argument(info.where() + "num_scan_inputs must be >= 1, got " + std::to_string(m));
  return std::unique_ptr<Kernel>(std::make_unique<Scan8Kernel>(std::move(body), m, info.node.attr_ints("directions")));
}

// ---------------------------------------------------------------------------------------
// SequenceMap
// ---------------------------------------------------------------------------------------

class SequenceMapKernel final : public Kernel {
 public:
  explicit SequenceMapKernel(std::shared_ptr<const ir::Graph> body) : body_(std::move(body)) {}

  Status compute(KernelContext& ctx) const override {
    const std::string& where = ctx.where();
    const int n_in = ctx.num_inputs();
    const Value* seq0 = ctx.input_value(0);
    if (!seq0 || !seq0->is_sequence()) return invalid_argument(where + "input 0 must be a sequence");
    const size_t len = seq0->sequence.size();
    std::vector<const Value*> ins(n_in);
    for (int i = 0; i < n_in; ++i) {
      ins[i] = ctx.input_value(i);
      if (!ins[i] || ins[i]->is_none()) return invalid_argument(where + "input " + std::to_string(i) + " is missing");
      if (ins[i]->is_sequence() && ins[i]->sequence.size() != len)
        return invalid_argument(where + "input sequences differ in length (" + std::to_string(len) + " vs " +
                                std::to_string(ins[i]->sequence.size()) + ")");
    }
    if (static_cast<int>(body_->inputs.size()) != n_in)
      return invalid_argument(where + "body has " + std::to_string(body_->inputs.size()) + " inputs, expected " +
                              std::to_string(n_in));
    const int n_out = static_cast<int>(body_->outputs.size());
    if (ctx.num_outputs() > n_out) return invalid_argument(where + "node has more outputs than the body yields");
    std::vector<std::vector<Tensor>> res(n_out);
    for (size_t k = 0; k < len; ++k) {
      std::vector<Value> in;
      for (int i = 0; i < n_in; ++i) in.emplace_back(ins[i]->is_sequence() ? Value(ins[i]->sequence[k]) : *ins[i]);
      BH_ASSIGN_OR_RETURN(std::vector<Value> outs, ctx.run_subgraph("body", std::move(in)));
      if (static_cast<int>(outs.size()) != n_out)
        return invalid_argument(where + "body returned " + std::to_string(outs.size()) + " values, expected " +
                                std::to_string(n_out));
      for (int j = 0; j < n_out; ++j) {
        if (!outs[j].is_tensor()) return invalid_argument(where + "body output " + std::to_string(j) + " is not a tensor");
        res[j].push_back(std::move(outs[j].tensor));
      }
    }
    for (int j = 0; j < ctx.num_outputs(); ++j) {
      if (!ctx.output_wanted(j)) continue;
      DataType dt = res[j].empty() ? body_->outputs[j].dtype : res[j][0].dtype();
      for (const Tensor& t : res[j])
        if (t.dtype() != dt) return invalid_argument(where + "body output " + std::to_string(j) + " changes type");
      BH_RETURN_IF_ERROR(ctx.set_output(j, Value::make_sequence(std::move(res[j]), dt)));
    }
    return Status::ok();
  }

 private:
  std::shared_ptr<const ir::Graph> body_;
};

// ---------------------------------------------------------------------------------------
// Sequence operators
// ---------------------------------------------------------------------------------------

Result<const Value*> sequence_input(KernelContext& ctx, int i) {
  const Value* v = ctx.input_value(i);
  if (!v || !v->is_sequence())
    return invalid_argument(ctx.where() + "input " + std::to_string(i) + " must be a sequence, got " +
                            (v ? v->describe() : std::string("nothing")));
  return v;
}

DataType seq_dtype(const Value& v) {
  if (v.sequence_dtype != DataType::kUndefined) return v.sequence_dtype;
  return v.sequence.empty() ? DataType::kUndefined : v.sequence[0].dtype();
}

Result<std::unique_ptr<Kernel>> make_sequence_empty(const KernelInfo& info) {
  int64_t dt = info.node.attr_int("dtype", static_cast<int64_t>(DataType::kFloat32));
  if (!dtype_is_known(static_cast<int32_t>(dt)))
    return unsupported(info.where() + "unsupported dtype " + std::to_string(dt));
  DataType d = static_cast<DataType>(dt);
  return make_kernel([d](KernelContext& ctx) -> Status { return ctx.set_output(0, Value::make_sequence({}, d)); });
}

Result<std::unique_ptr<Kernel>> make_sequence_construct(const KernelInfo& info) {
  return make_kernel([](KernelContext& ctx) -> Status {
    std::vector<Tensor> items;
    DataType dt = DataType::kUndefined;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor* t = ctx.input(i);
      if (!t) return invalid_argument(ctx.where() + "input " + std::to_string(i) + " must be a tensor");
      if (dt != DataType::kUndefined && t->dtype() != dt)
        return invalid_argument(ctx.where() + "input " + std::to_string(i) + " is " + dtype_name(t->dtype()) +
                                ", expected " + dtype_name(dt));
      dt = t->dtype();
      items.push_back(*t);
    }
    if (items.empty()) return invalid_argument(ctx.where() + "needs at least one input");
    return ctx.set_output(0, Value::make_sequence(std::move(items), dt));
  });
}

Result<std::unique_ptr<Kernel>> make_sequence_at(const KernelInfo& info) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const std::string& where = ctx.where();
    BH_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    BH_ASSIGN_OR_RETURN(int64_t pos, read_int_scalar(ctx.input(1), "position", where));
    int64_t n = static_cast<int64_t>(seq->sequence.size());
    if (pos < -n || pos >= n)
      return invalid_argument(where + "position " + std::to_string(pos) + " is out of range for a sequence of " +
                              std::to_string(n));
    if (pos < 0) pos += n;
    return ctx.set_output(0, Value(seq->sequence[pos]));
  });
}

Result<std::unique_ptr<Kernel>> make_sequence_insert(const KernelInfo& info) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const std::string& where = ctx.where();
    BH_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    const Tensor* t = ctx.input(1);
    if (!t) return invalid_argument(where + "input 1 must be a tensor");
    DataType dt = seq_dtype(*seq);
    if (dt != DataType::kUndefined && t->dtype() != dt)
      return invalid_argument(where + "cannot insert " + t->describe() + " into a sequence of " + dtype_name(dt));
    int64_t n = static_cast<int64_t>(seq->sequence.size());
    int64_t pos = n;
    if (ctx.has_input(2)) {
      BH_ASSIGN_OR_RETURN(pos, read_int_scalar(ctx.input(2), "position", where));
      if (pos < -n || pos > n)
        return invalid_argument(where + "position " + std::to_string(pos) + " is out of range for a sequence of " +
                                std::to_string(n));
      if (pos < 0) pos += n;
    }
    std::vector<Tensor> items = seq->sequence;
    items.insert(items.begin() + pos, *t);
    return ctx.set_output(0, Value::make_sequence(std::move(items), t->dtype()));
  });
}

Result<std::unique_ptr<Kernel>> make_sequence_erase(const KernelInfo& info) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const std::string& where = ctx.where();
    BH_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    int64_t n = static_cast<int64_t>(seq->sequence.size());
    int64_t pos = n - 1;
    if (ctx.has_input(1)) {
      BH_ASSIGN_OR_RETURN(pos, read_int_scalar(ctx.input(1), "position", where));
    }
    if (pos < -n || pos >= n)
      return invalid_argument(where + "position " + std::to_string(pos) + " is out of range for a sequence of " +
                              std::to_string(n));
    if (pos < 0) pos += n;
    std::vector<Tensor> items = seq->sequence;
    items.erase(items.begin() + pos);
    return ctx.set_output(0, Value::make_sequence(std::move(items), seq_dtype(*seq)));
  });
}

Result<std::unique_ptr<Kernel>> make_sequence_length(const KernelInfo& info) {
  return make_kernel([](KernelContext& ctx) -> Status {
    BH_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    BH_ASSIGN_OR_RETURN(Tensor o, ctx.allocate_output(0, DataType::kInt64, {}));
    o.data<int64_t>()[0] = static_cast<int64_t>(seq->sequence.size());
    return Status::ok();
  });
}

Result<std::unique_ptr<Kernel>> make_split_to_sequence(const KernelInfo& info) {
  int64_t axis_attr = info.node.attr_int("axis", 0);
  bool keepdims = info.node.attr_int("keepdims", 1) != 0;
  return make_kernel([axis_attr, keepdims](KernelContext& ctx) -> Status {
    const std::string& where = ctx.where();
    const Tensor* x = ctx.input(0);
    if (!x) return invalid_argument(where + "input must be a tensor");
    if (x->rank() < 1) return invalid_argument(where + "input must have rank >= 1, got " + x->describe());
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, x->rank(), where));
    const int64_t dim = x->dim(axis);
    std::vector<int64_t> sizes;
    bool squeeze = false;
    if (ctx.has_input(1)) {
      const Tensor* sp = ctx.input(1);
      if (!sp || (sp->dtype() != DataType::kInt64 && sp->dtype() != DataType::kInt32) || sp->rank() > 1)
        return invalid_argument(where + "split must be an int32/int64 scalar or 1-D tensor");
      std::vector<int64_t> v = read_int_tensor(*sp);
      if (sp->rank() == 0) {
        if (v.size() != 1 || v[0] <= 0) return invalid_argument(where + "split must be positive");
        for (int64_t off = 0; off < dim; off += v[0]) sizes.push_back(std::min(v[0], dim - off));
      } else {
        int64_t sum = 0;
        for (int64_t s : v) {
          if (s < 0) return invalid_argument(where + "split has a negative entry " + std::to_string(s));
          sum += s;
        }
        if (sum != dim)
          return invalid_argument(where + "split sums to " + std::to_string(sum) + " but the axis has " +
                                  std::to_string(dim) + " elements");
        sizes = std::move(v);
      }
    } else {
      sizes.assign(static_cast<size_t>(dim), 1);
      squeeze = !keepdims;
    }
    const Shape& xs = x->shape();
    int64_t outer = prod(xs, 0, axis), inner = prod(xs, axis + 1, xs.size());
    std::vector<Tensor> items;
    int64_t start = 0;
    for (int64_t s : sizes) {
      Shape os = xs;
      os[axis] = s;
      BH_ASSIGN_OR_RETURN(Tensor t, new_tensor(x->dtype(), os));
      for (int64_t o = 0; o < outer; ++o)
        BH_RETURN_IF_ERROR(copy_elems(t, o * s * inner, *x, (o * dim + start) * inner, s * inner, where));
      if (squeeze) {
        os.erase(os.begin() + axis);
        t = t.reshaped(os);
      }
      items.push_back(std::move(t));
      start += s;
    }
    return ctx.set_output(0, Value::make_sequence(std::move(items), x->dtype()));
  });
}

Result<std::unique_ptr<Kernel>> make_concat_from_sequence(const KernelInfo& info) {
  if (!info.node.has_attr("axis")) return invalid_argument(info.where() + "missing attribute axis");
  int64_t axis_attr = info.node.attr_int("axis", 0);
  bool new_axis = info.node.attr_int("new_axis", 0) != 0;
  return make_kernel([axis_attr, new_axis](KernelContext& ctx) -> Status {
    const std::string& where = ctx.where();
    BH_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
    if (seq->sequence.empty()) return invalid_argument(where + "input sequence is empty");
    const Tensor& first = seq->sequence[0];
    const int r = first.rank();
    BH_ASSIGN_OR_RETURN(int axis, normalize_axis(axis_attr, new_axis ? r + 1 : r, where));
    if (!new_axis && r == 0) return invalid_argument(where + "cannot concatenate scalars without new_axis");
    std::vector<Tensor> parts;
    Shape os = first.shape();
    if (new_axis) os.insert(os.begin() + axis, 0);
    else os[axis] = 0;
    for (const Tensor& t : seq->sequence) {
      if (t.dtype() != first.dtype() || t.rank() != r)
        return invalid_argument(where + "sequence elements " + first.describe() + " and " + t.describe() + " differ");
      for (int d = 0; d < r; ++d) {
        if (!new_axis && d == axis) continue;
        if (t.shape()[d] != first.shape()[d])
          return invalid_argument(where + "sequence elements " + first.describe() + " and " + t.describe() +
                                  " cannot be concatenated along axis " + std::to_string(axis));
      }
      Shape ps = t.shape();
      if (new_axis) ps.insert(ps.begin() + axis, 1);
      os[axis] += ps[axis];
      parts.push_back(t.reshaped(ps));
    }
    BH_ASSIGN_OR_RETURN(Tensor out, ctx.allocate_output(0, first.dtype(), os));
    return concat_into(out, parts, axis, where);
  });
}

// ---------------------------------------------------------------------------------------
// Optional operators
// ---------------------------------------------------------------------------------------

Result<std::unique_ptr<Kernel>> make_optional(const KernelInfo& info) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const Value* v = ctx.input_value(0);
    Value out = v ? *v : Value::none();
    out.is_optional = true;
    return ctx.set_output(0, std::move(out));
  });
}

Result<std::unique_ptr<Kernel>> make_optional_has_element(const KernelInfo& info) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const Value* v = ctx.input_value(0);
    return set_bool_output(ctx, 0, v != nullptr && !v->is_none());
  });
}

Result<std::unique_ptr<Kernel>> make_optional_get_element(const KernelInfo& info) {
  return make_kernel([](KernelContext& ctx) -> Status {
    const Value* v = ctx.input_value(0);
    if (!v || v->is_none()) return invalid_argument(ctx.where() + "the optional input is empty");
    Value out = *v;
    out.is_optional = false;
    return ctx.set_output(0, std::move(out));
  });
}

}  // namespace

void register_control_flow_kernels(KernelTable& t) {
  t.add("If", 1, make_if);
  t.add("Loop", 1, make_loop);
  t.add("Scan", 8, make_scan8);
  t.add("Scan", 9, make_scan9);
  t.add("SequenceMap", 17, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
    BH_ASSIGN_OR_RETURN(auto body, graph_attr(info, "body"));
    return std::unique_ptr<Kernel>(std::make_unique<SequenceMapKernel>(std::move(body)));
  });
  t.add("SequenceEmpty", 11, make_sequence_empty);
  t.add("SequenceConstruct", 11, make_sequence_construct);
  t.add("SequenceAt", 11, make_sequence_at);
  t.add("SequenceInsert", 11, make_sequence_insert);
  t.add("SequenceErase", 11, make_sequence_erase);
  t.add("SequenceLength", 11, make_sequence_length);
  t.add("SplitToSequence", 11, make_split_to_sequence);
  t.add("ConcatFromSequence", 11, make_concat_from_sequence);
  t.add("Optional", 15, make_optional);
  t.add("OptionalHasElement", 15, make_optional_has_element);
  t.add("OptionalGetElement", 15, make_optional_get_element);
}

}  // namespace bulkhead::cpu
