#pragma once
// Which layout each input of a kernel gets: the rule the planner inserts LayoutConvert steps by
// and the eager interpreter converts values by, so that both hand kernels the same layouts.
//
//   std::vector<Layout> want = ops::choose_input_layouts(*kernel, infos, constant, true, 16);
//   for (size_t i = 0; i < want.size(); ++i)
//     if (infos[i].present() && infos[i].layout != want[i]) ...   // convert input i to want[i]

#include <span>
#include <vector>

#include "ops/kernel.h"

namespace streamline::ops {

// `infos`: the inputs as they are (an undefined dtype for an omitted one), with the values the
// caller knows; `constant[i]`: input i is a constant (constants never decide a layout).
// `channels_last`: whether kernels that prefer a layout get it (off: rank-4 activations plain);
// `block`: the channels per block kernels may choose (8 or 16), 0 when blocked layouts are off.
// Rank-4 activations get the layout the kernel prefers, or the one they share when it takes any
// layout and accepts them so, else plain. A one-pixel tensor [N, C, 1, 1] has the same bytes in
// every layout and keeps its own, unless the kernel takes plain inputs only or (taking any layout)
// does not accept it so. Omitted inputs keep kPlain.
std::vector<Layout> choose_input_layouts(const Kernel& kernel, std::span<const TensorInfo> infos,
                                         std::span<const char> constant, bool channels_last, int block);

}  // namespace streamline::ops
