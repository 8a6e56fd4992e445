#include "plan/execution_plan.h"

#include <atomic>
#include <cstdio>
#include <sstream>

namespace streamline::plan {
namespace {
std::string layout_suffix(Layout l) {
  if (l == Layout::kChannelsLast) return ":nhwc";
  if (is_blocked(l)) return std::string(":") + layout_name(l);
  return "";
}
}  // namespace

namespace {

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\t':
        o += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += c;
        }
    }
  }
  return o;
}

std::string q(const std::string& s) {
  return "\"" + json_escape(s) + "\"";
}

}  // namespace

uint64_t next_plan_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

const char* slot_kind_name(SlotKind k) {
  switch (k) {
    case SlotKind::kArena:
      return "arena";
    case SlotKind::kConstant:
      return "constant";
    case SlotKind::kInput:
      return "input";
  }
  return "unknown";
}

int ExecutionPlan::layout_converts() const {
  int n = 0;
  for (const Step& st : steps) n += st.op == "LayoutConvert" ? 1 : 0;
  return n;
}

Result<std::unique_ptr<ExecutionPlan>> make_eager_plan(const graph::Graph& g,
                                                       std::span<const std::unique_ptr<ops::Kernel>> kernels,
                                                       std::span<const Shape> shapes, std::string reason,
                                                       ops::EagerLayouts layouts) {
  SL_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, g.topological_order());
  auto p = std::make_unique<ExecutionPlan>();
  EagerProgram e;
  e.graph = &g;
  e.kernels = kernels;
  e.reason = std::move(reason);
  e.layouts = layouts;
  e.step_of_node.assign(g.num_nodes(), -1);
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    p->input_names.push_back(g.value(g.inputs()[i]).name);
    if (i < shapes.size()) p->input_shapes.push_back(shapes[i]);
  }
  for (graph::ValueId v : g.outputs()) p->output_names.push_back(g.value(v).name);
  p->stream_steps.resize(1);
  for (graph::NodeId n : order) {
    const graph::Node& node = g.node(n);
    Step st;
    st.name = node.name;
    st.op = node.op_type;
    st.node = n;
    const size_t at = static_cast<size_t>(n);
    st.kernel = at < kernels.size() ? kernels[at].get() : nullptr;
    st.provider = st.kernel ? "eager" : "";
    st.position = static_cast<int>(p->steps.size());
    e.step_of_node[at] = static_cast<int>(p->steps.size());
    p->stream_steps[0].push_back(static_cast<int>(p->steps.size()));
    p->steps.push_back(std::move(st));
  }
  p->eager = std::move(e);
  return p;
}

std::string ExecutionPlan::to_json() const {
  std::ostringstream o;
  o << "{\n  \"device\": " << q(ops::device_name(device)) << ",\n  \"streams_used\": " << num_streams
    << ",\n  \"events_inserted\": " << events_inserted << ",\n  \"events_after_pruning\": " << num_events
    << ",\n  \"arena_bytes\": " << arena_bytes << ",\n  \"naive_bytes\": " << naive_bytes
    << ",\n  \"critical_path_cost\": " << static_cast<int64_t>(critical_path_cost)
    << ",\n  \"total_cost\": " << static_cast<int64_t>(total_cost)
    << ",\n  \"verified\": " << (verified ? "true" : "false") << ",\n  \"folded_nodes\": " << folded_nodes
    << ",\n  \"layout_converts\": " << layout_converts() << ",\n  \"inputs\": [";
  for (size_t i = 0; i < input_names.size(); ++i)
    o << (i ? ", " : "") << "{\"name\": " << q(input_names[i]) << ", \"shape\": " << q(input_shapes[i].to_string())
      << "}";
  o << "],\n  \"outputs\": [";
  for (size_t i = 0; i < output_names.size(); ++i) {
    const TensorSlot& s = slots[static_cast<size_t>(output_slots[i])];
    o << (i ? ", " : "") << "{\"name\": " << q(output_names[i]) << ", \"dtype\": " << q(dtype_name(s.dtype))
      << ", \"shape\": " << q(s.shape.to_string()) << "}";
  }
  o << "],\n  \"nodes\": [\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    o << "    {\"name\": " << q(st.name) << ", \"op\": " << q(st.op) << ", \"provider\": " << q(st.provider)
      << ", \"stream\": " << st.stream << ", \"cost\": " << static_cast<int64_t>(st.cost)
      << ", \"threads\": " << st.threads << ", \"inputs\": [";
    for (size_t j = 0; j < st.inputs.size(); ++j) {
      o << (j ? ", " : "");
      if (st.inputs[j] < 0) {
        o << "null";
        continue;
      }
      const TensorSlot& s = slots[static_cast<size_t>(st.inputs[j])];
      o << q(s.name + ":" + s.shape.to_string() + layout_suffix(s.layout));
    }
    o << "], \"outputs\": [";
    for (size_t j = 0; j < st.outputs.size(); ++j) {
      o << (j ? ", " : "");
      if (st.outputs[j] < 0) {
        o << "null";
        continue;
      }
      const TensorSlot& s = slots[static_cast<size_t>(st.outputs[j])];
      o << q(s.name + ":" + s.shape.to_string() + layout_suffix(s.layout) + "@" + std::to_string(s.offset));
    }
    o << "], \"wait\": [";
    for (size_t j = 0; j < st.wait_events.size(); ++j) o << (j ? ", " : "") << st.wait_events[j];
    o << "], \"record\": [";
    for (size_t j = 0; j < st.record_events.size(); ++j) o << (j ? ", " : "") << st.record_events[j];
    o << "]}" << (i + 1 < steps.size() ? "," : "") << "\n";
  }
  o << "  ]\n}\n";
  return o.str();
}

std::string ExecutionPlan::to_dot() const {
  static const char* kColours[] = {"lightblue", "lightsalmon", "palegreen",  "khaki",
                                   "plum",      "lightgrey",   "aquamarine", "pink"};
  std::ostringstream o;
  o << "digraph plan {\n  node [style=filled, shape=box];\n";
  std::vector<int> producer(slots.size(), -1);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    o << "  n" << i << " [label=\"" << json_escape(st.name) << "\\n"
      << st.op << " (s" << st.stream << ")\", fillcolor=" << kColours[static_cast<size_t>(st.stream) % 8] << "];\n";
    for (int s : st.outputs)
      if (s >= 0) producer[static_cast<size_t>(s)] = static_cast<int>(i);
  }
  for (size_t i = 0; i < steps.size(); ++i)
    for (int s : steps[i].inputs)
      if (s >= 0 && producer[static_cast<size_t>(s)] >= 0)
        o << "  n" << producer[static_cast<size_t>(s)] << " -> n" << i << ";\n";
  o << "}\n";
  return o.str();
}

}  // namespace streamline::plan
