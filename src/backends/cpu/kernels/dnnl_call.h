// The fixed cost of a oneDNN call: memory objects and a stream kept per kernel.
//
// A call through oneDNN's C++ API makes a dnnl::memory for every argument (an aligned
// allocation and its release each), a dnnl::stream (another) and, in execute(), an
// unordered_map of the arguments. On a 2-core AVX-512 EPYC that was ~3.5 us per call:
// a chain of 200 1x1 convolutions of 16 channels at 4x4 ran at 4.0 us a node, and SqueezeNet's
// 29 oneDNN calls paid ~0.1 ms a run, ShuffleNet's and Inception's more.
//
// CallPool keeps, per kernel, sets of memory objects and a stream, made on first use and
// pointed at each call's buffers with set_data_handle (which, like making the object,
// zero-fills a blocked layout's padding and touches nothing else); a call executes through
// the C API with its arguments in an array on the stack. A call takes a set from the pool
// for its duration and gives it back, so concurrent runs of a session never share a memory
// object or a stream. Ownership: the pool owns its sets; a Call borrows one and must not
// outlive the pool. Thread-safety: begin() may be called from any thread; a Call belongs to
// the thread that made it.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <initializer_list>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace bulkhead::cpu::dnnl_util {

class CallPool {
  struct Slot {
    dnnl::memory::desc md;
    dnnl::memory mem;
    bool busy = false;
  };
  struct Set {
    dnnl::stream stream;
    std::vector<std::unique_ptr<Slot>> slots;  // a Slot never moves: calls hold references
  };
  // Memory objects a set keeps: a kernel whose input shapes keep changing (a dynamic
  // dimension) makes a descriptor per shape; past this many, an idle one is dropped.
  static constexpr size_t kMaxSlots = 24;
  static constexpr int kMaxArgs = 16;

 public:
  explicit CallPool(dnnl::engine eng) : eng_(std::move(eng)) {}
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;

  // One argument of execute(): DNNL_ARG_* and its memory (null: left out, for optional
  // arguments such as a bias or a scratchpad).
  struct Arg {
    int arg;
    const dnnl::memory* mem;
  };

  // One call: a set of memory objects and a stream, borrowed from the pool until it ends.
  class Call {
   public:
    explicit Call(const CallPool& pool) : pool_(pool), set_(pool.take()) {}
    ~Call() { pool_.give_back(std::move(set_)); }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    // A memory object of descriptor `md` over `data`, for this call only; every request
    // gets an object of its own, so two arguments never share one.
    const dnnl::memory& memory(const dnnl::memory::desc& md, void* data) {
      Slot* free_slot = nullptr;
      for (auto& s : set_->slots)
        if (!s->busy && s->md == md) {
          free_slot = s.get();
          break;
        }
      if (!free_slot) {
        if (set_->slots.size() >= kMaxSlots) {
          for (auto it = set_->slots.begin(); it != set_->slots.end(); ++it)
            if (!(*it)->busy) {
              set_->slots.erase(it);
              break;
            }
        }
        auto s = std::make_unique<Slot>();
        s->md = md;
        s->mem = dnnl::memory(md, pool_.eng_, data);
        free_slot = s.get();
        set_->slots.push_back(std::move(s));
      } else {
        free_slot->mem.set_data_handle(data);
      }
      free_slot->busy = true;
      return free_slot->mem;
    }
    // Runs `prim` with `args` on this call's stream and waits for it.
    void execute(const dnnl::primitive& prim, std::initializer_list<Arg> args) {
      dnnl_exec_arg_t a[kMaxArgs];
      int n = 0;
      for (const Arg& x : args)
        if (x.mem && *x.mem) {
          if (n == kMaxArgs) throw dnnl::error(dnnl_invalid_arguments, "more than 16 arguments for one primitive");
          a[n++] = {x.arg, x.mem->get()};
        }
      dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), set_->stream.get(), n, a), "could not execute a primitive");
      set_->stream.wait();
    }

   private:
    const CallPool& pool_;
    std::unique_ptr<Set> set_;
  };

  Call begin() const { return Call(*this); }

 private:
  std::unique_ptr<Set> take() const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        auto s = std::move(free_.back());
        free_.pop_back();
        return s;
      }
    }
    auto s = std::make_unique<Set>();
    s->stream = dnnl::stream(eng_);
    return s;
  }
  void give_back(std::unique_ptr<Set> s) const {
    if (!s) return;
    for (auto& slot : s->slots) slot->busy = false;
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(s));
  }

  dnnl::engine eng_;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Set>> free_;
};

}  // namespace bulkhead::cpu::dnnl_util
