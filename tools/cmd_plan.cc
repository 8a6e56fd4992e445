// `streamline plan`: print the execution plan for given input shapes.

#include <iostream>

#include "cli_common.h"
#include "commands.h"
#include "graph/ir.h"
#include "graph/passes.h"
#include "plan/execution_plan.h"

namespace streamline::tools {
namespace {

struct PlanFlags {
  ModelFlags model;
  InputFlags in;
  bool json = false;
  bool dot = false;
};

int show_plan(const PlanFlags& f) {
  auto prepared = prepare(f.model, f.in, false);
  if (!prepared.ok()) {
    std::cerr << "error: " << prepared.status().to_string() << std::endl;
    return 2;
  }
  auto* model = &prepared->model;
  auto* shapes = &prepared->shapes;
  auto plan = (*model)->plan_for(*shapes);
  if (!plan.ok()) {
    std::cerr << "error: " << plan.status().to_string() << std::endl;
    return 2;
  }
  const plan::ExecutionPlan& p = **plan;
  if (f.json) {
    std::cout << p.to_json();
    return 0;
  }
  if (f.dot) {
    std::cout << p.to_dot();
    return 0;
  }
  std::vector<std::vector<std::string>> rows{{"#", "node", "op", "provider", "stream", "output"}};
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const plan::Step& st = p.steps[i];
    std::string out;
    for (int s : st.outputs)
      if (s >= 0) {
        const auto& slot = p.slots[static_cast<size_t>(s)];
        out += (out.empty() ? "" : " ") + slot.shape.to_string() +
               (slot.layout == Layout::kChannelsLast ? "nhwc"
                : is_blocked(slot.layout)            ? layout_name(slot.layout)
                                                     : "");
      }
    rows.push_back({std::to_string(i), st.name, st.op, st.provider, std::to_string(st.stream), out});
  }
  print_table(rows);
  std::cout << "\nsteps: " << p.steps.size() << ", layout converts: " << p.layout_converts()
            << ", streams: " << p.num_streams << ", events: " << p.events_inserted << " inserted, " << p.num_events
            << " after pruning"
            << ", critical path: " << fmt(p.critical_path_cost / 1e6, 1) << " of " << fmt(p.total_cost / 1e6, 1)
            << " Mcost, verified: " << (p.verified ? "yes" : "no") << "\nfolded at plan time: " << p.folded_nodes
            << ", arena: " << p.arena_bytes << " bytes (naive " << p.naive_bytes << ")\n"
            << "graph passes: " << (*model)->pass_report().to_string() << std::endl;
  return 0;
}

}  // namespace

Runner add_plan_command(CLI::App& app) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* c = app.add_subcommand("plan", "Show the execution plan for a model");
  add_model_flags(c, f->model);
  add_input_flags(c, f->in, false);
  auto* j = c->add_flag("--json", f->json, "Print the plan as JSON");
  c->add_flag("--dot", f->dot, "Print the plan as Graphviz DOT")->excludes(j);
  return [f] { return show_plan(*f); };
}

}  // namespace streamline::tools
