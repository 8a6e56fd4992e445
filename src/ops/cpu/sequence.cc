// Sequence and optional operators. They take and give whole values (core/value.h), so they are
// ValueKernels run by the eager interpreter (ops/eager.h); tensors inside sequences share memory
// with the tensors they were made from, and every op makes a new sequence (values are immutable).
//
//   SequenceEmpty()                        -> []                       (dtype attribute)
//   SequenceConstruct(a, b, ...)           -> [a, b, ...]              (one element type)
//   SequenceInsert(s, t, pos?)             -> s with t before pos (at the end by default)
//   SequenceErase(s, pos?)                 -> s without element pos (the last by default)
//   SequenceAt(s, pos)                     -> s[pos]; pos may be negative
//   SequenceLength(s)                      -> int64 scalar
//   SplitToSequence(x, split?)             -> pieces of x along `axis` (11+)
//   ConcatFromSequence(s)                  -> concatenation along `axis`, or stacking (new_axis=1)
//   Optional(x?)                           -> an optional holding x, or an empty one of `type` (15+)
//   OptionalHasElement(x?)                 -> bool scalar (15+; from 18 a tensor or sequence is
//                                             "present", an omitted input is not)
//   OptionalGetElement(x)                  -> what x holds (15+; from 18 a tensor or sequence passes)

#include <algorithm>
#include <cstring>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"
#include "ops/eager.h"

namespace streamline::ops::cpu {
namespace {

// Copies n elements from src[src_at..] to dst[dst_at..]; strings one by one, others as bytes.
void copy_elements(const Tensor& src, int64_t src_at, Tensor& dst, int64_t dst_at, int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DType::kString) {
    std::copy(src.strings() + src_at, src.strings() + src_at + n, dst.strings() + dst_at);
    return;
  }
  const size_t esz = dtype_size(src.dtype());
  std::memcpy(static_cast<uint8_t*>(dst.raw()) + static_cast<size_t>(dst_at) * esz,
              static_cast<const uint8_t*>(src.raw()) + static_cast<size_t>(src_at) * esz, static_cast<size_t>(n) * esz);
}

class SequenceKernel : public ValueKernel {
 public:
  explicit SequenceKernel(const graph::Node& node) : ValueKernel(node), opset_(node.opset) {}
  std::string eager_reason() const override {
    return desc_ + " works on sequences or optionals: sequences, optionals and string tensors run node by node";
  }

 protected:
  Status invalid(const std::string& msg) const { return invalid_argument(desc_ + ": " + msg); }

  // Input i as a sequence, or InvalidArgument saying what it is.
  Result<const AnyValue*> sequence_input(std::span<const AnyValue> in, size_t i) const {
    if (i >= in.size() || !in[i].is_sequence())
      return invalid("input " + std::to_string(i) + " must be a sequence, got " +
                     (i < in.size() ? in[i].describe() : std::string("nothing")));
    return &in[i];
  }

  // The position in input i (an int32/int64 scalar), or `fallback` when the input is omitted.
  Result<int64_t> position(std::span<const AnyValue> in, size_t i, int64_t fallback) const {
    if (i >= in.size() || !in[i].defined()) return fallback;
    const Tensor& t = in[i].tensor();
    if (!in[i].is_tensor() || (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) || t.numel() != 1)
      return invalid("position must be an int32 or int64 scalar, got " + in[i].describe());
    return load_index(t, 0);
  }

  // `pos` normalised into [0, n) (or [0, n] with `end_ok`), or InvalidArgument.
  Result<size_t> index(int64_t pos, size_t n, bool end_ok) const {
    const auto len = static_cast<int64_t>(n);
    const int64_t p = pos < 0 ? pos + len : pos;
    if (p < 0 || p > len || (p == len && !end_ok))
      return invalid("position " + std::to_string(pos) + " is out of range for a sequence of " + std::to_string(n) +
                     " tensors");
    return static_cast<size_t>(p);
  }

  // Every tensor of a sequence has the sequence's element type.
  Status check_element(const AnyValue& seq, const Tensor& t) const {
    if (seq.elem_dtype() != DType::kUndefined && t.dtype() != seq.elem_dtype())
      return invalid("a " + std::string(dtype_name(t.dtype())) + " tensor cannot join a " +
                     value_type_name(seq.kind(), seq.elem_dtype()));
    return ok_status();
  }

  int opset_;
};

// One class per op keeps each rule next to its checks; the factory reads the attributes.
class SequenceEmptyKernel final : public SequenceKernel {
 public:
  SequenceEmptyKernel(const graph::Node& n) : SequenceKernel(n), dtype_(static_cast<DType>(n.attr_int("dtype", 1))) {}
  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue>, const EagerOptions&) const override {
    return std::vector<AnyValue>{AnyValue::sequence({}, dtype_)};
  }

 private:
  DType dtype_;
};

class SequenceConstructKernel final : public SequenceKernel {
 public:
  using SequenceKernel::SequenceKernel;
  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    if (in.empty()) return invalid("needs at least one input");
    std::vector<Tensor> items;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].is_tensor())
        return invalid("input " + std::to_string(i) + " must be a tensor, got " + in[i].describe());
      if (in[i].tensor().dtype() != in[0].tensor().dtype())
        return invalid("inputs mix " + in[0].tensor().describe() + " and " + in[i].tensor().describe());
      items.push_back(in[i].tensor());
    }
    return std::vector<AnyValue>{AnyValue::sequence(std::move(items), in[0].tensor().dtype())};
  }
};

class SequenceInsertKernel final : public SequenceKernel {
 public:
  using SequenceKernel::SequenceKernel;
  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    SL_ASSIGN_OR_RETURN(const AnyValue* seq, sequence_input(in, 0));
    if (in.size() < 2 || !in[1].is_tensor()) return invalid("input 1 must be a tensor");
    const Tensor& t = in[1].tensor();
    SL_RETURN_IF_ERROR(check_element(*seq, t));
    std::vector<Tensor> items = seq->items();
    SL_ASSIGN_OR_RETURN(const int64_t pos, position(in, 2, static_cast<int64_t>(items.size())));
    SL_ASSIGN_OR_RETURN(const size_t at, index(pos, items.size(), true));
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(at), t);
    return std::vector<AnyValue>{AnyValue::sequence(std::move(items), t.dtype())};
  }
};

class SequenceEraseKernel final : public SequenceKernel {
 public:
  using SequenceKernel::SequenceKernel;
  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    SL_ASSIGN_OR_RETURN(const AnyValue* seq, sequence_input(in, 0));
    std::vector<Tensor> items = seq->items();
    SL_ASSIGN_OR_RETURN(const int64_t pos, position(in, 1, -1));
    SL_ASSIGN_OR_RETURN(const size_t at, index(pos, items.size(), false));
    items.erase(items.begin() + static_cast<std::ptrdiff_t>(at));
    return std::vector<AnyValue>{AnyValue::sequence(std::move(items), seq->elem_dtype())};
  }
};

class SequenceAtKernel final : public SequenceKernel {
 public:
  using SequenceKernel::SequenceKernel;
  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    SL_ASSIGN_OR_RETURN(const AnyValue* seq, sequence_input(in, 0));
    if (in.size() < 2 || !in[1].defined()) return invalid("missing input 'position'");
    SL_ASSIGN_OR_RETURN(const int64_t pos, position(in, 1, 0));
    SL_ASSIGN_OR_RETURN(const size_t at, index(pos, seq->items().size(), false));
    return std::vector<AnyValue>{AnyValue(seq->items()[at])};
  }
};

class SequenceLengthKernel final : public SequenceKernel {
 public:
  using SequenceKernel::SequenceKernel;
  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    SL_ASSIGN_OR_RETURN(const AnyValue* seq, sequence_input(in, 0));
    return std::vector<AnyValue>{AnyValue(Tensor::scalar<int64_t>(static_cast<int64_t>(seq->items().size())))};
  }
};

// Element counts before `axis`, along it, and after it.
struct Split3 {
  int64_t outer = 1, len = 1, inner = 1;
};

Split3 split3(const Shape& s, size_t axis) {
  Split3 r;
  for (size_t d = 0; d < s.rank(); ++d) {
    if (d < axis) r.outer *= s[d];
    if (d > axis) r.inner *= s[d];
  }
  r.len = s[axis];
  return r;
}

class SplitToSequenceKernel final : public SequenceKernel {
 public:
  SplitToSequenceKernel(const graph::Node& n)
      : SequenceKernel(n), axis_(n.attr_int("axis", 0)), keepdims_(n.attr_int("keepdims", 1) != 0) {}

  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    if (in.empty() || !in[0].is_tensor()) return invalid("input 'input' must be a tensor");
    const Tensor& x = in[0].tensor();
    const auto rank = static_cast<int64_t>(x.shape().rank());
    int64_t axis = 0;
    if (!normalize_axis(axis_, rank, &axis))
      return invalid("axis " + std::to_string(axis_) + " is out of range for " + x.describe());
    const Split3 s = split3(x.shape(), static_cast<size_t>(axis));
    std::vector<int64_t> sizes;
    bool squeeze = false;
    if (in.size() > 1 && in[1].defined()) {
      const Tensor& sp = in[1].tensor();
      if (!in[1].is_tensor() || (sp.dtype() != DType::kInt64 && sp.dtype() != DType::kInt32) || sp.shape().rank() > 1)
        return invalid("split must be an int32/int64 scalar or 1-D tensor, got " + in[1].describe());
      if (sp.shape().rank() == 0) {
        const int64_t chunk = load_index(sp, 0);
        if (chunk <= 0) return invalid("split " + std::to_string(chunk) + " must be positive");
        for (int64_t done = 0; done < s.len; done += chunk) sizes.push_back(std::min(chunk, s.len - done));
      } else {
        int64_t total = 0;
        for (int64_t i = 0; i < sp.numel(); ++i) {
          const int64_t v = load_index(sp, i);
          if (v < 0) return invalid("split sizes must not be negative");
          sizes.push_back(v);
          total += v;
        }
        if (total != s.len)
          return invalid("split sizes add up to " + std::to_string(total) + ", axis " + std::to_string(axis) + " of " +
                         x.describe() + " has " + std::to_string(s.len));
      }
    } else {
      sizes.assign(static_cast<size_t>(s.len), 1);
      squeeze = !keepdims_;
    }
    std::vector<Tensor> items;
    int64_t start = 0;
    for (int64_t size : sizes) {
      Shape shape;
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis || !squeeze) shape.push_back(d == axis ? size : x.shape()[static_cast<size_t>(d)]);
      Tensor piece = Tensor::empty(x.dtype(), shape);
      if (!piece.defined()) return resource_exhausted(desc_ + ": cannot allocate " + shape.to_string());
      for (int64_t o = 0; o < s.outer; ++o)
        copy_elements(x, (o * s.len + start) * s.inner, piece, o * size * s.inner, size * s.inner);
      items.push_back(std::move(piece));
      start += size;
    }
    return std::vector<AnyValue>{AnyValue::sequence(std::move(items), x.dtype())};
  }

 private:
  int64_t axis_;
  bool keepdims_;
};

class ConcatFromSequenceKernel final : public SequenceKernel {
 public:
  ConcatFromSequenceKernel(const graph::Node& n)
      : SequenceKernel(n),
        has_axis_(n.has_attr("axis")),
        axis_(n.attr_int("axis", 0)),
        new_axis_(n.attr_int("new_axis", 0) != 0) {}

  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    if (!has_axis_) return invalid("missing attribute 'axis'");
    SL_ASSIGN_OR_RETURN(const AnyValue* seq, sequence_input(in, 0));
    const std::vector<Tensor>& items = seq->items();
    if (items.empty()) return invalid("cannot concatenate an empty sequence");
    const auto rank = static_cast<int64_t>(items[0].shape().rank()) + (new_axis_ ? 1 : 0);
    int64_t axis = 0;
    if (!normalize_axis(axis_, rank, &axis))
      return invalid("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(rank));
    // Each element as a tensor of the output's rank (with an axis of length 1 when stacking).
    std::vector<Shape> shapes;
    int64_t total = 0;
    for (const Tensor& t : items) {
      Shape s;
      for (size_t d = 0; d < t.shape().rank(); ++d) {
        if (new_axis_ && static_cast<int64_t>(d) == axis) s.push_back(1);
        s.push_back(t.shape()[d]);
      }
      if (new_axis_ && axis == static_cast<int64_t>(t.shape().rank())) s.push_back(1);
      bool fits = t.dtype() == items[0].dtype() && static_cast<int64_t>(s.rank()) == rank;
      for (int64_t d = 0; fits && !shapes.empty() && d < rank; ++d)
        fits = d == axis || s[static_cast<size_t>(d)] == shapes[0][static_cast<size_t>(d)];
      if (!fits)
        return invalid("cannot concatenate " + items[0].describe() + " and " + t.describe() + " along axis " +
                       std::to_string(axis));
      total += s[static_cast<size_t>(axis)];
      shapes.push_back(std::move(s));
    }
    Shape out_shape = shapes[0];
    out_shape[static_cast<size_t>(axis)] = total;
    Tensor y = Tensor::empty(items[0].dtype(), out_shape);
    if (!y.defined()) return resource_exhausted(desc_ + ": cannot allocate " + out_shape.to_string());
    const Split3 o = split3(out_shape, static_cast<size_t>(axis));
    int64_t at = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      const int64_t len = shapes[k][static_cast<size_t>(axis)];
      for (int64_t b = 0; b < o.outer; ++b)
        copy_elements(items[k], b * len * o.inner, y, (b * o.len + at) * o.inner, len * o.inner);
      at += len;
    }
    return std::vector<AnyValue>{AnyValue(std::move(y))};
  }

 private:
  bool has_axis_;
  int64_t axis_;
  bool new_axis_;
};

class OptionalKernel final : public SequenceKernel {
 public:
  OptionalKernel(const graph::Node& n) : SequenceKernel(n) {
    auto it = n.attrs.find("type");
    if (it != n.attrs.end() && it->second.kind == graph::Attribute::Kind::kType) {
      has_type_ = true;
      kind_ = it->second.type_kind;
      dtype_ = it->second.type_dtype;
    }
  }
  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    if (!in.empty() && in[0].defined()) {
      if (in[0].is_optional()) return invalid("input must be a tensor or a sequence, got " + in[0].describe());
      return std::vector<AnyValue>{AnyValue::some(in[0])};
    }
    if (!has_type_) return invalid("an Optional without an input needs the attribute 'type'");
    return std::vector<AnyValue>{AnyValue::none(optional_of(kind_), dtype_)};
  }

 private:
  bool has_type_ = false;
  ValueKind kind_ = ValueKind::kTensor;
  DType dtype_ = DType::kUndefined;
};

class OptionalHasElementKernel final : public SequenceKernel {
 public:
  using SequenceKernel::SequenceKernel;
  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    const bool given = !in.empty() && in[0].defined();
    if (opset_ < 18 && (!given || !in[0].is_optional()))
      return invalid("input must be an optional before opset 18, got " + (given ? in[0].describe() : "nothing"));
    const bool has = given && (!in[0].is_optional() || in[0].has_element());
    return std::vector<AnyValue>{AnyValue(Tensor::scalar<bool>(has))};
  }
};

class OptionalGetElementKernel final : public SequenceKernel {
 public:
  using SequenceKernel::SequenceKernel;
  Result<std::vector<AnyValue>> run_values(std::span<const AnyValue> in, const EagerOptions&) const override {
    if (in.empty() || !in[0].defined()) return invalid("missing input");
    if (!in[0].is_optional()) {
      if (opset_ < 18) return invalid("input must be an optional before opset 18, got " + in[0].describe());
      return std::vector<AnyValue>{in[0]};
    }
    if (!in[0].has_element()) return invalid("the optional input is empty");
    return std::vector<AnyValue>{in[0].element()};
  }
};

template <typename K>
KernelFactory factory() {
  return [](const KernelCreateArgs& a) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<K>(a.node));
  };
}

// Sequence ops move tensors without reading their elements: one def for the fixed-size types and
// one for strings.
template <typename K>
Status add_sequence_op(KernelRegistry& reg, const char* op, int since) {
  SL_RETURN_IF_ERROR(add_typed_def(reg, op, since, DType::kUndefined, factory<K>()));
  return add_typed_def(reg, op, since, DType::kString, factory<K>());
}

}  // namespace

Status register_sequence(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(add_sequence_op<SequenceEmptyKernel>(reg, "SequenceEmpty", 11));
  SL_RETURN_IF_ERROR(add_sequence_op<SequenceConstructKernel>(reg, "SequenceConstruct", 11));
  SL_RETURN_IF_ERROR(add_sequence_op<SequenceInsertKernel>(reg, "SequenceInsert", 11));
  SL_RETURN_IF_ERROR(add_sequence_op<SequenceEraseKernel>(reg, "SequenceErase", 11));
  SL_RETURN_IF_ERROR(add_sequence_op<SequenceAtKernel>(reg, "SequenceAt", 11));
  SL_RETURN_IF_ERROR(add_sequence_op<SequenceLengthKernel>(reg, "SequenceLength", 11));
  SL_RETURN_IF_ERROR(add_sequence_op<SplitToSequenceKernel>(reg, "SplitToSequence", 11));
  SL_RETURN_IF_ERROR(add_sequence_op<ConcatFromSequenceKernel>(reg, "ConcatFromSequence", 11));
  SL_RETURN_IF_ERROR(add_sequence_op<OptionalKernel>(reg, "Optional", 15));
  SL_RETURN_IF_ERROR(add_sequence_op<OptionalHasElementKernel>(reg, "OptionalHasElement", 15));
  return add_sequence_op<OptionalGetElementKernel>(reg, "OptionalGetElement", 15);
}

}  // namespace streamline::ops::cpu
