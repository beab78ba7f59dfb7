#include "device.h"

#include <algorithm>

#include "ops/families.h"

namespace bulkhead::opencl {

Result<std::unique_ptr<Device>> Device::open(const Backend& backend, const DeviceEntry& entry) {
  std::unique_ptr<Device> d(new Device(backend, entry));
  const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(entry.platform),
                                         0};
  cl_int err = CL_SUCCESS;
  d->context_ = ContextHandle(clCreateContext(props, 1, &entry.id, nullptr, nullptr, &err));
  if (err != CL_SUCCESS) return cl_status(err, "creating a context on " + entry.name);
  OCL_ASSIGN(d->transfer_, d->make_queue());
  OCL_TRY(backend.inject("open_device"));
  OCL_ASSIGN(d->programs_, build_programs(d->context(), entry.id));
  OCL_TRY(backend.inject("build_programs"));
  d->ops_ = list_ops();
  clGetDeviceInfo(entry.id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof d->max_alloc_, &d->max_alloc_, nullptr);
  return d;
}

cl_program Device::program_of(const std::string& name) const {
  auto it = programs_.by_kernel.find(name);
  return it == programs_.by_kernel.end() ? nullptr : it->second;
}

Result<QueueHandle> Device::make_queue() const {
  cl_int err = CL_SUCCESS;
  QueueHandle q(clCreateCommandQueue(context(), entry_.id, 0, &err));
  if (err != CL_SUCCESS) return cl_status(err, "creating a command queue on " + entry_.name);
  return q;
}

Result<cl_mem> Device::allocate(uint64_t bytes) {
  const uint64_t size = std::max<uint64_t>(bytes, 4);
  if (max_alloc_ && size > max_alloc_)
    return Status(BH_RESOURCE_EXHAUSTED, "cannot allocate " + std::to_string(bytes) + " bytes: " + entry_.name +
                                             " allocates at most " + std::to_string(max_alloc_) + " bytes at once");
  cl_int err = CL_SUCCESS;
  MemHandle mem(clCreateBuffer(context(), CL_MEM_READ_WRITE, size, nullptr, &err));
  if (err != CL_SUCCESS) return cl_status(err, "allocating " + std::to_string(bytes) + " bytes");
  OCL_TRY(backend_.inject("allocate"));
  memory_.fetch_add(size, std::memory_order_relaxed);
  return mem.release();  // the caller's now: free() gives it back
}

void Device::free(cl_mem mem) {
  memory_.fetch_sub(size_of(mem), std::memory_order_relaxed);
  clReleaseMemObject(mem);
}

uint64_t Device::size_of(cl_mem mem) const {
  size_t size = 0;
  if (clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, nullptr) != CL_SUCCESS) return 0;
  return size;
}

Status Device::check_range(cl_mem mem, uint64_t offset, uint64_t bytes, const char* what) const {
  if (!mem) return invalid_argument(std::string(what) + ": no buffer");
  const uint64_t size = size_of(mem);
  if (offset > size || bytes > size - offset)
    return invalid_argument(std::string(what) + ": " + std::to_string(bytes) + " bytes at offset " +
                            std::to_string(offset) + " overrun a buffer of " + std::to_string(size) + " bytes");
  return Status::ok();
}

Status Device::write(cl_mem dst, uint64_t offset, const void* src, uint64_t bytes) {
  OCL_TRY(check_range(dst, offset, bytes, "write_buffer"));
  if (bytes == 0) return Status::ok();
  std::lock_guard lock(transfer_mu_);
  const cl_int err = clEnqueueWriteBuffer(transfer_.get(), dst, CL_TRUE, offset, bytes, src, 0, nullptr, nullptr);
  note_submit(false);
  return err == CL_SUCCESS ? Status::ok() : cl_status(err, "writing " + std::to_string(bytes) + " bytes");
}

Status Device::read(cl_mem src, uint64_t offset, void* dst, uint64_t bytes) {
  OCL_TRY(check_range(src, offset, bytes, "read_buffer"));
  if (bytes == 0) return Status::ok();
  std::lock_guard lock(transfer_mu_);
  const cl_int err = clEnqueueReadBuffer(transfer_.get(), src, CL_TRUE, offset, bytes, dst, 0, nullptr, nullptr);
  note_submit(false);
  return err == CL_SUCCESS ? Status::ok() : cl_status(err, "reading " + std::to_string(bytes) + " bytes");
}

Status Device::copy(cl_mem src, uint64_t src_offset, cl_mem dst, uint64_t dst_offset, uint64_t bytes) {
  OCL_TRY(check_range(src, src_offset, bytes, "copy_buffer source"));
  OCL_TRY(check_range(dst, dst_offset, bytes, "copy_buffer destination"));
  if (bytes == 0) return Status::ok();
  if (src == dst && src_offset < dst_offset + bytes && dst_offset < src_offset + bytes)
    return invalid_argument("copy_buffer: the source and destination ranges overlap");
  std::lock_guard lock(transfer_mu_);
  cl_int err = clEnqueueCopyBuffer(transfer_.get(), src, dst, src_offset, dst_offset, bytes, 0, nullptr, nullptr);
  if (err == CL_SUCCESS) err = clFinish(transfer_.get());
  note_submit(false);
  return err == CL_SUCCESS ? Status::ok() : cl_status(err, "copying " + std::to_string(bytes) + " bytes");
}

void Device::counters(BhpCounters* out) const {
  out->submits = submits_.load(std::memory_order_relaxed);
  out->run_submits = run_submits_.load(std::memory_order_relaxed);
  out->dispatches = dispatches_.load(std::memory_order_relaxed);
  out->replays = 0;  // OpenCL 1.2 has no command buffers to replay (session.h)
  out->memory_bytes = memory_.load(std::memory_order_relaxed);
}

}  // namespace bulkhead::opencl
