#include "stream.h"

#include "device.h"

namespace bulkhead::opencl {

Result<cl_kernel> QueueSlot::kernel(const std::string& name) {
  if (auto it = kernels_.find(name); it != kernels_.end()) return it->second.get();
  cl_program p = device_.program_of(name);
  if (!p) return internal_error("no OpenCL program has a kernel '" + name + "'");
  cl_int err = CL_SUCCESS;
  KernelHandle k(clCreateKernel(p, name.c_str(), &err));
  if (err != CL_SUCCESS) return cl_status(err, "creating kernel " + name);
  return kernels_.emplace(name, std::move(k)).first->second.get();
}

Status Stream::launch(const std::string& name, cl_kernel k, const Range& r, uint64_t written) {
  for (cl_uint d = 0; d < r.dims; ++d)
    if (r.global[d] == 0) return Status::ok();  // nothing to compute
  const cl_int err = clEnqueueNDRangeKernel(slot_.queue(), k, r.dims, nullptr, r.global, r.local[0] ? r.local : nullptr,
                                            0, nullptr, nullptr);
  if (err != CL_SUCCESS) return cl_status(err, "enqueueing kernel " + name);
  ++queued_;
  written_ += written;
  device_.note_dispatch();
  switch (policy_.policy) {
    case Policy::kSingle:
      break;
    case Policy::kPerDispatch: {
      // Every kernel its own pass: all its writes complete before anything after it starts.
      const cl_int e = clEnqueueBarrierWithWaitList(slot_.queue(), 0, nullptr, nullptr);
      if (e != CL_SUCCESS) return cl_status(e, "enqueueing a barrier after kernel " + name);
      break;
    }
    case Policy::kSplit:
      return submit();
    case Policy::kAuto:
      if (written_ >= policy_.auto_bytes) return submit();
      break;
  }
  return Status::ok();
}

Status Stream::upload(cl_mem dst, uint64_t offset, const void* data, size_t bytes) {
  if (bytes == 0) return Status::ok();
  const auto* p = static_cast<const unsigned char*>(data);
  uploads_.emplace_back(p, p + bytes);
  const cl_int err =
      clEnqueueWriteBuffer(slot_.queue(), dst, CL_FALSE, offset, bytes, uploads_.back().data(), 0, nullptr, nullptr);
  if (err != CL_SUCCESS) return cl_status(err, "uploading " + std::to_string(bytes) + " bytes");
  ++queued_;
  written_ += bytes;
  return Status::ok();
}

Status Stream::read(cl_mem src, uint64_t offset, void* dst, size_t bytes) {
  OCL_TRY(submit());
  if (bytes == 0) return Status::ok();
  const cl_int err = clEnqueueReadBuffer(slot_.queue(), src, CL_TRUE, offset, bytes, dst, 0, nullptr, nullptr);
  return err == CL_SUCCESS ? Status::ok() : cl_status(err, "reading " + std::to_string(bytes) + " bytes back");
}

Status Stream::submit() {
  if (queued_ == 0) return Status::ok();
  cl_int err = clFlush(slot_.queue());
  if (err == CL_SUCCESS) err = clFinish(slot_.queue());
  device_.note_submit(run_work_);
  queued_ = 0;
  written_ = 0;
  if (err != CL_SUCCESS)
    return cl_status(err, "running the queued kernels");  // uploads kept: the device may still read them
  uploads_.clear();
  return Status::ok();
}

}  // namespace bulkhead::opencl
