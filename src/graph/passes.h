#pragma once
// Graph rewrite passes run once at model load, before kernels are made.
//
//   graph::PassOptions po;                  // all passes on
//   SL_RETURN_IF_ERROR(graph::run_passes(g, po, &evaluator, &report));
//
// Passes: constant folding (nodes whose inputs are all constants, evaluated through a
// ConstantEvaluator the ops layer provides), Identity/Dropout elimination, BatchNormalization
// folded into a preceding Conv, Conv + residual Add + Relu/Clip fusion, Gemm/MatMul + bias +
// activation fusion, transformer fusions (decomposed LayerNorm, erf GELU, scaled-dot-product
// attention; see pass_transformer.cc), int8 rewrites of QDQ and dynamically quantised graphs
// (pass_quant.cc), elementwise fusion (any group of elementwise nodes into its producer's epilogue
// or one Elementwise node; pass_elementwise.cc), spatial ReduceMean/ReduceMax into global pools
// (pass_reduce.cc), and dead-code elimination. Fused nodes use the op
// types and attributes documented in docs/architecture.md ("FusedConv", "FusedGemm",
// "FusedMatMul", "LayerNormalization", "Gelu", "Attention", "Elementwise", "QConv", "QMatMul",
// "MatMulIntegerToFloat", "QAdd", "QGlobalAveragePool" in domain "streamline").

#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/ir.h"

namespace streamline::graph {

inline constexpr const char* kStreamlineDomain = "streamline";
// The opset version of every node the passes make in that domain.
inline constexpr int kStreamlineOpset = 1;

// Evaluates one node on constant inputs (implemented by the ops layer with its kernels).
class ConstantEvaluator {
 public:
  virtual ~ConstantEvaluator() = default;
  // Returns the node's outputs, or an error (e.g. Unsupported) in which case the node is left alone.
  virtual Result<std::vector<Tensor>> evaluate(const Graph& g, const Node& node, std::span<const Tensor> inputs) = 0;
};

struct PassOptions {
  bool enabled = true;             // false turns every pass off (for debugging)
  bool constant_folding = true;    // needs an evaluator; skipped without one
  bool eliminate_identity = true;  // Identity, Dropout (inference mode)
  bool fold_batchnorm = true;      // BatchNormalization after Conv folded into its weights
  bool fuse_pad = true;            // zero Pad -> the following Conv's / AveragePool's own padding
  bool fuse_conv = true;           // Conv [+ Add residual] [+ Relu/Clip/...] -> FusedConv
  bool fuse_gemm = true;           // Gemm/MatMul [+ Add bias] [+ activation] -> FusedGemm/FusedMatMul
  bool fuse_layer_norm = true;     // ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div [+ Mul + Add] -> LayerNormalization
  bool fuse_gelu = true;           // x * 0.5 * (1 + Erf(x / sqrt 2)) -> Gelu, then into a preceding MatMul/Gemm
  bool fuse_attention = true;      // [Transpose] MatMul [scale] [+ mask] Softmax MatMul [Transpose] -> Attention
  // DequantizeLinear/QuantizeLinear patterns and dynamic quantisation (MatMulInteger chains) onto
  // the int8 ops QConv, QMatMul, QAdd, QGlobalAveragePool, MatMulIntegerToFloat (pass_quant.cc).
  bool fuse_quant = true;
  // Groups of elementwise nodes -> the epilogue of the Conv/MatMul/Gemm producing their input, or
  // one streamline.Elementwise (pass_elementwise.cc)
  bool fuse_elementwise = true;
  // ReduceMean/ReduceMax over every spatial axis (rank 4 and up) -> GlobalAveragePool/GlobalMaxPool
  // [+ Flatten], which read the convolutions' blocked layout (pass_reduce.cc)
  bool global_pool = true;
  // Mul(x, s) with s a per-channel scale computed at run time (squeeze-excitation), read by one
  // ungrouped convolution with enough pixels -> the convolution's x_scale input (pass_scale.cc).
  // CPU kernels only: off for CUDA devices.
  bool scale_into_conv = true;
  bool dead_code = true;  // drop nodes no output depends on
  // Largest tensor (bytes) constant folding may create; bigger results are left to run time.
  int64_t max_folded_bytes = int64_t{64} << 20;
  // >= 2: every ungrouped convolution (after fusion, without a residual operand) that has at
  // least split_conv_min_share of all convolutions' multiply-adds becomes this many convolutions
  // on slices of its filters, joined by a channel Concat, for multi-stream plans. 0: off.
  int split_conv_parts = 0;
  double split_conv_min_share = 0.02;
  // > 1: grouped float convolutions whose groups are not whole multiples of this many channels
  // each way get neighbouring groups merged (zero weights between them) until they are, at most
  // 4 groups into one (widen_narrow_groups). Set for CPU devices, where oneDNN's direct kernels
  // need such widths; 0: off.
  int widen_groups_to = 0;
};

struct PassReport {
  int folded = 0;
  int eliminated = 0;
  int batchnorm_folded = 0;
  int pads_fused = 0;
  int conv_fused = 0;
  int gemm_fused = 0;
  int layer_norm_fused = 0;
  int gelu_fused = 0;  // Gelu nodes made (some then move into a MatMul as its activation)
  int attention_fused = 0;
  int elementwise_fused = 0;  // groups made into an epilogue or an Elementwise node
  int reductions_pooled = 0;  // spatial ReduceMean/ReduceMax made global pools
  int scales_into_conv = 0;   // per-channel scales moved into a convolution's x_scale
  int dead_removed = 0;
  int convs_split = 0;
  int groups_widened = 0;
  int quant_fused = 0;  // int8 rewrites (pass_quant.cc), zero points switched to uint8 included
  std::string to_string() const;
};

// Runs the enabled passes in a fixed order and compacts the graph. `evaluator` may be null.
Status run_passes(Graph& g, const PassOptions& options, ConstantEvaluator* evaluator, PassReport* report);

// Individual passes (each returns the number of rewrites). Exposed for tests.
int eliminate_identity(Graph& g);
// Which nodes fold_constants may evaluate.
enum class FoldScope {
  kAll,             // every node whose inputs are all constants
  kKeepDequantize,  // all but DequantizeLinear, so fuse_quantized still sees int8 weights
};
int fold_constants(Graph& g, ConstantEvaluator& evaluator, int64_t max_bytes, FoldScope scope = FoldScope::kAll);
int fold_batchnorm_into_conv(Graph& g);
int fuse_pad_into_consumer(Graph& g);
int fuse_conv_activation(Graph& g);
int fuse_gemm_activation(Graph& g);
// Transformer fusions (pass_transformer.cc).
int fuse_layer_norm(Graph& g);
int fuse_gelu(Graph& g);
int fuse_attention(Graph& g);
// ONNX Attention (opset 23+) -> streamline.Attention where they overlap, absorbing the Transposes
// around it (pass_attention.cc); runs with fuse_attention.
int fuse_onnx_attention(Graph& g);
// streamline.Gelu after a MatMul/Gemm/FusedMatMul/FusedGemm, or an int8 product writing float32
// (MatMulIntegerToFloat, QMatMul), without activation -> its activation.
int fuse_matmul_gelu(Graph& g);
// ReduceMean/ReduceMax over axes {2, ..., rank - 1} of a float32 tensor of rank >= 4 ->
// GlobalAveragePool/GlobalMaxPool, followed by Flatten(axis 1) when keepdims = 0 (pass_reduce.cc).
int reduce_to_global_pool(Graph& g);
// Mul(x, s), s [N or 1, C, 1, 1] computed at run time, x [N, C, H, W], read only by an ungrouped
// Conv/FusedConv with constant weights of at most an eighth of x's elements per image -> that
// convolution as FusedConv(x, W, B, Z, s, ...) with x_scale = 1 (pass_scale.cc).
int fold_channel_scale_into_conv(Graph& g);
// Elementwise groups -> epilogues and streamline.Elementwise nodes (pass_elementwise.cc).
int fuse_elementwise(Graph& g);
// BatchNormalization left after folding -> Mul and Add of per-channel constants (pass_elementwise.cc).
int decompose_batchnorm(Graph& g);
int eliminate_dead_code(Graph& g);
// Int8 rewrites (pass_quant.cc): QDQ patterns and dynamic quantisation onto the int8 ops, then
// normalize_int8_activations. `evaluator` (may be null: no QLookup tables) evaluates regions.
int fuse_quantized(Graph& g, ConstantEvaluator* evaluator);
// onnxruntime's com.microsoft QLinear* / QGemm ops onto streamline's int8 ops (pass_quant_qop.cc).
int convert_qoperator_ops(Graph& g);
// Element-wise regions from one 8-bit tensor to a QuantizeLinear as streamline.QLookup tables,
// evaluated with `evaluator` (pass_quant_lookup.cc).
int fuse_quantized_lookups(Graph& g, ConstantEvaluator& evaluator);
// int8 activation tensors between ops that all take zero points become uint8 with the zero
// points shifted by 128 (pass_quant_unsigned.cc); same real values.
int normalize_int8_activations(Graph& g);
// Heavy convolutions -> `parts` slices along output channels (pass_split.cc); see PassOptions.
int split_heavy_convolutions(Graph& g, int parts, double min_share);
// Grouped Conv/FusedConv nodes with constant float weights whose groups are narrower than `width`
// channels (or not a multiple of it) each way: f neighbouring groups (f = 2 or 4, the smallest
// that makes whole multiples of `width`) become one, the weights [M, C/g, k...] widened to
// [M, f*C/g, k...] with zeros between the original groups and `group` divided by f. Depthwise
// convolutions are left alone. Returns the number of convolutions rewritten.
int widen_narrow_groups(Graph& g, int64_t width);

// Half precision for device backends (pass_precision.cc): every float32 value and constant of the
// graph becomes float16, except host-read parameters (Resize/Upsample scales and roi, Clip bounds);
// float32 graph inputs gain a Cast to float16 after them and float32 graph outputs a Cast back, so
// callers still exchange float32. Cast nodes to float32 cast to float16 instead. Constants are
// rounded to nearest even; values beyond the half range become +-inf, which the report counts.
struct HalfReport {
  int constants = 0;       // float32 constants converted
  int values = 0;          // float32 computed values retyped
  int casts_inserted = 0;  // at graph inputs and outputs
  int64_t overflowed = 0;  // constant elements that became +-inf
};
Status convert_to_half(Graph& g, HalfReport* report);

}  // namespace streamline::graph
