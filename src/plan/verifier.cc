#include "plan/verifier.h"

#include <algorithm>

#include "plan/schedule.h"

namespace streamline::plan {
namespace {

struct Access {
  int step;
  size_t lo, hi;
  bool write;
  std::string what;  // slot name or "workspace"
};

std::string describe_step(const ExecutionPlan& p, int s) {
  const Step& st = p.steps[static_cast<size_t>(s)];
  return "node '" + st.name + "' (" + st.op + ", stream " + std::to_string(st.stream) + ")";
}

}  // namespace

Status verify_plan(const ExecutionPlan& plan) {
  const int n = static_cast<int>(plan.steps.size());
  // Check 3: events recorded before they are waited for.
  std::vector<int> recorder(static_cast<size_t>(plan.num_events), -1);
  for (int s = 0; s < n; ++s) {
    const Step& st = plan.steps[static_cast<size_t>(s)];
    for (int e : st.wait_events)
      if (e < 0 || e >= plan.num_events || recorder[static_cast<size_t>(e)] < 0)
        return invalid_argument("verifier: " + describe_step(plan, s) + " waits for event " + std::to_string(e) +
                                " that no earlier step records");
    for (int e : st.record_events) {
      if (e < 0 || e >= plan.num_events) return invalid_argument("verifier: bad event id " + std::to_string(e));
      recorder[static_cast<size_t>(e)] = s;
    }
  }
  const HappensBefore hb(plan);
  // Check 1: data edges.
  const auto preds = step_predecessors(plan);
  for (int s = 0; s < n; ++s)
    for (int p : preds[static_cast<size_t>(s)])
      if (!hb.before(p, s))
        return invalid_argument("verifier: " + describe_step(plan, s) + " reads the output of " +
                                describe_step(plan, p) + " with no event ordering them");
  // Check 2: overlapping memory.
  std::vector<Access> acc;
  for (int s = 0; s < n; ++s) {
    const Step& st = plan.steps[static_cast<size_t>(s)];
    auto add = [&](int slot, bool write) {
      if (slot < 0) return;
      const TensorSlot& t = plan.slots[static_cast<size_t>(slot)];
      if (t.kind != SlotKind::kArena || t.bytes == 0) return;
      acc.push_back({s, t.offset, t.offset + t.bytes, write, t.name});
    };
    for (int i : st.inputs) add(i, false);
    for (int o : st.outputs) add(o, true);
    if (st.workspace_bytes)
      acc.push_back({s, st.workspace_offset, st.workspace_offset + st.workspace_bytes, true, "workspace of " + st.name});
  }
  std::sort(acc.begin(), acc.end(), [](const Access& a, const Access& b) { return a.lo < b.lo; });
  for (size_t i = 0; i < acc.size(); ++i)
    for (size_t j = i + 1; j < acc.size() && acc[j].lo < acc[i].hi; ++j) {
      const Access& a = acc[i];
      const Access& b = acc[j];
      if (a.step == b.step || (!a.write && !b.write)) continue;
      if (hb.before(a.step, b.step) || hb.before(b.step, a.step)) continue;
      return invalid_argument("verifier: race on arena bytes [" + std::to_string(std::max(a.lo, b.lo)) + ", " +
                              std::to_string(std::min(a.hi, b.hi)) + "): " + describe_step(plan, a.step) +
                              (a.write ? " writes '" : " reads '") + a.what + "' and " + describe_step(plan, b.step) +
                              (b.write ? " writes '" : " reads '") + b.what + "' with no happens-before order");
    }
  return ok_status();
}

}  // namespace streamline::plan
