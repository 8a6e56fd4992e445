// ai.onnx.ml LabelEncoder: maps each element of the input through a table of keys and values,
// giving a default for keys not in it.
//
//   opset 1:  classes_strings; string -> int64 (the key's index) or int64 -> string (classes[i]);
//             default_int64 (-1), default_string ("_Unused")
//   opset 2:  keys_{strings,int64s,floats} -> values_{strings,int64s,floats}; default_int64 (-1),
//             default_float (-0.0), default_string ("_Unused")
//   opset 4:  also keys_tensor / values_tensor / default_tensor, of string, int64, int32, int16,
//             float or double
//
// Float keys match by value (0.0 and -0.0 alike, NaN matches NaN). The output has the values' type.

#include <cmath>
#include <limits>
#include <unordered_map>

#include "ops/cpu/data_common.h"
#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

bool is_float_type(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64;
}

// A key in canonical form: strings as they are, integers as int64, floats as double (+0 for -0).
struct Keys {
  std::unordered_map<std::string, int64_t> strings;
  std::unordered_map<int64_t, int64_t> ints;
  std::unordered_map<double, int64_t> floats;
  int64_t nan = -1;  // index of a NaN key, or -1
};

class LabelEncoderKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  static KernelPtr create(const KernelCreateArgs& a) {
    auto k = std::make_unique<LabelEncoderKernel>(a.node);
    SL_RETURN_IF_ERROR(a.node.opset <= 1 ? k->init_v1(a.node, input_dtype(a, 0)) : k->init_table(a.node));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty() || !in[0].present()) return invalid("missing input 'X'");
    if (in[0].dtype != keys_.dtype())
      return invalid(std::string("input is ") + dtype_name(in[0].dtype) + ", the keys are " +
                     dtype_name(keys_.dtype()));
    ReshapeResult r;
    r.outputs.push_back({values_.dtype(), in[0].shape, Layout::kPlain});
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    Tensor& y = ctx.outputs[0];
    for (int64_t i = 0; i < x.numel(); ++i) put(y, i, find(x, i));
    return ok_status();
  }

 private:
  // Opset 1: the keys are classes_strings and the values their indices, or the other way round.
  Status init_v1(const graph::Node& node, DType input) {
    std::vector<std::string> classes;
    if (auto it = node.attrs.find("classes_strings"); it != node.attrs.end()) classes = it->second.strings;
    std::vector<int64_t> indices(classes.size());
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
    const Tensor names = Tensor::from_strings(Shape{static_cast<int64_t>(classes.size())}, classes);
    const Tensor ids = Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(indices.size())}, indices);
    if (input == DType::kInt64) {
      keys_ = ids;
      values_ = names;
      default_ = Tensor::from_strings(Shape{}, {node.attr_string("default_string", "_Unused")});
    } else {
      keys_ = names;
      values_ = ids;
      default_ = Tensor::scalar<int64_t>(node.attr_int("default_int64", -1));
    }
    return index_keys();
  }

  // Opsets 2 and 4: one keys_* and one values_* attribute of the same length.
  Status init_table(const graph::Node& node) {
    SL_ASSIGN_OR_RETURN(keys_, table(node, "keys"));
    SL_ASSIGN_OR_RETURN(values_, table(node, "values"));
    if (keys_.numel() != values_.numel())
      return invalid("has " + std::to_string(keys_.numel()) + " keys and " + std::to_string(values_.numel()) +
                     " values");
    if (auto it = node.attrs.find("default_tensor"); it != node.attrs.end() && it->second.t.defined()) {
      default_ = it->second.t;
      if (default_.numel() != 1 || default_.dtype() != values_.dtype())
        return invalid("default_tensor must be one " + std::string(dtype_name(values_.dtype())) + " element, got " +
                       default_.describe());
    } else if (values_.dtype() == DType::kString) {
      default_ = Tensor::from_strings(Shape{}, {node.attr_string("default_string", "_Unused")});
    } else if (is_float_type(values_.dtype())) {
      default_ = Tensor::empty(values_.dtype(), Shape{});
      store_f(values_.dtype(), default_.raw(), 0, node.attr_float("default_float", -0.f));
    } else {
      default_ = Tensor::empty(values_.dtype(), Shape{});
      store_f(values_.dtype(), default_.raw(), 0, static_cast<double>(node.attr_int("default_int64", -1)));
    }
    return index_keys();
  }

  // The keys_* or values_* of the node as a 1-D tensor.
  Result<Tensor> table(const graph::Node& node, const std::string& prefix) const {
    int found = 0;
    Tensor t;
    if (auto it = node.attrs.find(prefix + "_strings"); it != node.attrs.end()) {
      t = Tensor::from_strings(Shape{static_cast<int64_t>(it->second.strings.size())}, it->second.strings);
      ++found;
    }
    if (auto it = node.attrs.find(prefix + "_int64s"); it != node.attrs.end()) {
      t = Tensor::from_vector<int64_t>(Shape{static_cast<int64_t>(it->second.ints.size())}, it->second.ints);
      ++found;
    }
    if (auto it = node.attrs.find(prefix + "_floats"); it != node.attrs.end()) {
      t = Tensor::from_vector<float>(Shape{static_cast<int64_t>(it->second.floats.size())}, it->second.floats);
      ++found;
    }
    if (auto it = node.attrs.find(prefix + "_tensor"); it != node.attrs.end() && it->second.t.defined()) {
      t = it->second.t.reshaped(Shape{it->second.t.numel()});
      ++found;
    }
    if (found != 1)
      return invalid("needs exactly one of " + prefix + "_strings, " + prefix + "_int64s, " + prefix + "_floats, " +
                     prefix + "_tensor; has " + std::to_string(found));
    const DType dt = t.dtype();
    if (dt != DType::kString && dt != DType::kInt64 && dt != DType::kInt32 && dt != DType::kInt16 && !is_float_type(dt))
      return unsupported_error(prefix + " of type " + dtype_name(dt) + " are not supported");
    return t;
  }

  Status index_keys() {
    for (int64_t i = keys_.numel() - 1; i >= 0; --i) {  // the first of duplicate keys wins
      const DType dt = keys_.dtype();
      if (dt == DType::kString) {
        map_.strings[keys_.strings()[i]] = i;
      } else if (is_float_type(dt)) {
        const double v = element_as_double(keys_, i);
        if (std::isnan(v))
          map_.nan = i;
        else
          map_.floats[v == 0.0 ? 0.0 : v] = i;
      } else {
        map_.ints[element_as_int64(keys_, i)] = i;
      }
    }
    return ok_status();
  }

  // The value index for element i of x, or -1.
  int64_t find(const Tensor& x, int64_t i) const {
    if (x.dtype() == DType::kString) {
      auto it = map_.strings.find(x.strings()[i]);
      return it == map_.strings.end() ? -1 : it->second;
    }
    if (is_float_type(x.dtype())) {
      const double v = element_as_double(x, i);
      if (std::isnan(v)) return map_.nan;
      auto it = map_.floats.find(v == 0.0 ? 0.0 : v);
      return it == map_.floats.end() ? -1 : it->second;
    }
    auto it = map_.ints.find(element_as_int64(x, i));
    return it == map_.ints.end() ? -1 : it->second;
  }

  // y[i] = values[index], or the default.
  void put(Tensor& y, int64_t i, int64_t index) const {
    const Tensor& src = index >= 0 ? values_ : default_;
    const int64_t at = index >= 0 ? index : 0;
    if (y.dtype() == DType::kString) {
      y.strings()[i] = src.strings()[at];
      return;
    }
    const size_t esz = dtype_size(y.dtype());
    std::memcpy(static_cast<uint8_t*>(y.raw()) + static_cast<size_t>(i) * esz,
                static_cast<const uint8_t*>(src.raw()) + static_cast<size_t>(at) * esz, esz);
  }

  Tensor keys_, values_, default_;
  Keys map_;
};

}  // namespace

Status register_label_encoder(KernelRegistry& reg) {
  const auto factory = [](const KernelCreateArgs& a) { return LabelEncoderKernel::create(a); };
  SL_RETURN_IF_ERROR(add_typed_def(reg, "LabelEncoder", 1, DType::kUndefined, factory, "ai.onnx.ml"));
  return add_typed_def(reg, "LabelEncoder", 1, DType::kString, factory, "ai.onnx.ml");
}

}  // namespace streamline::ops::cpu
