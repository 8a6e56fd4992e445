#pragma once
// Choosing between algorithms of one operator by measuring them at plan time, once per shape.
//
//   const int pick = choose_by_time(key, {[&] { run_a(); }, [&] { run_b(); }});
//
// Each candidate runs once to warm up, then three more times in turn (a b a b a b, so that a
// change in the machine's load hits both alike); the one with the smallest best time wins. The
// answer is remembered process-wide under `key` (which must name the operator, its shape, layouts
// and thread count), so identical layers of one model, or a second plan of the same shape, are
// measured once.
//
// Thread-safety: choose_by_time may be called concurrently; candidates run on the calling thread.

#include <functional>
#include <string>
#include <vector>

namespace streamline::ops::cpu {

int choose_by_time(const std::string& key, const std::vector<std::function<void()>>& candidates);

}  // namespace streamline::ops::cpu
