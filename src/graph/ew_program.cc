#include "graph/ew_program.h"

#include <cstdio>

namespace streamline::graph {
namespace {

constexpr const char* kNames[] = {
    "Identity",    "Relu",
    "LeakyRelu",   "Sigmoid",
    "Tanh",        "Exp",
    "Log",         "Sqrt",
    "Reciprocal",  "Neg",
    "Abs",         "Erf",
    "HardSigmoid", "HardSwish",
    "Softplus",    "Elu",
    "Clip",        "Floor",
    "Ceil",        "Round",
    "Sign",        "Mish",
    "Softsign",    "Selu",
    "Celu",        "ThresholdedRelu",
    "Sin",         "Cos",
    "Silu",        "GeluErf",
    "GeluTanh",    "Add",
    "Sub",         "Mul",
    "Div",         "Pow",
    "Max",         "Min",
    "PRelu",       "Where",
};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(EwOp::kCount));

std::string fmt_float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

}  // namespace

const char* ew_op_name(EwOp op) {
  const int i = static_cast<int>(op);
  return i >= 0 && i < static_cast<int>(EwOp::kCount) ? kNames[i] : "?";
}

int ew_arity(EwOp op) {
  if (op == EwOp::kWhere) return 3;
  return static_cast<int>(op) >= static_cast<int>(EwOp::kAdd) ? 2 : 1;
}

int EwProgram::add(EwOp op, std::vector<int> args, float p0, float p1, float imm) {
  EwInstr in;
  in.op = op;
  for (size_t i = 0; i < args.size() && i < 3; ++i) in.args[i] = args[i];
  in.p0 = p0;
  in.p1 = p1;
  in.imm = imm;
  code.push_back(in);
  return output();
}

Status EwProgram::validate() const {
  if (num_inputs < 1) return invalid_argument("elementwise program: needs at least one input");
  if (code.empty()) return invalid_argument("elementwise program: no instructions");
  for (size_t i = 0; i < code.size(); ++i) {
    const EwInstr& in = code[i];
    if (static_cast<int>(in.op) < 0 || in.op >= EwOp::kCount)
      return invalid_argument("elementwise program: instruction " + std::to_string(i) + " has an unknown op");
    const int defined = num_inputs + static_cast<int>(i);
    for (int k = 0; k < ew_arity(in.op); ++k) {
      const int a = in.args[static_cast<size_t>(k)];
      if (a != EwInstr::kImm && (a < 0 || a >= defined))
        return invalid_argument("elementwise program: instruction " + std::to_string(i) + " reads register " +
                                std::to_string(a) + " before it is defined");
    }
  }
  return ok_status();
}

std::string EwProgram::to_string() const {
  std::string s;
  for (size_t i = 0; i < code.size(); ++i) {
    const EwInstr& in = code[i];
    s += (i ? " r" : "r") + std::to_string(num_inputs + static_cast<int>(i)) + "=" + ew_op_name(in.op) + "(";
    for (int k = 0; k < ew_arity(in.op); ++k) {
      const int a = in.args[static_cast<size_t>(k)];
      s += (k ? "," : "") + (a == EwInstr::kImm ? fmt_float(in.imm) : "r" + std::to_string(a));
    }
    s += ")";
    if (in.p0 != 0.f || in.p1 != 0.f) s += "[" + fmt_float(in.p0) + "," + fmt_float(in.p1) + "]";
  }
  return s;
}

void set_program_attrs(Node& n, const EwProgram& p) {
  Attribute inputs;
  inputs.kind = Attribute::Kind::kInt;
  inputs.i = p.num_inputs;
  Attribute ops;
  ops.kind = Attribute::Kind::kInts;
  Attribute args;
  args.kind = Attribute::Kind::kInts;
  Attribute params;
  params.kind = Attribute::Kind::kFloats;
  for (const EwInstr& in : p.code) {
    ops.ints.push_back(static_cast<int64_t>(in.op));
    for (int a : in.args) args.ints.push_back(a);
    params.floats.insert(params.floats.end(), {in.p0, in.p1, in.imm});
  }
  n.attrs["ew_inputs"] = std::move(inputs);
  n.attrs["ew_ops"] = std::move(ops);
  n.attrs["ew_args"] = std::move(args);
  n.attrs["ew_params"] = std::move(params);
}

Result<std::optional<EwProgram>> read_program_attrs(const Node& n) {
  if (!n.has_attr("ew_ops")) return std::optional<EwProgram>();
  EwProgram p;
  p.num_inputs = static_cast<int>(n.attr_int("ew_inputs", 0));
  const std::vector<int64_t> ops = n.attr_ints("ew_ops");
  const std::vector<int64_t> args = n.attr_ints("ew_args");
  const std::vector<float> params = n.attr_floats("ew_params");
  if (args.size() != 3 * ops.size() || params.size() != 3 * ops.size())
    return invalid_argument(n.describe() + ": ew_args and ew_params need 3 entries per entry of ew_ops");
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i] < 0 || ops[i] >= static_cast<int64_t>(EwOp::kCount))
      return invalid_argument(n.describe() + ": unknown elementwise op " + std::to_string(ops[i]));
    EwInstr in;
    in.op = static_cast<EwOp>(ops[i]);
    for (size_t k = 0; k < 3; ++k) in.args[k] = static_cast<int>(args[3 * i + k]);
    in.p0 = params[3 * i];
    in.p1 = params[3 * i + 1];
    in.imm = params[3 * i + 2];
    p.code.push_back(in);
  }
  SL_RETURN_IF_ERROR(p.validate().with_context(n.describe()));
  return std::optional<EwProgram>(std::move(p));
}

size_t conv_epilogue_first_input(const Node& n) {
  return n.domain == "streamline" && n.attr_int("x_scale", 0) != 0 ? 5 : 4;
}

}  // namespace streamline::graph
