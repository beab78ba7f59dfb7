// Executor: a graph compiled for a session — one kernel per node, value slots, the
// release point of every intermediate — and the code that runs it.
//
// A CompiledGraph is immutable after compile() and shared by every concurrent run of
// its session; each run has its own Frame (its values) and its own scratch memory.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "ir/graph.h"

namespace bulkhead::exec {

// One device a session may place nodes on, with the session's allocator for it.
struct Placement {
  std::shared_ptr<Device> device;
  std::shared_ptr<Allocator> allocator;
};

struct CompileOptions {
  std::vector<Placement> placements;  // in order of preference
  int threads = 1;
  // Initializers the caller may override at run time (graph inputs with a default, IR >= 4):
  // never folded as constants.
  std::unordered_set<std::string> overridable;
  bool fold_constants = true;
  // Uploads constant inputs of steps placed on devices outside the host domain once, at
  // compile time (Step::resident). Null: they are copied on every run instead.
  const CopyRouter* router = nullptr;
  // The largest tensor constant folding may make (SessionOptions::max_tensor_bytes); 0: none.
  uint64_t max_tensor_bytes = 0;
  // Where constants folded here and kernels' packed weights are shared with the Env's
  // other sessions (SessionOptions::share_weights); null: everything stays private.
  // Folded constants are then made in host memory of their own (not the placement's
  // allocator), so a session that goes never takes another's constants with it.
  std::shared_ptr<SharedConstants> shared;
};

// What one run may not pass (SessionOptions' limits, RunOptions::timeout_ms). The
// executor checks the deadline before every step and every subgraph run, the tensor
// limit at every allocation, and the iteration limit at every subgraph run of a node.
struct RunLimits {
  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline = Clock::time_point::max();
  int64_t timeout_ms = 0;           // the limit behind `deadline`, for messages
  uint64_t max_tensor_bytes = 0;    // 0: none
  int64_t max_loop_iterations = 0;  // 0: none
  bool any() const { return deadline != Clock::time_point::max() || max_tensor_bytes || max_loop_iterations; }
  // The deadline has passed.
  bool expired() const { return deadline != Clock::time_point::max() && Clock::now() >= deadline; }
  // kDeadlineExceeded once the deadline has passed; `where` names the node about to run.
  Status check_time(const std::string& where) const;
  // kResourceExhausted when a tensor of `dtype` and `shape` would pass max_tensor_bytes.
  Status check_tensor(DataType dtype, const Shape& shape, const std::string& what) const;
};

// The tensor limit alone (for compile-time folding).
Status check_tensor_limit(uint64_t max_bytes, DataType dtype, const Shape& shape, const std::string& what);

struct CompiledGraph;

// A Concat whose inputs are written in place: each input's producer writes straight into
// its part of the Concat's output (allocated by the first of them), and the Concat then
// finds its inputs side by side and copies nothing. Only where every dimension before the
// axis is 1 (each input is then one contiguous run of the output) and the shapes are
// static; the Concat kernel copies as usual when a producer did not write in place.
struct ConcatGroup {
  int slot = -1;  // the Concat's output
  DataType dtype = DataType::kUndefined;
  Shape shape;
};

// Where a step writes one of its outputs: in a ConcatGroup's output, at `offset` bytes.
struct OutputView {
  int group = -1;  // index into CompiledGraph::concat_groups; -1: a buffer of its own
  size_t offset = 0;
  Shape shape;  // the output's expected shape (any other is allocated on its own)
};

struct Step {
  const ir::Node* node = nullptr;
  std::string where;  // node->label() + ": ", made once: the prefix of its kernel's messages
  int placement = 0;  // index into CompileOptions::placements
  std::unique_ptr<Kernel> kernel;
  std::vector<int> in, out;   // slots; -1 for omitted
  std::vector<int> release;   // slots whose last use is this step
  // Per input: the constant it reads, bound at compile time (copied into this step's
  // domain for a device outside the host); an empty Value when the input is not a
  // constant (or is a default the caller may override, read from the frame).
  std::vector<Value> resident;
  std::map<std::string, std::unique_ptr<CompiledGraph>> subgraphs;  // by attribute name
  std::vector<OutputView> out_view;  // per output; empty when no output is a view
  // Per input: this step is its last reader and it was made by a step of this graph (not
  // a graph input, constant, output or outer value), so its memory may become an output
  // (KernelContext::reuse_input_as_output) when nothing else holds it at run time.
  std::vector<bool> donatable;
};

struct CompiledGraph {
  const ir::Graph* graph = nullptr;
  int num_slots = 0;
  std::unordered_map<std::string, int> slot_of;
  std::vector<std::string> slot_name;
  std::vector<int> input_slots;   // graph->inputs, in order
  std::vector<int> output_slots;  // graph->outputs, in order
  // Constants a run puts in its frame: those a graph output or an overridable default
  // needs (steps read the others from Step::resident).
  std::vector<std::pair<int, Value>> constants;
  std::vector<std::pair<int, int>> outer;                // (slot here, slot in enclosing graph)
  std::vector<Step> steps;
  std::vector<ConcatGroup> concat_groups;
  std::vector<int> node_count_per_placement;
  // The steps of this graph on each placement, in order (Device::begin_run's node list).
  std::vector<std::vector<const ir::Node*>> nodes_per_placement;
  int folded_nodes = 0;  // nodes computed once at compile time (all inputs constant)
  // Static shapes and no subgraphs: every run does the same work (RunStart::capturable).
  bool capturable = false;
  // Values of this graph known at compile time (initializers and folded results), by name;
  // subgraphs read these as constants too.
  std::unordered_map<std::string, Tensor> constant_values;
};

// Compiles `graph` (a top-level graph when `parent` is null). Errors name the node.
Result<std::unique_ptr<CompiledGraph>> compile(const ir::Graph& graph, const CompileOptions& opts,
                                               const CompiledGraph* parent = nullptr);

// Time spent per node in one run (filled only when RunContext::profile is set).
struct NodeTiming {
  const ir::Node* node;
  double ms;
  std::string shapes;  // "float32[1,3,8,8] -> float32[1,16,8,8]" (first input, first output)
};

struct RunContext {
  const CompileOptions* opts = nullptr;
  const CopyRouter* router = nullptr;
  int threads = 1;
  std::vector<NodeTiming>* profile = nullptr;  // owned by the caller, one per run
  // Per-placement state from Device::begin_run, set by run() for the top-level graph and
  // inherited by its subgraphs; null when no device made any.
  const std::vector<std::shared_ptr<void>>* device_states = nullptr;
  // Per-placement allocators of this run (Allocator::open_run), set by run() for the
  // top-level graph and inherited by its subgraphs; an entry that is null, or no vector,
  // means the placement's session allocator.
  const std::vector<std::shared_ptr<RunAllocator>>* run_allocators = nullptr;
  // The run's limits; null: none.
  const RunLimits* limits = nullptr;
  Allocator& allocator(size_t placement) const {
    if (run_allocators && (*run_allocators)[placement]) return *(*run_allocators)[placement];
    return *opts->placements[placement].allocator;
  }
};

// Runs a compiled graph with `inputs` bound to its inputs in order (a none value leaves
// an input to its initializer). `outer` is the enclosing frame's values for subgraphs.
Result<std::vector<Value>> run(const CompiledGraph& g, std::vector<Value> inputs, const RunContext& rc,
                               const std::vector<Value>* outer = nullptr);

}  // namespace bulkhead::exec
