#pragma once
// Elementwise epilogues of convolutions and matrix products: a program (graph/ew_program.h) whose
// register 0 is the product's result, run either as oneDNN post-ops (when it maps onto them) or by
// our own loop over the output right after the product (ops/cpu/ew_exec.h).
//
//   SL_ASSIGN_OR_RETURN(EwEpilogue e, EwEpilogue::create(node, 4));   // at create
//   SL_ASSIGN_OR_RETURN(EwEpilogue::ShapePlan sp, e.plan(y_shape, y_layout, extras, true));
//   e.append(post_ops, sp);                                            // when sp.post_ops
//   e.add_args(args, sp, post_ops_before, ctx.inputs);
//   e.run(sp, y, ctx.inputs, threads);                                 // when !sp.post_ops
//
// Mapping onto post-ops: the program is taken apart from its output back to register 0. A part
// that depends on register 0 alone is evaluated at probe points and compared with oneDNN's
// eltwise functions (ReLU, leaky ReLU, ELU, logistic, tanh, exp, log, sqrt, abs, square, clip,
// affine, swish x*sigmoid(a x), hardswish, mish, GELU erf and tanh), so every spelling of, say,
// SiLU or GELU maps onto the same post-op; a unary op, an immediate operand (an affine post-op)
// or another input (a binary post-op: per-channel, scalar or full tensor) peels one layer off.

#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "ops/cpu/ew_exec.h"
#include "ops/kernel.h"

namespace streamline::ops::cpu {

struct EwPostOp {
  enum class Kind { kEltwise, kBinary };
  Kind kind = Kind::kEltwise;
  dnnl::algorithm alg = dnnl::algorithm::eltwise_linear;
  float alpha = 0.f, beta = 0.f;  // eltwise parameters
  int input = -1;                 // binary: the program input (1 ..) it reads
};

// The post-ops computing `p` from register 0, or nullopt when it does not map onto them.
std::optional<std::vector<EwPostOp>> lower_to_post_ops(const graph::EwProgram& p);

// The oneDNN eltwise function a program computes from register 0 alone, found by evaluating it at
// probe points (nullopt: none of them). Exposed for tests.
std::optional<EwPostOp> identify_function(const graph::EwProgram& p, int reg);

class EwEpilogue {
 public:
  // The program of `node`, whose inputs after register 0 are the node's inputs from `first_input`
  // on; an empty epilogue when the node has none.
  static Result<EwEpilogue> create(const graph::Node& node, size_t first_input);
  bool empty() const { return !exec_; }
  size_t first_input() const { return first_input_; }
  const graph::EwProgram& program() const { return exec_->program(); }
  // Whether the program maps onto oneDNN post-ops at all (plan() may still run our loop, for
  // binary operands oneDNN does not broadcast).
  bool has_post_ops() const { return lowered_.has_value(); }

  struct ShapePlan {
    bool post_ops = false;  // the primitive computes the epilogue
    std::vector<EwPostOp> ops;
    std::vector<dnnl::memory::desc> src1;  // per binary post-op, in order
    EwWalk walk;                           // our loop: y (in place), then the extra inputs
  };
  // How to run it on an output y of this shape and layout (dst_md: y's oneDNN descriptor), given
  // the node's inputs (extras from first_input()). Post-ops only when `allow_post_ops` and every
  // binary operand has a descriptor oneDNN broadcasts (per-channel, scalar, or y's own); with
  // `allow_binary` false only when the post-ops are all eltwise ones.
  Result<ShapePlan> plan(const Shape& y, Layout layout, const dnnl::memory::desc& dst_md,
                         std::span<const TensorInfo> node_inputs, bool allow_post_ops, bool allow_binary = true) const;
  void append(dnnl::post_ops& po, const ShapePlan& sp) const;
  // Binary post-op operands; `index_base` = post-ops appended before the epilogue's.
  void add_args(std::unordered_map<int, dnnl::memory>& args, const ShapePlan& sp, int index_base,
                std::span<const Tensor> node_inputs) const;
  // Our loop: y = program(y, extras...), in place.
  void run(const ShapePlan& sp, float* y, std::span<const Tensor> node_inputs, int threads) const;

 private:
  std::shared_ptr<const EwExec> exec_;
  size_t first_input_ = 0;
  std::optional<std::vector<EwPostOp>> lowered_;
};

}  // namespace streamline::ops::cpu
