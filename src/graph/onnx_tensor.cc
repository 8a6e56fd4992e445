#include "graph/onnx_tensor.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "core/small_types.h"

namespace streamline::graph {
namespace {

namespace fs = std::filesystem;
using onnx::TensorProto;

// Largest element count accepted from dims; keeps numel * element size far from overflow.
constexpr int64_t kMaxElements = int64_t{1} << 56;

// Product of the dims, or an error for negative or overflowing dims. The product of the non-zero
// dims is bounded even when a zero makes the count 0: Shape::numel() multiplies left to right, so
// every partial product must fit too.
Result<int64_t> checked_numel(const TensorProto& proto, const std::string& what) {
  bool zero = false;
  int64_t n = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0) return invalid_argument(what + " has negative dimension " + std::to_string(d));
    if (d == 0) {
      zero = true;
      continue;
    }
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      return invalid_argument(what + " declares more elements than any tensor can hold");
  }
  return zero ? int64_t{0} : n;
}

std::string shape_text(DType dt, const Shape& shape) {
  return std::string(dtype_name(dt)) + shape.to_string();
}

Result<Tensor> allocate(DType dt, const Shape& shape, const std::string& what) {
  Tensor t = Tensor::empty(dt, shape);
  if (!t.defined()) return resource_exhausted("out of memory allocating " + what + " (" + shape_text(dt, shape) + ")");
  return t;
}

// Copies a typed repeated field into `t`, converting each element with `conv`.
template <typename Dst, typename Field, typename Conv>
void copy_field(const Field& src, Tensor& t, Conv conv) {
  Dst* d = t.data<Dst>();
  for (int i = 0; i < src.size(); ++i) d[i] = conv(src.Get(i));
}

template <typename Dst>
auto cast_to() {
  return [](auto v) { return static_cast<Dst>(v); };
}

// Which typed field carries elements of `dt`, its name, and its element count.
struct TypedField {
  const char* name;
  int64_t count;
};
TypedField typed_field(const TensorProto& p, DType dt) {
  switch (dt) {
    case DType::kFloat32:
      return {"float_data", p.float_data_size()};
    case DType::kFloat64:
      return {"double_data", p.double_data_size()};
    case DType::kInt64:
      return {"int64_data", p.int64_data_size()};
    case DType::kUInt32:
    case DType::kUInt64:
      return {"uint64_data", p.uint64_data_size()};
    default:
      return {"int32_data", p.int32_data_size()};
  }
}

// Bytes a TensorProto holds for `numel` elements of `dt` (4- and 2-bit types packed).
int64_t packed_bytes(DType dt, int64_t numel) {
  const int bits = packed_bits(dt);
  return bits == 8 ? numel * static_cast<int64_t>(dtype_size(dt)) : (numel * bits + 7) / 8;
}

// Element i of packed `src` as stored in memory: 4- and 2-bit fields from the least significant
// bits up, the signed integers sign-extended.
uint8_t unpacked_element(DType dt, const uint8_t* src, int64_t i) {
  const int bits = packed_bits(dt);
  if (bits == 8) return src[i];
  const int per = 8 / bits;
  const uint8_t field = static_cast<uint8_t>((src[i / per] >> ((i % per) * bits)) & ((1 << bits) - 1));
  return is_small_int(dt) ? int_to_small(dt, static_cast<int64_t>(field), {}) : field;
}

void unpack_into(DType dt, const uint8_t* src, Tensor& t) {
  auto* dst = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = unpacked_element(dt, src, i);
}

void fill_from_typed(const TensorProto& p, DType dt, Tensor& t) {
  switch (dt) {
    case DType::kFloat32:
      copy_field<float>(p.float_data(), t, cast_to<float>());
      break;
    case DType::kFloat64:
      copy_field<double>(p.double_data(), t, cast_to<double>());
      break;
    case DType::kInt64:
      copy_field<int64_t>(p.int64_data(), t, cast_to<int64_t>());
      break;
    case DType::kUInt64:
      copy_field<uint64_t>(p.uint64_data(), t, cast_to<uint64_t>());
      break;
    case DType::kUInt32:
      copy_field<uint32_t>(p.uint64_data(), t, cast_to<uint32_t>());
      break;
    case DType::kInt32:
      copy_field<int32_t>(p.int32_data(), t, cast_to<int32_t>());
      break;
    case DType::kInt16:
      copy_field<int16_t>(p.int32_data(), t, cast_to<int16_t>());
      break;
    case DType::kInt8:
      copy_field<int8_t>(p.int32_data(), t, cast_to<int8_t>());
      break;
    case DType::kUInt16:
      copy_field<uint16_t>(p.int32_data(), t, cast_to<uint16_t>());
      break;
    case DType::kUInt8:
      copy_field<uint8_t>(p.int32_data(), t, cast_to<uint8_t>());
      break;
    case DType::kBool:
      copy_field<uint8_t>(p.int32_data(), t, [](int32_t v) { return static_cast<uint8_t>(v != 0); });
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      // The 16-bit pattern sits in the low half of each int32.
      copy_field<uint16_t>(p.int32_data(), t,
                           [](int32_t v) { return static_cast<uint16_t>(static_cast<uint32_t>(v) & 0xFFFFu); });
      break;
    default:
      if (is_small_type(dt)) {
        // One packed byte (one, two or four elements) per int32.
        std::vector<uint8_t> bytes(static_cast<size_t>(p.int32_data_size()));
        for (int i = 0; i < p.int32_data_size(); ++i)
          bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(p.int32_data(i));
        unpack_into(dt, bytes.data(), t);
      }
      break;
  }
}

void normalize_bools(Tensor& t) {
  if (t.dtype() != DType::kBool) return;
  uint8_t* d = t.data<uint8_t>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = d[i] != 0;
}

// Parses a non-negative decimal integer as written in external_data values.
std::optional<int64_t> parse_count(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

struct ExternalRef {
  std::string location;
  int64_t offset = 0;
  std::optional<int64_t> length;
};

Result<ExternalRef> parse_external_ref(const TensorProto& p, const std::string& what) {
  ExternalRef ref;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") {
      ref.location = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      std::optional<int64_t> v = parse_count(kv.value());
      if (!v) return invalid_argument(what + " has a bad external_data " + kv.key() + " '" + kv.value() + "'");
      if (kv.key() == "offset")
        ref.offset = *v;
      else
        ref.length = *v;
    }
  }
  if (ref.location.empty()) return invalid_argument(what + " is stored externally but names no location");
  if (ref.location.find('\0') != std::string::npos)
    return invalid_argument(what + " has an external_data location containing a NUL byte");
  return ref;
}

// Resolves `location` inside `base_dir`, refusing absolute paths and paths that leave the folder.
Result<fs::path> resolve_location(const std::string& base_dir, const std::string& location, const std::string& what) {
  const fs::path loc(location);
  if (loc.is_absolute() || loc.has_root_path())
    return invalid_argument(what + " has an absolute external_data location '" + location +
                            "'; locations must be relative to the model's folder");
  const fs::path norm = loc.lexically_normal();
  if (norm.empty() || *norm.begin() == ".." || norm == ".")
    return invalid_argument(what + " has external_data location '" + location + "' outside the model's folder");
  return fs::path(base_dir) / norm;
}

Result<Tensor> read_external(const TensorProto& p, DType dt, const Shape& shape, int64_t nbytes,
                             const TensorReadOptions& options, const std::string& what) {
  if (options.base_dir.empty())
    return invalid_argument(what +
                            " is stored in an external file, which needs the model's folder; load the "
                            "model from a file");
  SL_ASSIGN_OR_RETURN(ExternalRef ref, parse_external_ref(p, what));
  SL_ASSIGN_OR_RETURN(fs::path file, resolve_location(options.base_dir, ref.location, what));
  std::string file_text = "'";  // built piecewise: GCC 12 warns falsely on "'" + s + "'" here
  file_text += file.string();
  file_text += '\'';
  if (ref.length && *ref.length != nbytes)
    return invalid_argument(what + " has external_data length " + std::to_string(*ref.length) + " but " +
                            shape_text(dt, shape) + " needs " + std::to_string(nbytes) + " bytes");
  if (nbytes > options.max_external_bytes)
    return invalid_argument(what + " needs " + std::to_string(nbytes) + " bytes from " + file_text +
                            ", over the limit of " + std::to_string(options.max_external_bytes));
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (ec || !fs::exists(st))
    return not_found("missing initializer data for " + what + ": external file " + file_text + " does not exist");
  if (!fs::is_regular_file(st))
    return invalid_argument("missing initializer data for " + what + ": " + file_text + " is not a regular file");
  const uintmax_t size = fs::file_size(file, ec);
  if (ec) return not_found("missing initializer data for " + what + ": cannot read the size of " + file_text);
  const auto fsize = static_cast<uint64_t>(size);
  if (static_cast<uint64_t>(ref.offset) > fsize || static_cast<uint64_t>(nbytes) > fsize - ref.offset)
    return invalid_argument("missing initializer data for " + what + ": bytes " + std::to_string(ref.offset) + ".." +
                            std::to_string(ref.offset + nbytes) + " lie past the end of " + file_text + " (" +
                            std::to_string(fsize) + " bytes)");
  SL_ASSIGN_OR_RETURN(Tensor t, allocate(dt, shape, what));
  if (nbytes == 0) return t;
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(ref.offset));
  in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(nbytes));
  if (!in) return invalid_argument("missing initializer data for " + what + ": cannot read " + file_text);
  normalize_bools(t);
  return t;
}

}  // namespace

DType dtype_from_onnx(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto::FLOAT:
      return DType::kFloat32;
    case TensorProto::UINT8:
      return DType::kUInt8;
    case TensorProto::INT8:
      return DType::kInt8;
    case TensorProto::UINT16:
      return DType::kUInt16;
    case TensorProto::INT16:
      return DType::kInt16;
    case TensorProto::INT32:
      return DType::kInt32;
    case TensorProto::INT64:
      return DType::kInt64;
    case TensorProto::BOOL:
      return DType::kBool;
    case TensorProto::FLOAT16:
      return DType::kFloat16;
    case TensorProto::DOUBLE:
      return DType::kFloat64;
    case TensorProto::UINT32:
      return DType::kUInt32;
    case TensorProto::UINT64:
      return DType::kUInt64;
    case TensorProto::BFLOAT16:
      return DType::kBFloat16;
    default:
      // FLOAT8E4M3FN (17) .. INT2 (26): newer than ONNX 1.12's enum, same numbers as DType.
      if (elem_type >= 17 && elem_type <= 26) return static_cast<DType>(elem_type);
      return DType::kUndefined;
  }
}

std::string onnx_type_name(int32_t elem_type) {
  if (!onnx::TensorProto_DataType_IsValid(elem_type)) {
    const DType known = dtype_from_onnx(elem_type);
    return known != DType::kUndefined ? dtype_name(known) : "id " + std::to_string(elem_type);
  }
  std::string n = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elem_type));
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  return n;
}

DimList dims_from_onnx(const onnx::TensorShapeProto& shape) {
  DimList dims;
  dims.reserve(static_cast<size_t>(shape.dim_size()));
  for (const auto& d : shape.dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0)
      dims.emplace_back(d.dim_value());
    else if (d.has_dim_param() && !d.dim_param().empty())
      dims.push_back(Dim::sym(d.dim_param()));
    else
      dims.emplace_back();
  }
  return dims;
}

Result<Tensor> tensor_from_onnx(const TensorProto& p, const TensorReadOptions& options, const std::string& what) {
  const int32_t elem = p.data_type();
  const DType dt = dtype_from_onnx(elem);
  if (dt == DType::kUndefined) {
    if (elem == TensorProto::UNDEFINED) return unsupported(what + " has no element type");
    return unsupported(what + " has element type " + onnx_type_name(elem) + ", which streamline does not support");
  }
  if (p.has_segment()) return unsupported(what + " is a segmented tensor, which streamline does not support");
  SL_ASSIGN_OR_RETURN(const int64_t numel, checked_numel(p, what));
  const Shape shape(std::vector<int64_t>(p.dims().begin(), p.dims().end()));
  const int64_t nbytes = packed_bytes(dt, numel);
  const bool packed = packed_bits(dt) != 8;

  if (p.data_location() == TensorProto::EXTERNAL) {
    if (!packed) return read_external(p, dt, shape, nbytes, options, what);
    // Read the packed bytes as uint8, then spread them one element per byte.
    SL_ASSIGN_OR_RETURN(Tensor raw, read_external(p, DType::kUInt8, Shape{nbytes}, nbytes, options, what));
    SL_ASSIGN_OR_RETURN(Tensor t, allocate(dt, shape, what));
    unpack_into(dt, raw.data<uint8_t>(), t);
    return t;
  }

  if (p.has_raw_data()) {
    const auto have = static_cast<int64_t>(p.raw_data().size());
    if (have != nbytes)
      return invalid_argument(what + " has " + std::to_string(have) + " bytes of raw_data but " +
                              shape_text(dt, shape) + " needs " + std::to_string(nbytes));
    SL_ASSIGN_OR_RETURN(Tensor t, allocate(dt, shape, what));
    if (packed)
      unpack_into(dt, reinterpret_cast<const uint8_t*>(p.raw_data().data()), t);
    else if (nbytes)
      std::memcpy(t.raw(), p.raw_data().data(), static_cast<size_t>(nbytes));
    normalize_bools(t);
    return t;
  }

  const TypedField field = typed_field(p, dt);
  const int64_t want = packed ? nbytes : numel;  // a 4- or 2-bit int32_data entry holds one packed byte
  if (field.count != want)
    return invalid_argument(what + " has " + std::to_string(field.count) + " " + field.name + " elements but " +
                            shape_text(dt, shape) + " needs " + std::to_string(want));
  SL_ASSIGN_OR_RETURN(Tensor t, allocate(dt, shape, what));
  fill_from_typed(p, dt, t);
  return t;
}

size_t onnx_payload_bytes(const TensorProto& p) {
  return p.raw_data().size() + sizeof(float) * static_cast<size_t>(p.float_data_size()) +
         sizeof(int32_t) * static_cast<size_t>(p.int32_data_size()) +
         sizeof(int64_t) * static_cast<size_t>(p.int64_data_size()) +
         sizeof(double) * static_cast<size_t>(p.double_data_size()) +
         sizeof(uint64_t) * static_cast<size_t>(p.uint64_data_size());
}

void drop_onnx_payload(TensorProto* p) {
  // Swapping with empty containers releases the memory; clear() would keep the capacity.
  if (p->has_raw_data()) {
    std::string().swap(*p->mutable_raw_data());
    p->clear_raw_data();
  }
  google::protobuf::RepeatedField<float>().Swap(p->mutable_float_data());
  google::protobuf::RepeatedField<int32_t>().Swap(p->mutable_int32_data());
  google::protobuf::RepeatedField<int64_t>().Swap(p->mutable_int64_data());
  google::protobuf::RepeatedField<double>().Swap(p->mutable_double_data());
  google::protobuf::RepeatedField<uint64_t>().Swap(p->mutable_uint64_data());
  google::protobuf::RepeatedPtrField<std::string>().Swap(p->mutable_string_data());
}

}  // namespace streamline::graph
