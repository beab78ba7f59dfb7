#include "programs.h"

#include <algorithm>
#include <cstring>

namespace bulkhead::opencl {
namespace {

struct ProgramSpec {
  const char* file;
  const char* options;  // beyond the common ones
};

// layout.cl moves elements by size: one build per size (its kernels carry the size).
constexpr ProgramSpec kPrograms[] = {
    {"elementwise.cl", ""},
    {"conv.cl", ""},
    {"matmul.cl", ""},
    {"pool.cl", ""},
    {"reduce.cl", ""},
    {"normalize.cl", ""},
    {"resize.cl", ""},
    {"layout.cl", "-DELEM=uchar -DESIZE=1"},
    {"layout.cl", "-DELEM=ushort -DESIZE=2"},
    {"layout.cl", "-DELEM=uint -DESIZE=4"},
    {"layout.cl", "-DELEM=ulong -DESIZE=8"},
};

const char* source(const char* file) {
  for (size_t i = 0; i < kNumEmbeddedSources; ++i)
    if (std::strcmp(kEmbeddedSources[i].file, file) == 0) return kEmbeddedSources[i].text;
  return nullptr;
}

// The first line of the build log with an error in it (or the first line at all).
std::string log_line(cl_program p, cl_device_id device) {
  size_t n = 0;
  if (clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string log(n, '\0');
  clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  size_t at = log.find("error");
  if (at == std::string::npos) at = 0;
  const size_t begin = log.rfind('\n', at) == std::string::npos ? 0 : log.rfind('\n', at) + 1;
  return log.substr(begin, log.find('\n', at) - begin);
}

}  // namespace

Result<Programs> build_programs(cl_context context, cl_device_id device) {
  Programs r;
  const char* args = source("args.h");
  for (const ProgramSpec& spec : kPrograms) {
    const char* text = source(spec.file);
    if (!args || !text) return internal_error(std::string("the kernel source ") + spec.file + " is not embedded");
    const char* parts[] = {args, "\n", text};
    cl_int err = CL_SUCCESS;
    ProgramHandle p(clCreateProgramWithSource(context, 3, parts, nullptr, &err));
    if (err != CL_SUCCESS) return cl_status(err, std::string("creating the program ") + spec.file);
    const std::string options = std::string("-cl-std=CL1.2 ") + spec.options;
    err = clBuildProgram(p.get(), 1, &device, options.c_str(), nullptr, nullptr);
    if (err != CL_SUCCESS)
      return cl_status(
          err, std::string("building ") + spec.file + " " + spec.options + " (" + log_line(p.get(), device) + ")");
    size_t n = 0;
    err = clGetProgramInfo(p.get(), CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &n);
    std::string names(n, '\0');
    if (err == CL_SUCCESS) err = clGetProgramInfo(p.get(), CL_PROGRAM_KERNEL_NAMES, n, names.data(), nullptr);
    if (err != CL_SUCCESS) return cl_status(err, std::string("listing the kernels of ") + spec.file);
    names.resize(std::strlen(names.c_str()));
    for (size_t at = 0; at < names.size();) {
      const size_t end = std::min(names.find(';', at), names.size());
      r.by_kernel[names.substr(at, end - at)] = p.get();
      at = end + 1;
    }
    r.programs.push_back(std::move(p));
  }
  return r;
}

}  // namespace bulkhead::opencl
