#include "ops/layout_choice.h"

#include <optional>

namespace streamline::ops {

std::vector<Layout> choose_input_layouts(const Kernel& kernel, std::span<const TensorInfo> infos,
                                         std::span<const char> constant, bool channels_last, int block) {
  auto is_constant = [&](size_t i) { return i < constant.size() && constant[i]; };
  auto one_pixel = [&](size_t i) {
    const Shape& s = infos[i].shape;
    return s.rank() == 4 && s[2] * s[3] == 1;
  };
  auto activation = [&](size_t i) {
    return infos[i].present() && !is_constant(i) && infos[i].shape.rank() == 4 && !one_pixel(i);
  };
  const LayoutSupport support = kernel.layout_support();
  Layout target = Layout::kPlain;
  if (channels_last && support == LayoutSupport::kPreferChannelsLast) {
    target = kernel.preferred_layout(infos, block);
  } else if (support == LayoutSupport::kAny) {
    std::optional<Layout> common;
    bool mixed = false;
    for (size_t i = 0; i < infos.size(); ++i)
      if (activation(i)) {
        if (common && *common != infos[i].layout) mixed = true;
        common = infos[i].layout;
      }
    if (common && *common != Layout::kPlain && !mixed) target = kernel.accepts(infos) ? *common : Layout::kPlain;
  }
  std::vector<Layout> want(infos.size(), Layout::kPlain);
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!infos[i].present()) continue;
    want[i] = infos[i].layout;
    if (activation(i)) {
      want[i] = target;
    } else if (infos[i].layout != Layout::kPlain && (support == LayoutSupport::kPlainOnly || !one_pixel(i))) {
      want[i] = Layout::kPlain;
    }
  }
  if (support == LayoutSupport::kAny) {
    // One-pixel tensors left in their own layout: the kernel must take them so, or they get the
    // target layout too.
    std::vector<TensorInfo> with(infos.begin(), infos.end());
    for (size_t i = 0; i < with.size(); ++i) with[i].layout = want[i];
    if (!kernel.accepts(with))
      for (size_t i = 0; i < infos.size(); ++i)
        if (infos[i].present() && !activation(i) && !is_constant(i) && want[i] != target) want[i] = target;
  }
  return want;
}

}  // namespace streamline::ops
