// split_bench: what it costs to run a model as a split pipeline F -> G (the way field
// users cut a model across two sessions), in one process and with each part in its own
// worker process (isolation = "process"), against the whole model in one session. The
// worker pipeline runs twice: with F's outputs copied into G's worker (the default), and
// handed over in place (F's run names G in RunOptions::outputs_for). Both take their
// input from Session::allocate_input, as a caller that decodes its images into it would.
//
//   split_bench MODEL [--input NAME=FILE.npy]... [--fraction 0.5] [--threads 1]
//               [--runs 20] [--rounds 3] [--worker PATH]
//
// The variants are interleaved run by run (whole, split, workers, workers lent, whole, ...)
// so that drifts of the machine's speed affect them alike; each round is --runs such turns
// after two warm-up turns. The table reports the median over rounds of each round's median,
// the median of the paired ratios (a variant's run over the whole model's run beside it)
// and the fastest run. The outputs of every variant are compared with the whole model's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bulkhead/bulkhead.hpp"
#include "check/split.h"
#include "io/npy.h"
#include "isolate/protocol.h"

namespace {

using namespace bulkhead;

[[noreturn]] void die(const std::string& m) {
  std::fprintf(stderr, "split_bench: error: %s\n", m.c_str());
  std::exit(1);
}

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Runs F then G, G fed F's outputs by name; `part_ms`, when given, gets each part's time.
// `lend`: F's run names G as the session its outputs are for (RunOptions::outputs_for),
// so that worker processes hand them over without a copy.
NamedTensors run_pipeline(const Session& f, const Session& g, const NamedTensors& in, bool lend,
                          double* part_ms = nullptr) {
  auto t0 = Clock::now();
  RunOptions to_g;
  if (lend) to_g.outputs_for = &g;
  auto mid = f.run(in, to_g);
  if (!mid.is_ok()) die(mid.status().message());
  auto t1 = Clock::now();
  auto out = g.run(*mid);
  if (!out.is_ok()) die(out.status().message());
  if (part_ms) {
    part_ms[0] = std::chrono::duration<double, std::milli>(t1 - t0).count();
    part_ms[1] = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
  }
  return std::move(out).value();
}

double max_diff(const NamedTensors& a, const NamedTensors& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor &x = a[i].second, &y = b[i].second;
    if (x.numel() != y.numel() || x.dtype() != DataType::kFloat32) return x.numel() == y.numel() ? 0 : INFINITY;
    for (int64_t k = 0; k < x.numel(); ++k) m = std::max(m, (double)std::fabs(x.data<float>()[k] - y.data<float>()[k]));
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, worker = BULKHEAD_BINARY;
  std::vector<std::string> input_specs;
  double fraction = 0.5;
  int threads = 1, runs = 20, rounds = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die("option " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--input") input_specs.push_back(next());
    else if (a == "--fraction") fraction = std::atof(next().c_str());
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--runs") runs = std::atoi(next().c_str());
    else if (a == "--rounds") rounds = std::atoi(next().c_str());
    else if (a == "--worker") worker = next();
    else if (!a.empty() && a[0] != '-' && model.empty()) model = a;
    else die("unknown option '" + a + "'");
  }
  if (model.empty()) die("usage: split_bench MODEL [--input NAME=FILE.npy]... [--fraction F] [--threads N] [--runs N] [--rounds N]");
  if (runs < 1 || rounds < 1 || threads < 1) die("--runs, --rounds and --threads must be >= 1");

  auto parts = check::split_model(model, fraction);
  if (!parts.is_ok()) die(parts.status().message());
  Env env;
  SessionOptions o;
  o.threads = threads;
  SessionOptions po = o;
  po.isolation = "process";
  po.worker_binary = worker;
  auto whole = env.load(model, o);
  if (!whole.is_ok()) die(whole.status().message());
  auto f = env.load_bytes(parts->front, "front", o), g = env.load_bytes(parts->back, "back", o);
  auto pf = env.load_bytes(parts->front, "front", po), pg = env.load_bytes(parts->back, "back", po);
  for (auto* s : {&f, &g, &pf, &pg})
    if (!s->is_ok()) die(s->status().message());

  NamedTensors in;
  for (auto& spec : input_specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos) die("bad --input '" + spec + "': expected NAME=FILE.npy");
    auto t = io::read_npy(spec.substr(eq + 1));
    if (!t.is_ok()) die(t.status().message());
    in.emplace_back(spec.substr(0, eq), *t);
  }
  if (in.empty()) die("give the model's inputs with --input NAME=FILE.npy");
  // The worker pipeline's inputs as a caller that fills them itself (decodes an image
  // into them) would have them: in tensors from Session::allocate_input, which F's
  // worker reads where they are.
  NamedTensors in_pf;
  for (auto& [name, t] : in) {
    auto shared = pf->allocate_input(t.dtype(), t.shape());
    if (!shared.is_ok()) die(shared.status().message());
    if (t.nbytes()) std::memcpy(shared->raw(), t.raw(), t.nbytes());
    in_pf.emplace_back(name, *shared);
  }

  auto ref = whole->run(in);
  if (!ref.is_ok()) die(ref.status().message());
  const double diff[4] = {0, max_diff(run_pipeline(*f, *g, in, false), *ref),
                          max_diff(run_pipeline(*pf, *pg, in_pf, false), *ref), max_diff(run_pipeline(*pf, *pg, in_pf, true), *ref)};
  size_t boundary_bytes = 0;
  {
    auto mid = f->run(in);
    for (auto& [n, t] : *mid) boundary_bytes += t.nbytes();
  }

  // Each round times the variants run by run, interleaved (whole, split, workers, workers
  // lent, whole, ...), so that a drift of the machine's speed — frequent on a shared VM —
  // hits them alike; besides each variant's median, the table gives the median of the
  // paired ratios (each variant's run over the whole model's run next to it), the robust figure.
  constexpr int kVariants = 4;
  const char* names[kVariants] = {"whole model, one session", "split F -> G, two sessions in-process",
                                  "split F -> G, two worker processes, F's outputs copied",
                                  "split F -> G, two worker processes, F's outputs lent (outputs_for)"};
  std::vector<double> ms[kVariants], ratio[kVariants], round_median[kVariants], part[kVariants][2];
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> this_round[kVariants];
    for (int k = 0; k < runs + 2; ++k) {
      double t[kVariants], p[kVariants][2] = {};
      for (int v = 0; v < kVariants; ++v) {
        auto t0 = Clock::now();
        if (v == 0) {
          auto x = whole->run(in);
          if (!x.is_ok()) die(x.status().message());
        } else if (v == 1) {
          run_pipeline(*f, *g, in, false, p[1]);
        } else {
          run_pipeline(*pf, *pg, in_pf, v == 3, p[v]);
        }
        t[v] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      }
      if (k < 2) continue;  // warm-up
      for (int v = 0; v < kVariants; ++v) {
        ms[v].push_back(t[v]);
        this_round[v].push_back(t[v]);
        ratio[v].push_back(t[v] / t[0]);
        for (int h = 0; h < 2; ++h) part[v][h].push_back(p[v][h]);
      }
    }
    for (int v = 0; v < kVariants; ++v) round_median[v].push_back(median(this_round[v]));
  }
  double base = median(round_median[0]);
  std::printf("split_bench: %s cut after %.0f%% of its nodes (F %d nodes, G %d nodes; %zu boundary tensors, %.2f MiB), "
              "%d thread(s), %d rounds x %d runs, variants interleaved run by run\n",
              model.c_str(), fraction * 100, parts->front_nodes, parts->back_nodes, parts->boundary.size(),
              boundary_bytes / 1048576.0, threads, rounds, runs);
  std::printf("| variant | median of round medians, ms | vs whole | median paired ratio | min ms | max |diff| vs whole |\n"
              "|---|---|---|---|---|---|\n");
  for (int v = 0; v < kVariants; ++v) {
    double m = median(round_median[v]);
    std::printf("| %s | %.2f | %+.1f%% | %+.1f%% | %.2f | %s |\n", names[v], m, (m / base - 1) * 100,
                (median(ratio[v]) - 1) * 100, *std::min_element(ms[v].begin(), ms[v].end()),
                v == 0 ? "0" : std::to_string(diff[v]).c_str());
  }
  // Where a split's time goes: each part as its caller sees it (for workers: the hand-off
  // of its inputs and outputs included).
  std::printf("\nparts (median ms): in-process F %.2f, G %.2f; worker processes F %.2f, G %.2f (lent: F %.2f, G %.2f)\n",
              median(part[1][0]), median(part[1][1]), median(part[2][0]), median(part[2][1]), median(part[3][0]),
              median(part[3][1]));
  // From profiled runs, alike in-process and in workers: each part's kernel time, and the
  // workers' hand-off (RunOptions::profile's "(isolation)" entries) — what each part's
  // extra time is made of.
  std::map<std::string, std::vector<double>> handoff[2][2];  // [lent][part]
  std::map<std::string, std::string> sizes[2][2];
  std::vector<double> kernels[2][2];  // [in a worker][part]
  for (int k = 0; k < runs; ++k) {
    for (int w = 0; w < 3; ++w) {  // in-process, workers, workers lent
      const Session& fs = w ? *pf : *f;
      const Session& gs = w ? *pg : *g;
      std::vector<NodeProfile> pr[2];
      RunOptions ro;
      ro.profile = &pr[0];
      if (w == 2) ro.outputs_for = &gs;
      auto mid = fs.run(w ? in_pf : in, ro);
      if (!mid.is_ok()) die(mid.status().message());
      ro.profile = &pr[1];
      ro.outputs_for = nullptr;
      auto out = gs.run(*mid, ro);
      if (!out.is_ok()) die(out.status().message());
      for (int h = 0; h < 2; ++h) {
        double sum = 0;
        for (auto& e : pr[h]) {
          if (e.op_type != isolate::kIsolationOp) {
            sum += e.ms;
          } else {
            handoff[w == 2][h][e.node].push_back(e.ms);
            sizes[w == 2][h][e.node] = e.shapes;
          }
        }
        if (w < 2) kernels[w][h].push_back(sum);
      }
    }
  }
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < 2; ++h) {
      std::printf("hand-off of %s, %s (median of %d profiled runs):", h ? "G" : "F", l ? "lent" : "copied", runs);
      for (auto& [what, v] : handoff[l][h])
        std::printf(" %s %.3f ms%s%s%s;", what.c_str(), median(v), sizes[l][h][what].empty() ? "" : " (",
                    sizes[l][h][what].c_str(), sizes[l][h][what].empty() ? "" : ")");
      std::printf("\n");
    }
  std::printf("kernels (median of the profiled runs): in-process F %.2f ms, G %.2f ms; in workers F %.2f ms, G %.2f ms\n",
              median(kernels[0][0]), median(kernels[0][1]), median(kernels[1][0]), median(kernels[1][1]));
  return 0;
}
