// Concat, Split, Transpose, DepthToSpace, SpaceToDepth. Concat and Split are layout-aware: rank-4
// channels-last and blocked tensors concatenate and split along the physical channel dim.
// Sub-families in data_*.cc register from here.

#include <algorithm>

#include "ops/cpu/data_common.h"
#include "ops/cpu/data_kernels.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

// Per-shape plan of a Concat or Split: `outer` blocks, each made of one contiguous chunk per part.
struct ChunkState {
  int64_t outer = 0;
  int64_t whole = 0;            // bytes of one block of the concatenated tensor
  std::vector<int64_t> chunk;   // bytes of one block of part i
  std::vector<int64_t> offset;  // where part i's chunk starts inside a block
};

// Physical dims of a logical shape stored in `layout`.
// The dimensions of a rank-4 tensor's memory: NHWC for channels-last, [N, C/B, H*W*B] for a
// blocked layout of B channels per block (concatenating along C then moves whole blocks).
Shape physical_dims(const Shape& s, Layout layout) {
  if (s.rank() != 4) return s;
  if (layout == Layout::kChannelsLast) return Shape{s[0], s[2], s[3], s[1]};
  if (const int64_t b = layout_block(layout)) return Shape{s[0], s[1] / b, s[2] * s[3] * b};
  return s;
}

std::shared_ptr<ChunkState> make_chunks(const std::vector<Shape>& parts, int64_t axis, size_t esz) {
  auto st = std::make_shared<ChunkState>();
  const Shape& first = parts[0];
  int64_t outer = 1, inner = static_cast<int64_t>(esz);
  for (int64_t i = 0; i < axis; ++i) outer *= first[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < first.rank(); ++i) inner *= first[i];
  st->outer = outer;
  for (const Shape& p : parts) {
    st->offset.push_back(st->whole);
    st->chunk.push_back(p[static_cast<size_t>(axis)] * inner);
    st->whole += st->chunk.back();
  }
  return st;
}

// Copies between the concatenated buffer and its parts. `to_whole` = Concat, else Split.
template <typename Parts>
void move_chunks(const ChunkState& st, uint8_t* whole, Parts parts, bool to_whole, int threads) {
  const bool big = threads > 1 && st.outer * st.whole >= kParallelBytes;
  if (st.outer == 1) {
    for (size_t i = 0; i < parts.size(); ++i) {
      uint8_t* w = whole + st.offset[i];
      if (to_whole)
        copy_bytes(w, parts[i].raw(), static_cast<size_t>(st.chunk[i]), threads);
      else
        copy_bytes(parts[i].raw(), w, static_cast<size_t>(st.chunk[i]), threads);
    }
    return;
  }
#pragma omp parallel for num_threads(omp_threads(threads)) if (big) schedule(static)
  for (int64_t o = 0; o < st.outer; ++o) {
    for (size_t i = 0; i < parts.size(); ++i) {
      const int64_t c = st.chunk[i];
      if (c == 0) continue;
      uint8_t* w = whole + o * st.whole + st.offset[i];
      uint8_t* p = static_cast<uint8_t*>(parts[i].raw()) + o * c;
      if (to_whole)
        std::memcpy(w, p, static_cast<size_t>(c));
      else
        std::memcpy(p, w, static_cast<size_t>(c));
    }
  }
}

class ConcatKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<ConcatKernel>(a.node);
    SL_ASSIGN_OR_RETURN(k->axis_, read_concat_axis(a.node));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  bool accepts(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return false;
    const Layout l = in[0].layout;
    for (const auto& i : in)
      if (!i.present() || i.layout != l) return false;
    if (l == Layout::kPlain) return true;
    int64_t axis = 0;
    for (const auto& i : in)
      if (i.shape.rank() != 4) return false;
    return normalize_axis(axis_, 4, &axis) && axis == 1;
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    SL_ASSIGN_OR_RETURN(ConcatShapes c, concat_shape(in, axis_, desc_));
    const TensorInfo& f = in[0];
    for (const auto& t : in)
      if (t.layout != f.layout) return invalid("inputs have mixed layouts");
    const int64_t rank = static_cast<int64_t>(f.shape.rank());
    const int64_t axis = c.axis;
    int64_t phys_axis = axis;
    if (f.layout == Layout::kChannelsLast) {
      if (rank != 4 || axis != 1) return unsupported_error("channels-last inputs concatenate only along axis 1");
      phys_axis = 3;
    } else if (const int64_t b = layout_block(f.layout)) {
      const std::string name = layout_name(f.layout);
      if (rank != 4 || axis != 1) return unsupported_error(name + " inputs concatenate only along axis 1");
      for (const auto& t : in)
        if (t.shape[1] % b != 0)
          return unsupported_error(name + " inputs need channels divisible by " + std::to_string(b));
      phys_axis = 1;
    }
    std::vector<Shape> parts;
    for (const auto& t : in) parts.push_back(physical_dims(t.shape, f.layout));
    ReshapeResult r;
    r.outputs.push_back({f.dtype, c.y, f.layout});
    r.state = make_chunks(parts, phys_axis, dtype_size(f.dtype));
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const ChunkState*>(ctx.state);
    move_chunks(*st, ctx.outputs[0].data<uint8_t>(), ctx.inputs, true, ctx.num_threads);
    return ok_status();
  }

 private:
  int64_t axis_ = 1;
};

class SplitKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<SplitKernel>(a.node);
    k->axis_ = a.node.attr_int("axis", 0);
    k->num_outputs_ = static_cast<int64_t>(a.node.outputs.size());
    if (a.node.opset < 13 && a.node.has_attr("split")) {
      k->split_attr_ = a.node.attr_ints("split");
      k->has_split_attr_ = true;
    }
    if (a.node.opset >= 18 && a.node.has_attr("num_outputs")) {
      if (a.node.attr_int("num_outputs", 0) != k->num_outputs_)
        return k->invalid("attribute 'num_outputs' does not match the number of outputs");
    }
    if (k->num_outputs_ < 1) return k->invalid("needs at least one output");
    return std::unique_ptr<Kernel>(std::move(k));
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kAny; }

  // A rank-4 channels-last or blocked input splits along the channels in its own layout, into
  // parts of whole blocks for a blocked one (so a C2f or CSP block's halves stay blocked).
  bool accepts(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return false;
    const Layout l = in[0].layout;
    if (l == Layout::kPlain) return true;
    int64_t axis = 0;
    if (in[0].shape.rank() != 4 || !normalize_axis(axis_, 4, &axis) || axis != 1) return false;
    auto split = split_sizes(in, 1);
    if (!split.ok()) return false;
    const int64_t b = layout_block(l);
    for (int64_t v : *split)
      if (b != 0 && v % b != 0) return false;
    return true;
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'input'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    const Shape& s = in[0].shape;
    const int64_t rank = static_cast<int64_t>(s.rank());
    SL_ASSIGN_OR_RETURN(const int64_t axis, normalize_axis(axis_, rank, desc_));
    SL_ASSIGN_OR_RETURN(std::vector<int64_t> split, split_sizes(in, axis));
    const Layout layout = in[0].layout;
    int64_t phys_axis = axis;
    if (layout != Layout::kPlain) {
      if (!accepts(in)) return unsupported_error(std::string(layout_name(layout)) + " input cannot split so");
      phys_axis = layout == Layout::kChannelsLast ? 3 : 1;
    }
    ReshapeResult r;
    std::vector<Shape> parts;
    for (int64_t v : split) {
      Shape o = s;
      o[static_cast<size_t>(axis)] = v;
      parts.push_back(physical_dims(o, layout));
      r.outputs.push_back({in[0].dtype, o, layout});
    }
    r.state = make_chunks(parts, phys_axis, dtype_size(in[0].dtype));
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const ChunkState*>(ctx.state);
    move_chunks(*st, ctx.inputs[0].data<uint8_t>(), ctx.outputs, false, ctx.num_threads);
    return ok_status();
  }

 private:
  // The part sizes along `axis` of input 0: the 'split' input or attribute, else equal parts.
  Result<std::vector<int64_t>> split_sizes(std::span<const TensorInfo> in, int64_t axis) const {
    const int64_t dim = in[0].shape[static_cast<size_t>(axis)];
    std::vector<int64_t> split = split_attr_;
    bool have = has_split_attr_;
    if (opset_ >= 13 && in.size() > 1 && in[1].present()) {
      SL_ASSIGN_OR_RETURN(split, constant_ints(in[1], "split", desc_));
      have = true;
    }
    if (have) {
      if (static_cast<int64_t>(split.size()) != num_outputs_)
        return invalid("'split' has " + std::to_string(split.size()) + " entries for " + std::to_string(num_outputs_) +
                       " outputs");
      int64_t sum = 0;
      for (int64_t v : split) {
        if (v < 0) return invalid("'split' has a negative entry");
        sum += v;
      }
      if (sum != dim)
        return invalid("'split' sums to " + std::to_string(sum) + " but axis " + std::to_string(axis) + " has size " +
                       std::to_string(dim));
    } else if (opset_ >= 18) {
      const int64_t chunk = (dim + num_outputs_ - 1) / num_outputs_;
      for (int64_t i = 0; i < num_outputs_; ++i) split.push_back(std::clamp<int64_t>(dim - i * chunk, 0, chunk));
    } else {
      if (dim % num_outputs_ != 0)
        return invalid("axis size " + std::to_string(dim) + " does not split into " + std::to_string(num_outputs_) +
                       " equal parts");
      split.assign(static_cast<size_t>(num_outputs_), dim / num_outputs_);
    }
    return split;
  }

  int64_t axis_ = 0;
  int64_t num_outputs_ = 1;
  bool has_split_attr_ = false;
  std::vector<int64_t> split_attr_;
};

// Kernels whose output is a permutation of the input; reshape() builds the CopyPlan.
class PermuteKernel : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status run(const RunContext& ctx) const override {
    run_copy_plan(*static_cast<const CopyPlan*>(ctx.state), ctx.inputs[0].raw(), ctx.outputs[0].raw(), ctx.num_threads);
    return ok_status();
  }

 protected:
  // Output of `out_shape` = input viewed as `view` dims, permuted by `perm`.
  ReshapeResult permuted(const TensorInfo& in, std::span<const int64_t> view, std::span<const int64_t> perm,
                         const Shape& out_shape) const {
    ReshapeResult r;
    r.outputs.push_back({in.dtype, out_shape, Layout::kPlain});
    r.state = std::make_shared<CopyPlan>(make_transpose_plan(dtype_size(in.dtype), view, perm));
    return r;
  }
};

class TransposeKernel final : public PermuteKernel {
 public:
  using PermuteKernel::PermuteKernel;
  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<TransposeKernel>(a.node);
    k->attrs_ = read_transpose_attrs(a.node);
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'data'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    const Shape& s = in[0].shape;
    SL_RETURN_IF_ERROR(check_rank(s.rank()));
    SL_ASSIGN_OR_RETURN(TransposeShapes t, transpose_shape(attrs_, s, desc_));
    return permuted(in[0], s.dims(), t.perm, t.y);
  }

 private:
  TransposeAttrs attrs_;
};

// DepthToSpace (DCR / CRD) and SpaceToDepth as 6-D transposes.
class SpaceDepthKernel final : public PermuteKernel {
 public:
  using PermuteKernel::PermuteKernel;
  static KernelPtr create(const KernelCreateArgs& a, bool to_space) {
    auto k = std::make_unique<SpaceDepthKernel>(a.node);
    k->to_space_ = to_space;
    if (!a.node.has_attr("blocksize")) return k->invalid("missing attribute 'blocksize'");
    k->bs_ = a.node.attr_int("blocksize", 0);
    if (k->bs_ < 1) return k->invalid("blocksize must be positive");
    const std::string mode = a.node.opset >= 11 ? a.node.attr_string("mode", "DCR") : "DCR";
    if (mode != "DCR" && mode != "CRD") return k->invalid("unknown mode '" + mode + "'");
    k->crd_ = to_space && mode == "CRD";
    return std::unique_ptr<Kernel>(std::move(k));
  }
  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'input'");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    const Shape& s = in[0].shape;
    if (s.rank() != 4) return invalid("input must be 4-D, got " + s.to_string());
    const int64_t b = s[0], c = s[1], h = s[2], w = s[3], bs = bs_;
    if (to_space_) {
      if (c % (bs * bs) != 0)
        return invalid("channels " + std::to_string(c) + " not divisible by blocksize^2 = " + std::to_string(bs * bs));
      const int64_t c2 = c / (bs * bs);
      const Shape out{b, c2, h * bs, w * bs};
      if (crd_) {
        const int64_t view[6] = {b, c2, bs, bs, h, w};
        const int64_t perm[6] = {0, 1, 4, 2, 5, 3};
        return permuted(in[0], view, perm, out);
      }
      const int64_t view[6] = {b, bs, bs, c2, h, w};
      const int64_t perm[6] = {0, 3, 4, 1, 5, 2};
      return permuted(in[0], view, perm, out);
    }
    if (h % bs != 0 || w % bs != 0)
      return invalid("spatial dims of " + s.to_string() + " not divisible by blocksize " + std::to_string(bs));
    const int64_t view[6] = {b, c, h / bs, bs, w / bs, bs};
    const int64_t perm[6] = {0, 3, 5, 1, 2, 4};
    return permuted(in[0], view, perm, Shape{b, c * bs * bs, h / bs, w / bs});
  }

 private:
  bool to_space_ = true;
  bool crd_ = false;
  int64_t bs_ = 1;
};

}  // namespace

Status register_tensor_ops(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_data_kernel<ConcatKernel>(reg, "Concat", 1));
  SL_RETURN_IF_ERROR(add_data_kernel<SplitKernel>(reg, "Split", 2));
  SL_RETURN_IF_ERROR(add_data_kernel<TransposeKernel>(reg, "Transpose", 1));
  for (const bool to_space : {true, false}) {
    KernelDef def;
    def.op = to_space ? "DepthToSpace" : "SpaceToDepth";
    def.provider = "cpu";
    def.create = [to_space](const KernelCreateArgs& a) { return SpaceDepthKernel::create(a, to_space); };
    SL_RETURN_IF_ERROR(reg.add(std::move(def)));
  }
  SL_RETURN_IF_ERROR(register_index_ops(reg));
  SL_RETURN_IF_ERROR(register_pad_ops(reg));
  return register_resize_ops(reg);
}

}  // namespace streamline::ops::cpu
