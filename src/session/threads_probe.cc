#include "session/threads_probe.h"

#include <algorithm>
#include <cstdio>

namespace bulkhead {

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
}  // namespace

int ThreadsProbe::next_run() {
  if (int d = decided()) return d;
  return started_.fetch_add(1, std::memory_order_relaxed) % 2 == 0 ? many_ : 1;
}

bool ThreadsProbe::ran(int threads, double ms) {
  if (decided()) return false;
  std::lock_guard lock(mu_);
  if (decided()) return false;
  const bool one = threads == 1;
  int& warm = one ? warm_one_ : warm_many_;
  if (warm < kWarm) {
    ++warm;  // this count's first runs made its primitives: not steady runs
    return false;
  }
  (one ? one_ms_ : many_ms_).push_back(ms);
  if (one_ms_.size() < static_cast<size_t>(kSamples) || many_ms_.size() < static_cast<size_t>(kSamples)) return false;
  const double at_one = median(one_ms_), at_many = median(many_ms_);
  const bool keep_many = at_many < at_one * (1 - kMargin);
  char text[200];
  std::snprintf(text, sizeof text, "%s: %d thread%s, timed faster over the first runs (median %.3f ms against %.3f at %d)",
                why_.c_str(), keep_many ? many_ : 1, keep_many ? "s" : "", keep_many ? at_many : at_one,
                keep_many ? at_one : at_many, keep_many ? 1 : many_);
  note_ = text;
  decided_.store(keep_many ? many_ : 1, std::memory_order_release);
  return true;
}

std::string ThreadsProbe::note() const {
  std::lock_guard lock(mu_);
  if (!note_.empty()) return note_;
  return why_ + ": the first runs are timed at 1 and " + std::to_string(many_) + " threads";
}

}  // namespace bulkhead
