#include "isolate/protocol.h"

#include <bit>
#include <cstdio>

#include "isolate/wire.h"

namespace bulkhead::isolate {
namespace {

// Every SessionOptions field must reach the worker: when this fails, a field was added
// or changed — forward it in put_options/get_options below, then update the size.
// (share_weights, release_idle_memory and one_thread_when_small, bools, sit in what was
// padding after max_concurrent_runs.)
static_assert(sizeof(SessionOptions) == 224,
              "SessionOptions changed: forward the new field to the worker in src/isolate/protocol.cc");

Status malformed(const char* what) { return internal_error(std::string("malformed ") + what + " message from the peer"); }

void put_options(Writer& w, const SessionOptions& o) {
  w.strs(o.devices);
  w.i32(o.threads);
  w.u8(o.graph_capture);
  w.i32(o.optimization_level);
  w.str(o.isolation);
  w.i32(o.worker_timeout_ms);
  w.str(o.worker_binary);
  w.str(o.submit_policy);
  w.u64(o.max_file_bytes);
  w.u64(o.max_tensor_bytes);
  w.i64(o.max_loop_iterations);
  w.i64(o.run_timeout_ms);
  w.i32(o.max_concurrent_runs);
  w.u8(o.share_weights);
  w.u8(o.release_idle_memory);
  w.i32(o.release_idle_after_ms);
  w.u8(o.one_thread_when_small);
  w.str(o.precision);
}

SessionOptions get_options(Reader& r) {
  SessionOptions o;
  o.devices = r.strs();
  o.threads = r.i32();
  o.graph_capture = r.u8() != 0;
  o.optimization_level = r.i32();
  o.isolation = r.str();
  o.worker_timeout_ms = r.i32();
  o.worker_binary = r.str();
  o.submit_policy = r.str();
  o.max_file_bytes = r.u64();
  o.max_tensor_bytes = r.u64();
  o.max_loop_iterations = r.i64();
  o.run_timeout_ms = r.i64();
  o.max_concurrent_runs = r.i32();
  o.share_weights = r.u8() != 0;
  o.release_idle_memory = r.u8() != 0;
  o.release_idle_after_ms = r.i32();
  o.one_thread_when_small = r.u8() != 0;
  o.precision = r.str();
  return o;
}

void put_io(Writer& w, const IoInfo& io) {
  w.str(io.name);
  w.i32(static_cast<int32_t>(io.dtype));
  w.i64s(io.shape);
  w.strs(io.dim_names);
  w.u8(io.has_shape);
  w.u8(io.is_tensor);
  w.str(io.type_string);
}

IoInfo get_io(Reader& r) {
  IoInfo io;
  io.name = r.str();
  io.dtype = static_cast<DataType>(r.i32());
  io.shape = r.i64s();
  io.dim_names = r.strs();
  io.has_shape = r.u8() != 0;
  io.is_tensor = r.u8() != 0;
  io.type_string = r.str();
  return io;
}

void put_ios(Writer& w, const std::vector<IoInfo>& v) {
  w.u32(static_cast<uint32_t>(v.size()));
  for (auto& io : v) put_io(w, io);
}

std::vector<IoInfo> get_ios(Reader& r) {
  std::vector<IoInfo> v(r.count(8));
  for (auto& io : v) io = get_io(r);
  return v;
}

void put_bools(Writer& w, const std::vector<bool>& v) {
  w.u32(static_cast<uint32_t>(v.size()));
  for (bool b : v) w.u8(b);
}

std::vector<bool> get_bools(Reader& r) {
  std::vector<bool> v(r.count(1));
  for (size_t i = 0; i < v.size(); ++i) v[i] = r.u8() != 0;
  return v;
}

}  // namespace

std::string encode(const LoadRequest& l) {
  Writer w;
  w.u32(l.version);
  w.str(l.model);
  w.u8(l.from_bytes);
  w.u64(l.bytes_size);
  put_options(w, l.options);
  return w.take();
}

Result<LoadRequest> decode_load_request(const std::string& payload) {
  Reader r(payload);
  LoadRequest l;
  l.version = r.u32();
  if (r.ok() && l.version != kProtocolVersion)
    return Status(StatusCode::kFailedPrecondition, "the worker speaks protocol version " + std::to_string(kProtocolVersion) +
                                                       ", the supervisor " + std::to_string(l.version) +
                                                       ": worker_binary must be the same bulkhead build");
  l.model = r.str();
  l.from_bytes = r.u8() != 0;
  l.bytes_size = r.u64();
  l.options = get_options(r);
  if (!r.ok() || !r.at_end()) return malformed("load");
  return l;
}

std::string encode(const ModelInfo& m) {
  Writer w;
  put_ios(w, m.all_inputs);
  put_bools(w, m.required);
  put_bools(w, m.bindable);
  put_ios(w, m.outputs);
  w.u32(static_cast<uint32_t>(m.placement.size()));
  for (auto& [dev, n] : m.placement) {
    w.str(dev);
    w.i32(n);
  }
  w.str(m.precision.requested);
  w.str(m.precision.effective);
  w.i32(m.precision.bf16_nodes);
  w.str(m.precision.note);
  return w.take();
}

Result<ModelInfo> decode_model_info(const std::string& payload) {
  Reader r(payload);
  ModelInfo m;
  m.all_inputs = get_ios(r);
  m.required = get_bools(r);
  m.bindable = get_bools(r);
  m.outputs = get_ios(r);
  m.placement.resize(r.count(12));
  for (auto& [dev, n] : m.placement) {
    dev = r.str();
    n = r.i32();
  }
  m.precision.requested = r.str();
  m.precision.effective = r.str();
  m.precision.bf16_nodes = r.i32();
  m.precision.note = r.str();
  if (!r.ok() || !r.at_end() || m.required.size() != m.all_inputs.size() || m.bindable.size() != m.all_inputs.size())
    return malformed("ready");
  return m;
}

std::string encode(const RunRequest& q) {
  Writer w;
  w.strs(q.outputs);
  w.u8(q.profile);
  w.u64(q.region_bytes);
  w.u64(q.region_id);
  w.str(q.values);
  w.u64(q.output_region);
  w.u32(static_cast<uint32_t>(q.forget_regions.size()));
  for (uint64_t id : q.forget_regions) w.u64(id);
  w.u32(static_cast<uint32_t>(q.lent.size()));
  for (const LentInput& l : q.lent) {
    w.u64(l.uid);
    w.u64(l.bytes);
    w.u8(l.fd);
  }
  w.u32(static_cast<uint32_t>(q.forget_lent.size()));
  for (uint64_t id : q.forget_lent) w.u64(id);
  w.i64(q.timeout_ms);
  return w.take();
}

Result<RunRequest> decode_run_request(const std::string& payload) {
  Reader r(payload);
  RunRequest q;
  q.outputs = r.strs();
  q.profile = r.u8() != 0;
  q.region_bytes = r.u64();
  q.region_id = r.u64();
  q.values = r.str();
  q.output_region = r.u64();
  q.forget_regions.resize(r.count(8));
  for (uint64_t& id : q.forget_regions) id = r.u64();
  q.lent.resize(r.count(17));
  for (LentInput& l : q.lent) {
    l.uid = r.u64();
    l.bytes = r.u64();
    l.fd = r.u8() != 0;
  }
  q.forget_lent.resize(r.count(8));
  for (uint64_t& id : q.forget_lent) id = r.u64();
  q.timeout_ms = r.i64();
  if (!r.ok() || !r.at_end()) return malformed("run");
  return q;
}

std::string encode(const RunReply& a) {
  Writer w;
  w.u64(a.region_bytes);
  w.u64(a.region_id);
  w.str(a.values);
  w.u32(static_cast<uint32_t>(a.profile.size()));
  for (auto& p : a.profile) {
    w.str(p.node);
    w.str(p.op_type);
    w.u64(std::bit_cast<uint64_t>(p.ms));
    w.str(p.shapes);
  }
  w.u64(std::bit_cast<uint64_t>(a.handled_ms));
  return w.take();
}

Result<RunReply> decode_run_reply(const std::string& payload) {
  Reader r(payload);
  RunReply a;
  a.region_bytes = r.u64();
  a.region_id = r.u64();
  a.values = r.str();
  a.profile.resize(r.count(32));
  for (auto& p : a.profile) {
    p.node = r.str();
    p.op_type = r.str();
    p.ms = std::bit_cast<double>(r.u64());
    p.shapes = r.str();
  }
  a.handled_ms = std::bit_cast<double>(r.u64());
  if (!r.ok() || !r.at_end() || !(a.handled_ms >= 0 && a.handled_ms < 1e12)) return malformed("run reply");
  return a;
}

NodeProfile isolation_entry(const char* what, double ms, std::optional<uint64_t> bytes) {
  NodeProfile p;
  p.node = what;
  p.op_type = kIsolationOp;
  p.ms = ms;
  if (bytes) {
    char b[48];
    // KiB below a MiB, so that a small copy does not read as none.
    if (*bytes == 0 || *bytes >= (1u << 20)) std::snprintf(b, sizeof b, "%.2f MiB", static_cast<double>(*bytes) / (1 << 20));
    else std::snprintf(b, sizeof b, "%.1f KiB", static_cast<double>(*bytes) / 1024);
    p.shapes = b;
  }
  return p;
}

std::string encode(const Status& s) {
  Writer w;
  w.u32(static_cast<uint32_t>(s.code()));
  w.str(s.message());
  return w.take();
}

Status decode_status(const std::string& payload) {
  Reader r(payload);
  uint32_t code = r.u32();
  std::string message = r.str();
  if (!r.ok() || !r.at_end() || code == 0 || code > static_cast<uint32_t>(StatusCode::kDeadlineExceeded))
    return malformed("error");
  return Status(static_cast<StatusCode>(code), std::move(message));
}

}  // namespace bulkhead::isolate
