// Owning handles for OpenCL objects and OpenCL errors as Statuses.
#pragma once

#include <CL/cl.h>

#include <string>
#include <utility>

#include "status.h"

namespace bulkhead::opencl {

// Sole owner of one OpenCL object, released when it goes. Move-only.
template <class T, cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Handle() {
    if (h_) Release(h_);
  }
  T get() const { return h_; }
  // Gives up ownership: the caller releases the object.
  T release() { return std::exchange(h_, nullptr); }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  T h_ = nullptr;
};

using ContextHandle = Handle<cl_context, clReleaseContext>;
using QueueHandle = Handle<cl_command_queue, clReleaseCommandQueue>;
using ProgramHandle = Handle<cl_program, clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, clReleaseKernel>;
using MemHandle = Handle<cl_mem, clReleaseMemObject>;

// "CL_OUT_OF_RESOURCES" for its code; the number for codes it does not know.
std::string cl_error_name(cl_int err);

// The status for an OpenCL error while doing `what`: BH_RESOURCE_EXHAUSTED for the
// out-of-memory codes, BH_INTERNAL otherwise.
Status cl_status(cl_int err, const std::string& what);

}  // namespace bulkhead::opencl
