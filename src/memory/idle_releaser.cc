#include "memory/idle_releaser.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "memory/planned_allocator.h"

namespace bulkhead {

struct IdleReleaser::State {
  struct Due {
    std::weak_ptr<PlannedHostAllocator> allocator;
    Clock::time_point when;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Due> due;  // guarded by mu
  bool stop = false;     // guarded by mu
  std::thread thread;    // started under mu; joined or detached by ~IdleReleaser

  // The thread's body. It holds the state itself, so that the state outlives the
  // releaser when the releaser is destroyed on this thread.
  static void loop(std::shared_ptr<State> s) {
    std::unique_lock lock(s->mu);
    std::vector<Due> now_due, later;
    while (!s->stop) {
      if (s->due.empty()) {
        s->cv.wait(lock);
        continue;
      }
      Clock::time_point next = s->due.front().when;
      for (const Due& d : s->due) next = std::min(next, d.when);
      if (Clock::now() < next) {
        s->cv.wait_until(lock, next);
        continue;
      }
      const Clock::time_point now = Clock::now();
      auto split = std::partition(s->due.begin(), s->due.end(), [&](const Due& d) { return d.when > now; });
      now_due.assign(std::make_move_iterator(split), std::make_move_iterator(s->due.end()));
      s->due.erase(split, s->due.end());
      lock.unlock();
      later.clear();
      for (Due& d : now_due) {
        std::shared_ptr<PlannedHostAllocator> a = d.allocator.lock();
        if (!a) continue;
        if (auto again = a->release_if_idle(Clock::now())) later.push_back({d.allocator, *again});
        a.reset();  // may be the last reference: the allocator (and even this releaser) goes here
      }
      now_due.clear();
      lock.lock();
      for (Due& d : later) s->due.push_back(std::move(d));
    }
  }
};

IdleReleaser::IdleReleaser() : state_(std::make_shared<State>()) {}

IdleReleaser::~IdleReleaser() {
  {
    std::lock_guard lock(state_->mu);
    state_->stop = true;
    state_->due.clear();
  }
  state_->cv.notify_all();
  if (!state_->thread.joinable()) return;
  if (state_->thread.get_id() == std::this_thread::get_id())
    state_->thread.detach();  // the thread lets its last allocator go: it ends by itself
  else
    state_->thread.join();
}

bool IdleReleaser::wake_at(std::weak_ptr<PlannedHostAllocator> a, Clock::time_point when) {
  std::lock_guard lock(state_->mu);
  if (state_->stop) return false;
  if (!state_->thread.joinable()) {
    try {
      state_->thread = std::thread(&State::loop, state_);
    } catch (const std::system_error&) {
      return false;
    }
  }
  state_->due.push_back({std::move(a), when});
  state_->cv.notify_one();
  return true;
}

}  // namespace bulkhead
