// Where kernels' work goes.
//
// A QueueSlot is an in-order command queue with the kernel objects made for it (a
// cl_kernel's arguments are per object, so each queue has its own; the programs they
// come from are the device's, shared). A slot has one user at a time: a run (session.h)
// or one constant-folding call.
//
// A Stream enqueues a user's kernels on its slot and submits them by the submission
// policy (policy.h), counting dispatches and submits in the device. Host data that
// kernels need (tables, normalised indices) is uploaded without blocking and kept alive
// by the stream until the next submit has completed. Used by one thread at a time.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "cl_util.h"
#include "policy.h"

namespace bulkhead::opencl {

class Device;

class QueueSlot {
 public:
  QueueSlot(const Device& device, QueueHandle queue) : device_(device), queue_(std::move(queue)) {}
  cl_command_queue queue() const { return queue_.get(); }
  // The kernel `name` for this queue, made on first use.
  Result<cl_kernel> kernel(const std::string& name);

 private:
  const Device& device_;
  QueueHandle queue_;
  std::unordered_map<std::string, KernelHandle> kernels_;
};

// A buffer argument: the kernel takes the buffer and its first element's offset.
struct Buf {
  cl_mem mem = nullptr;  // null for an absent optional operand
  cl_ulong offset = 0;   // elements
};

// Work-items of one launch: `global` in `dims` dimensions, in work-groups of `local`
// (all 0: the driver picks).
struct Range {
  cl_uint dims = 1;
  size_t global[3] = {1, 1, 1};
  size_t local[3] = {0, 0, 0};
};
inline Range items(size_t n) { return Range{1, {n, 1, 1}, {0, 0, 0}}; }
// gx x gy x gz work-groups of lx x ly x 1 work-items.
inline Range groups(size_t gx, size_t gy, size_t gz, size_t lx, size_t ly) {
  return Range{3, {gx * lx, gy * ly, gz}, {lx, ly, 1}};
}

class Stream {
 public:
  // `run_work`: whether submits count as runs' submits (not for constant folding).
  Stream(Device& device, QueueSlot& slot, SubmitPolicy policy, bool run_work)
      : device_(device), slot_(slot), policy_(std::move(policy)), run_work_(run_work) {}

  // Launches kernel `name` over `range` with `args` (Buf: buffer and offset; anything else
  // by value, its C++ type matching the kernel's parameter); `written` is the bytes it
  // writes (for the auto policy).
  template <class... Args>
  Status dispatch(const std::string& name, const Range& range, uint64_t written, const Args&... args) {
    OCL_ASSIGN(cl_kernel k, slot_.kernel(name));
    cl_uint index = 0;
    cl_int err = CL_SUCCESS;
    ((err = err == CL_SUCCESS ? set_arg(k, index, args) : err), ...);
    if (err != CL_SUCCESS) return cl_status(err, "setting argument " + std::to_string(index) + " of kernel " + name);
    return launch(name, k, range, written);
  }
  // Copies `bytes` of `data` to `dst` at byte `offset` before the kernels enqueued next.
  Status upload(cl_mem dst, uint64_t offset, const void* data, size_t bytes);
  // Reads `bytes` at byte `offset` of `src` after everything queued so far (submits first).
  Status read(cl_mem src, uint64_t offset, void* dst, size_t bytes);
  // Submits what is queued and waits for it (nothing when nothing is queued).
  Status submit();

 private:
  static cl_int set_arg(cl_kernel k, cl_uint& index, const Buf& b) {
    const cl_int err = clSetKernelArg(k, index++, sizeof(cl_mem), &b.mem);
    return err != CL_SUCCESS ? err : clSetKernelArg(k, index++, sizeof(cl_ulong), &b.offset);
  }
  template <class T>
  static cl_int set_arg(cl_kernel k, cl_uint& index, const T& v) {
    static_assert(std::is_trivially_copyable_v<T> && !std::is_same_v<T, bool> && !std::is_pointer_v<T>,
                  "kernel arguments are OpenCL scalars or args.h blocks");
    return clSetKernelArg(k, index++, sizeof(T), &v);
  }
  Status launch(const std::string& name, cl_kernel k, const Range& range, uint64_t written);

  Device& device_;
  QueueSlot& slot_;
  SubmitPolicy policy_;
  bool run_work_;
  uint64_t queued_ = 0;                              // commands since the last submit
  uint64_t written_ = 0;                             // bytes kernels wrote since the last submit
  std::vector<std::vector<unsigned char>> uploads_;  // host copies until the next submit
};

}  // namespace bulkhead::opencl
