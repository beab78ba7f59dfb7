// winograd_bench: one 3x3 stride-1 convolution at a time in oneDNN, as Winograd and as a
// direct convolution, at each thread count given — the measurements behind the CPU Conv
// kernel's choice between the two (winograd_pays in src/backends/cpu/kernels/dnnl.cc).
//
//   winograd_bench [--threads 1,2] [--reps N] [IC OC H W ...]
//
// Each problem: batch 1, IC -> OC channels, an H x W plane padded by 1 (the output is
// H x W too), source and destination in nChw16c as the kernel's blocked chains give them,
// bias and a fused Relu; weights in the primitive's own layout (packed once, untimed).
// Each primitive runs 20 times untimed, then N times (default 280) timed one by one; the
// table gives the medians in ms and direct / Winograd (above 1: Winograd is faster). A
// problem oneDNN has no Winograd kernel for shows "-". Without problems: the 3x3 problems
// of the light models' small planes that the rule's comment quotes.
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace {

using dnnl::memory;

struct Problem {
  long ic, oc, h, w;
};

[[noreturn]] void usage(const std::string& why, int status = 2) {
  std::fprintf(status ? stderr : stdout, "winograd_bench: %s\nusage: winograd_bench [--threads 1,2] [--reps N] [IC OC H W ...]\n",
               why.c_str());
  std::exit(status);
}

long positive(const char* s, const char* what, long most) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (!*s || *end || errno || v < 1 || v > most)
    usage(std::string(what) + " must be a whole number from 1 to " + std::to_string(most) + ", got '" + s + "'");
  return v;
}

// The median time in ms of `reps` timed executions, or nullopt where oneDNN has no kernel
// for this algorithm (then nothing runs).
std::optional<double> time_conv(const dnnl::engine& eng, dnnl::stream& s, dnnl::algorithm alg, const Problem& p, int reps) {
  const memory::dims src{1, p.ic, p.h, p.w}, wei{p.oc, p.ic, 3, 3}, bia{p.oc}, dst{1, p.oc, p.h, p.w};
  const memory::desc sd(src, memory::data_type::f32, memory::format_tag::nChw16c);
  const memory::desc dd(dst, memory::data_type::f32, memory::format_tag::nChw16c);
  const memory::desc wd(wei, memory::data_type::f32, memory::format_tag::any);
  const memory::desc bd(bia, memory::data_type::f32, memory::format_tag::x);
  dnnl::post_ops po;
  po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  dnnl::convolution_forward::primitive_desc pd;
  try {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, alg, sd, wd, bd, dd, {1, 1}, {0, 0}, {1, 1},
                                      {1, 1});
    pd = dnnl::convolution_forward::primitive_desc(d, attr, eng);
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
  memory x(sd, eng), w(pd.weights_desc(), eng), b(bd, eng), y(dd, eng);
  std::fill_n(static_cast<float*>(x.get_data_handle()), sd.get_size() / sizeof(float), 0.5f);
  std::fill_n(static_cast<float*>(w.get_data_handle()), pd.weights_desc().get_size() / sizeof(float), 0.01f);
  std::fill_n(static_cast<float*>(b.get_data_handle()), p.oc, 0.1f);
  memory scratch(pd.scratchpad_desc(), eng);
  dnnl::convolution_forward conv(pd);
  const std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b},
                                             {DNNL_ARG_DST, y}, {DNNL_ARG_SCRATCHPAD, scratch}};
  std::vector<double> ms;
  for (int i = 0; i < 20 + reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    conv.execute(s, args);
    s.wait();
    const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 20) ms.push_back(dt);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads{1, 2};
  int reps = 280;
  std::vector<long> dims;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" || a == "--reps") {
      if (i + 1 >= argc) usage(a + " needs a value");
      if (a == "--reps") {
        reps = static_cast<int>(positive(argv[++i], "--reps", 100000));
        continue;
      }
      threads.clear();
      std::stringstream list(argv[++i]);
      for (std::string t; std::getline(list, t, ',');) threads.push_back(static_cast<int>(positive(t.c_str(), "a thread count", 1024)));
      if (threads.empty()) usage("--threads needs at least one count");
    } else if (a == "-h" || a == "--help") {
      usage("times 3x3 convolutions as Winograd and as direct ones", 0);
    } else if (!a.empty() && a[0] == '-') {
      usage("unknown option " + a);
    } else {
      dims.push_back(positive(argv[i], "a channel count or plane side", 4096));
    }
  }
  if (dims.size() % 4) usage("problems are four numbers each (IC OC H W), got " + std::to_string(dims.size()));
  std::vector<Problem> problems;
  for (size_t i = 0; i < dims.size(); i += 4) {
    const Problem p{dims[i], dims[i + 1], dims[i + 2], dims[i + 3]};
    // Each of X, Y and the weights within 1 GiB of floats.
    const double most = double(1 << 28);
    if (double(p.ic) * p.h * p.w > most || double(p.oc) * p.h * p.w > most || double(p.ic) * p.oc * 9 > most)
      usage("problem " + std::to_string(p.ic) + " " + std::to_string(p.oc) + " " + std::to_string(p.h) + " " +
            std::to_string(p.w) + " needs a tensor over 1 GiB");
    problems.push_back(p);
  }
  if (problems.empty())
    problems = {{128, 32, 7, 7},    {160, 224, 7, 7},   {192, 224, 7, 7},   {224, 224, 7, 7},   {192, 320, 7, 7},
                {512, 512, 7, 7},   {192, 384, 6, 6},   {160, 320, 6, 6},   {96, 208, 13, 13},  {112, 224, 13, 13},
                {160, 320, 13, 13}, {192, 256, 14, 14}, {128, 256, 13, 13}, {64, 96, 14, 14},   {128, 128, 14, 14},
                {160, 192, 14, 14}, {256, 256, 14, 14}, {256, 384, 12, 12}, {64, 64, 28, 28},   {64, 64, 56, 56}};

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  std::printf("%-22s %7s %12s %12s %15s\n", "problem", "threads", "winograd ms", "direct ms", "direct/winograd");
  for (const Problem& p : problems)
    for (int t : threads) {
      omp_set_num_threads(t);  // oneDNN fixes a primitive's thread count when it is made
      const auto wino = time_conv(eng, s, dnnl::algorithm::convolution_winograd, p, reps);
      const auto direct = time_conv(eng, s, dnnl::algorithm::convolution_direct, p, reps);
      char name[64];
      std::snprintf(name, sizeof name, "%ld->%ld %ldx%ld", p.ic, p.oc, p.h, p.w);
      if (!direct) {
        std::printf("%-22s %7d %12s %12s %15s\n", name, t, "-", "-", "-");
        continue;
      }
      if (wino)
        std::printf("%-22s %7d %12.3f %12.3f %15.2f\n", name, t, *wino, *direct, *direct / *wino);
      else
        std::printf("%-22s %7d %12s %12.3f %15s\n", name, t, "-", *direct, "-");
    }
  return 0;
}
