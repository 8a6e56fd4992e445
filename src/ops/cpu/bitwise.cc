// Bit-level operators: BitwiseAnd, BitwiseOr, BitwiseXor (opset 18, NumPy broadcasting),
// BitwiseNot (18) on every integer dtype, and BitCast (26), which reinterprets each element's bits
// as the dtype `to` of the same width (shape unchanged).
//
// The bitwise ops act on the stored bits alone, so each runs on the unsigned integer of the
// element's width: int16 and uint16 share one loop.

#include <cstring>

#include "ops/cpu/data_common.h"
#include "ops/cpu/families.h"
#include "ops/cpu/math_broadcast.h"

namespace streamline::ops::cpu {
namespace {

enum class BitOp { kAnd, kOr, kXor };

// Calls f(U{}) with U the unsigned integer of `bytes` width.
template <typename F>
bool by_width(size_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      f(uint8_t{});
      return true;
    case 2:
      f(uint16_t{});
      return true;
    case 4:
      f(uint32_t{});
      return true;
    case 8:
      f(uint64_t{});
      return true;
    default:
      return false;
  }
}

class BitwiseBinaryKernel final : public DataKernel {
 public:
  BitwiseBinaryKernel(const graph::Node& node, BitOp op) : DataKernel(node), node_(node), op_(op) {}
  Status init(const KernelCreateArgs&) { return ok_status(); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 2 || !in[0].present() || !in[1].present()) return invalid("expects A and B");
    if (!is_integer_dtype(in[0].dtype)) return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    if (in[1].dtype != in[0].dtype)
      return invalid(std::string("input dtypes ") + dtype_name(in[0].dtype) + " and " + dtype_name(in[1].dtype) +
                     " differ");
    const Shape shapes[] = {in[0].shape, in[1].shape};
    SL_ASSIGN_OR_RETURN(Shape out, math::broadcast_all(node_, shapes));
    if (out.rank() > static_cast<size_t>(math::kMaxBroadcastRank)) return unsupported_error("rank too large");
    const math::Operand ops[] = {{in[0].shape, Layout::kPlain}, {in[1].shape, Layout::kPlain}};
    auto plan = std::make_shared<math::StridedPlan>(math::make_strided_plan(out, Layout::kPlain, ops));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, out, Layout::kPlain});
    rr.state = std::move(plan);
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto& plan = *static_cast<const math::StridedPlan*>(ctx.state);
    const BitOp op = op_;
    by_width(dtype_size(ctx.inputs[0].dtype()), [&](auto tag) {
      using U = decltype(tag);
      const auto* a = static_cast<const U*>(ctx.inputs[0].raw());
      const auto* b = static_cast<const U*>(ctx.inputs[1].raw());
      auto* y = static_cast<U*>(ctx.outputs[0].raw());
      const auto f = [op](U x, U z) -> U {
        return op == BitOp::kAnd  ? static_cast<U>(x & z)
               : op == BitOp::kOr ? static_cast<U>(x | z)
                                  : static_cast<U>(x ^ z);
      };
      math::apply_binary(plan, a, b, y, f, ctx.num_threads, math::kCheapGrain);
    });
    return ok_status();
  }

 private:
  graph::Node node_;
  BitOp op_;
};

class BitwiseNotKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;
  Status init(const KernelCreateArgs&) { return ok_status(); }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid("expects X");
    if (!is_integer_dtype(in[0].dtype)) return unsupported_error(std::string("dtype ") + dtype_name(in[0].dtype));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{in[0].dtype, in[0].shape, Layout::kPlain});
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const int64_t n = ctx.inputs[0].numel();
    by_width(dtype_size(ctx.inputs[0].dtype()), [&](auto tag) {
      using U = decltype(tag);
      const auto* x = static_cast<const U*>(ctx.inputs[0].raw());
      auto* y = static_cast<U*>(ctx.outputs[0].raw());
      math::parallel_chunks(n, math::kCheapGrain, ctx.num_threads, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) y[i] = static_cast<U>(~x[i]);
      });
    });
    return ok_status();
  }
};

class BitCastKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    if (!a.node.has_attr("to")) return invalid("attribute 'to' is required");
    to_ = static_cast<DType>(a.node.attr_int("to", 0));
    if (!dtype_supported(to_))
      return unsupported_error("'to' = " + std::to_string(static_cast<int>(to_)) + " is not a dtype BitCast can make");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.size() != 1 || !in[0].present()) return invalid("expects X");
    SL_RETURN_IF_ERROR(check_movable(in[0].dtype, desc_));
    if (dtype_size(in[0].dtype) != dtype_size(to_))
      return invalid(std::string("cannot reinterpret ") + dtype_name(in[0].dtype) + " as " + dtype_name(to_) +
                     ": the widths differ");
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{to_, in[0].shape, Layout::kPlain});
    rr.inplace = {0};
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    copy_bytes(ctx.outputs[0].raw(), ctx.inputs[0].raw(), ctx.inputs[0].nbytes(), ctx.num_threads);
    return ok_status();
  }

 private:
  DType to_ = DType::kUndefined;
};

template <typename K>
KernelFactory factory() {
  return [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<K>(a.node);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

KernelFactory binary_factory(BitOp op) {
  return [op](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    auto k = std::make_unique<BitwiseBinaryKernel>(a.node, op);
    SL_RETURN_IF_ERROR(k->init(a));
    return std::unique_ptr<Kernel>(std::move(k));
  };
}

Status add(KernelRegistry& reg, const char* op, int since, KernelFactory f) {
  KernelDef def;
  def.op = op;
  def.since_version = since;
  def.provider = "cpu";
  def.create = std::move(f);
  return reg.add(std::move(def));
}

}  // namespace

Status register_bitwise(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add(reg, "BitwiseAnd", 18, binary_factory(BitOp::kAnd)));
  SL_RETURN_IF_ERROR(add(reg, "BitwiseOr", 18, binary_factory(BitOp::kOr)));
  SL_RETURN_IF_ERROR(add(reg, "BitwiseXor", 18, binary_factory(BitOp::kXor)));
  SL_RETURN_IF_ERROR(add(reg, "BitwiseNot", 18, factory<BitwiseNotKernel>()));
  return add(reg, "BitCast", 26, factory<BitCastKernel>());
}

}  // namespace streamline::ops::cpu
