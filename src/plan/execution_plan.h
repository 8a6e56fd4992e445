#pragma once
// ExecutionPlan: everything the executor needs to run a model for one set of input shapes, as plain
// data. The planner (planner.h) makes it; the executor (exec/) only reads it.
//
//   SL_ASSIGN_OR_RETURN(auto plan, plan::make_plan(graph, kernels, {{"x", Shape{1,3,224,224}}}, opts));
//   std::cout << plan->to_json();   // human-readable, diffable dump
//
// Slots are the tensors of the plan: arena slots live at an offset in one arena per
// ExecutionContext (64-byte aligned, reused by liveness), constants point into plan.constants,
// input slots are bound to the caller's tensors at run time. Steps run in order on their stream;
// a step waits for `wait_events` before it starts and records `record_events` when it ends.
// Immutable after creation; shared by every context running the model.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/ir.h"
#include "ops/eager.h"
#include "ops/kernel.h"

namespace streamline::plan {

enum class SlotKind { kArena, kConstant, kInput };
const char* slot_kind_name(SlotKind k);

struct TensorSlot {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;
  Layout layout = Layout::kPlain;
  SlotKind kind = SlotKind::kArena;
  size_t offset = 0;     // kArena: byte offset in the arena
  size_t bytes = 0;      // payload bytes
  int constant = -1;     // kConstant: index into ExecutionPlan::constants
  int input_index = -1;  // kInput: index into the run's inputs
  int buffer = -1;       // kArena: memory-planning buffer (aliases share one)
};

struct Step {
  std::string name;      // node name ("<value>/to_plain" for inserted layout changes)
  std::string op;        // op type, e.g. "FusedConv"
  std::string provider;  // kernel provider, e.g. "onednn"
  graph::NodeId node = graph::kNoNode;
  const ops::Kernel* kernel = nullptr;  // owned by the Model's kernel set or by the plan
  std::shared_ptr<const void> state;    // per-shape kernel state from reshape
  std::vector<int> inputs;              // slot ids; -1 for an omitted optional input
  std::vector<int> outputs;             // slot ids; -1 for an omitted optional output
  size_t workspace_offset = 0;          // arena offset of the scratch area
  size_t workspace_bytes = 0;
  int stream = 0;
  int position = 0;                // index of this step within its stream's order
  std::vector<int> wait_events;    // event ids to wait for before running
  std::vector<int> record_events;  // event ids to record after running
  double cost = 0;                 // cost-model estimate (FLOPs + bytes-moved weighting)
  int threads = 0;                 // intra-op threads it runs on: 0 = the run's count, 1 = serial
};

// A process-unique id for each plan made (contexts key their bindings by it).
uint64_t next_plan_id();

// What an eager plan runs: the model's graph node by node (ops::run_eager). Both spans point into
// the model, which outlives its plans.
struct EagerProgram {
  const graph::Graph* graph = nullptr;
  std::span<const std::unique_ptr<ops::Kernel>> kernels;  // one per node, by NodeId
  std::vector<int> step_of_node;                          // by NodeId: index into steps, -1 for none
  std::string reason;  // why these shapes cannot be planned (the first value-dependent node)
  // Reshape results kept between runs, shared by every context that runs this plan.
  std::shared_ptr<ops::ReshapeCache> reshapes = std::make_shared<ops::ReshapeCache>();
  ops::EagerLayouts layouts;  // where activations may stay between nodes (the model's choices)
};

struct ExecutionPlan {
  uint64_t id = next_plan_id();
  ops::Device device = ops::Device::kCpu;  // where every step runs (slots and workspaces live there)
  std::vector<TensorSlot> slots;
  std::vector<Step> steps;
  std::vector<Tensor> constants;         // folded values and initializers used by steps/outputs
  std::vector<std::string> input_names;  // run() inputs in this order
  std::vector<Shape> input_shapes;
  std::vector<int> input_slots;
  std::vector<std::string> output_names;
  std::vector<int> output_slots;  // always plain layout
  size_t arena_bytes = 0;         // peak arena size after reuse
  size_t naive_bytes = 0;         // sum of all arena buffers without reuse
  size_t guard_bytes = 0;         // safe mode: canary bytes after every arena buffer
  int num_streams = 1;
  std::vector<std::vector<int>> stream_steps;               // per stream: step indices in run order
  int num_events = 0;                                       // events after pruning (ids 0..num_events-1)
  int events_inserted = 0;                                  // before pruning
  int folded_nodes = 0;                                     // nodes evaluated at plan time
  double critical_path_cost = 0;                            // longest dependency chain, in cost units
  double total_cost = 0;                                    // sum of step costs
  bool verified = false;                                    // the safe-mode verifier proved the plan race-free
  std::vector<std::unique_ptr<ops::Kernel>> owned_kernels;  // planner-inserted steps' kernels
  // Eager plans (input shapes whose output shapes depend on values computed during the run): no
  // slots, events or arena; `steps` list the live nodes in run order (name, op, provider, node,
  // kernel, stream 0) so that observers see each node like a planned step.
  std::optional<EagerProgram> eager;

  // One JSON object: streams, steps (name, op, provider, stream, inputs/outputs with shapes),
  // slots, arena/naive bytes. Stable across runs for golden tests.
  // Steps that only change a tensor's layout (LayoutConvert), which the planner inserts where a
  // consumer needs another layout than its producer wrote.
  int layout_converts() const;
  std::string to_json() const;
  // Graphviz DOT of the steps, coloured by stream.
  std::string to_dot() const;
};

// An eager plan for `g` run with `kernels` (by NodeId) on inputs of `shapes` (graph-input order),
// keeping activations in `layouts` between nodes (those the kernels were made for).
Result<std::unique_ptr<ExecutionPlan>> make_eager_plan(const graph::Graph& g,
                                                       std::span<const std::unique_ptr<ops::Kernel>> kernels,
                                                       std::span<const Shape> shapes, std::string reason,
                                                       ops::EagerLayouts layouts = {});

}  // namespace streamline::plan
