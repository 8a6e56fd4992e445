#pragma once
// Elementwise programs: what the elementwise fusion pass (pass_elementwise.cc) makes out of a group
// of elementwise nodes, and what the fused kernels run (ops/cpu/ew_kernel.cc, conv and matmul
// epilogues). A program reads registers and writes new ones; registers 0..num_inputs-1 are the
// node's inputs (broadcast to the output shape), each instruction defines the next register, and
// the last one is the output.
//
//   EwProgram p;
//   p.num_inputs = 1;
//   p.add(EwOp::kSigmoid, {0});          // r1 = sigmoid(r0)
//   p.add(EwOp::kMul, {0, 1});           // r2 = r0 * r1   (SiLU)
//   set_program_attrs(node, p);          // ew_ops / ew_args / ew_params attributes
//   EwProgram q = read_program_attrs(node).value();   // in a kernel's create
//   q.to_string();                       // "r1=Sigmoid(r0) r2=Mul(r0,r1)"
//
// Scalar constants are not registers: an operand of kImm reads the instruction's `imm` instead
// (x * 0.5 is Mul(r0, imm) with imm = 0.5). Everything is float32 arithmetic; Where's condition is
// a register holding 0 or 1 (a boolean input reads as such), Cast is the identity between float
// types.

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/ir.h"

namespace streamline::graph {

enum class EwOp : int {
  // Unary (a): params p0, p1 as the ONNX op's attributes.
  kIdentity = 0,
  kRelu,
  kLeakyRelu,  // p0 alpha
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kNeg,
  kAbs,
  kErf,
  kHardSigmoid,  // p0 alpha, p1 beta
  kHardSwish,
  kSoftplus,
  kElu,   // p0 alpha
  kClip,  // p0 min, p1 max
  kFloor,
  kCeil,
  kRound,
  kSign,
  kMish,
  kSoftsign,
  kSelu,             // p0 alpha, p1 gamma
  kCelu,             // p0 alpha
  kThresholdedRelu,  // p0 alpha
  kSin,
  kCos,
  // Unary functions that several ops spell out; the fusion pass recognises them.
  kSilu,      // x * sigmoid(p0 * x)
  kGeluErf,   // x / 2 * (1 + erf(x / sqrt 2))
  kGeluTanh,  // x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
  // Binary (a, b).
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMax,
  kMin,
  kPRelu,  // a < 0 ? a * b : a
  // Ternary (a ? b : c).
  kWhere,
  kCount,
};

// The ONNX name of an op ("Sigmoid", "Mul", ...).
const char* ew_op_name(EwOp op);
// Operands an op reads (1, 2 or 3).
int ew_arity(EwOp op);

struct EwInstr {
  static constexpr int kImm = -1;  // operand: the instruction's imm
  EwOp op = EwOp::kIdentity;
  std::array<int, 3> args{0, 0, 0};
  float p0 = 0.f, p1 = 0.f;  // op parameters
  float imm = 0.f;           // value of kImm operands
};

struct EwProgram {
  int num_inputs = 0;
  std::vector<EwInstr> code;

  // Appends `op` on `args` and returns the register it defines.
  int add(EwOp op, std::vector<int> args, float p0 = 0.f, float p1 = 0.f, float imm = 0.f);
  int num_registers() const { return num_inputs + static_cast<int>(code.size()); }
  int output() const { return num_registers() - 1; }
  // Every operand names an earlier register or kImm, arities match, there is at least one
  // instruction. InvalidArgument otherwise.
  Status validate() const;
  // "r1=Sigmoid(r0) r2=Mul(r0,r1)"; parameters and immediates in brackets.
  std::string to_string() const;
};

// Writes `p` as the attributes ew_inputs (int), ew_ops (ints), ew_args (ints, 3 per instruction)
// and ew_params (floats, 3 per instruction: p0, p1, imm).
void set_program_attrs(Node& n, const EwProgram& p);
// Reads them back; nullopt when the node has none, InvalidArgument when they are malformed.
Result<std::optional<EwProgram>> read_program_attrs(const Node& n);
// Index of a convolution's first epilogue input: after X, W, B, Z, and after the scale S when
// the node is a streamline.FusedConv with x_scale = 1 (pass_scale.cc).
size_t conv_epilogue_first_input(const Node& n);

}  // namespace streamline::graph
