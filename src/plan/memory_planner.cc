#include "plan/memory_planner.h"

#include <algorithm>
#include <numeric>

#include "core/allocator.h"

namespace streamline::plan {
namespace {

bool all_before(const Buffer& a, int writer, const HappensBefore& hb) {
  if (a.pinned_to_end) return false;
  for (int s : a.accesses)
    if (!hb.before(s, writer)) return false;
  return true;
}

}  // namespace

bool buffers_conflict(const Buffer& a, const Buffer& b, const HappensBefore& hb) {
  return !all_before(a, b.writer, hb) && !all_before(b, a.writer, hb);
}

size_t place_buffers(std::vector<Buffer>& buffers, const HappensBefore& hb, bool reuse) {
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  size_t arena = 0;
  for (size_t i : order) {
    Buffer& b = buffers[i];
    const size_t size = align_up(std::max<size_t>(b.bytes, 1));
    std::vector<std::pair<size_t, size_t>> taken;  // ranges of conflicting placed buffers
    for (size_t j : placed) {
      const Buffer& o = buffers[j];
      if (reuse && !buffers_conflict(b, o, hb)) continue;
      taken.emplace_back(o.offset, o.offset + align_up(std::max<size_t>(o.bytes, 1)));
    }
    std::sort(taken.begin(), taken.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [lo, hi] : taken) {
      if (lo >= cursor + size && lo - cursor < best_gap) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (best == SIZE_MAX) best = cursor;
    b.offset = best;
    arena = std::max(arena, best + size);
    placed.push_back(i);
  }
  return arena;
}

Status plan_memory(ExecutionPlan& plan, const HappensBefore& hb, bool reuse, bool inplace,
                   const std::vector<std::vector<int>>& inplace_hints) {
  const int end = static_cast<int>(plan.steps.size());
  // Pass 1: accesses per slot.
  std::vector<std::vector<int>> access(plan.slots.size());
  std::vector<char> is_output(plan.slots.size(), 0);
  for (int s = 0; s < end; ++s) {
    const Step& st = plan.steps[static_cast<size_t>(s)];
    for (int i : st.inputs)
      if (i >= 0) access[static_cast<size_t>(i)].push_back(s);
    for (int o : st.outputs)
      if (o >= 0) access[static_cast<size_t>(o)].push_back(s);
  }
  for (int o : plan.output_slots) is_output[static_cast<size_t>(o)] = 1;

  // Pass 2: buffers, with in-place aliasing.
  std::vector<Buffer> buffers;
  auto join = [&](Buffer& b, int slot) {
    const auto& acc = access[static_cast<size_t>(slot)];
    b.accesses.insert(b.accesses.end(), acc.begin(), acc.end());
    if (is_output[static_cast<size_t>(slot)]) b.pinned_to_end = 1;
  };
  for (int s = 0; s < end; ++s) {
    Step& st = plan.steps[static_cast<size_t>(s)];
    const std::vector<int>* hints = static_cast<size_t>(s) < inplace_hints.size() ? &inplace_hints[static_cast<size_t>(s)] : nullptr;
    for (size_t i = 0; i < st.outputs.size(); ++i) {
      const int o = st.outputs[i];
      if (o < 0) continue;
      TensorSlot& out = plan.slots[static_cast<size_t>(o)];
      if (out.kind != SlotKind::kArena) continue;
      const int hint = hints && i < hints->size() ? (*hints)[i] : -1;
      if (inplace && hint >= 0 && static_cast<size_t>(hint) < st.inputs.size() && st.inputs[static_cast<size_t>(hint)] >= 0) {
        const TensorSlot& in = plan.slots[static_cast<size_t>(st.inputs[static_cast<size_t>(hint)])];
        if (in.kind == SlotKind::kArena && in.buffer >= 0 && in.bytes == out.bytes) {
          Buffer& b = buffers[static_cast<size_t>(in.buffer)];
          const bool dies_here = !b.pinned_to_end && std::all_of(b.accesses.begin(), b.accesses.end(), [&](int a) {
            return a == s || hb.before(a, s);
          });
          if (dies_here) {
            out.buffer = in.buffer;
            join(b, o);
            continue;
          }
        }
      }
      Buffer b;
      b.bytes = out.bytes + plan.guard_bytes;
      b.writer = s;
      join(b, o);
      out.buffer = static_cast<int>(buffers.size());
      buffers.push_back(std::move(b));
    }
  }
  // Workspaces are accessed by their step only.
  std::vector<int> ws_buffer(static_cast<size_t>(end), -1);
  for (int s = 0; s < end; ++s) {
    const Step& st = plan.steps[static_cast<size_t>(s)];
    if (st.workspace_bytes == 0) continue;
    ws_buffer[static_cast<size_t>(s)] = static_cast<int>(buffers.size());
    Buffer b;
    b.bytes = st.workspace_bytes + plan.guard_bytes;
    b.writer = s;
    b.accesses = {s};
    buffers.push_back(std::move(b));
  }

  // Pass 3: offsets.
  plan.arena_bytes = place_buffers(buffers, hb, reuse);
  plan.naive_bytes = 0;
  for (const Buffer& b : buffers) plan.naive_bytes += align_up(std::max<size_t>(b.bytes, 1));
  for (auto& t : plan.slots)
    if (t.kind == SlotKind::kArena) {
      if (t.buffer < 0) return internal_error("arena slot '" + t.name + "' has no buffer (never written?)");
      t.offset = buffers[static_cast<size_t>(t.buffer)].offset;
    }
  for (int s = 0; s < end; ++s)
    if (ws_buffer[static_cast<size_t>(s)] >= 0)
      plan.steps[static_cast<size_t>(s)].workspace_offset = buffers[static_cast<size_t>(ws_buffer[static_cast<size_t>(s)])].offset;
  return ok_status();
}

}  // namespace streamline::plan
