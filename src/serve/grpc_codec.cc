#include "serve/grpc_codec.h"

#include <grpcpp/impl/codegen/proto_utils.h>

#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "core/layout_convert.h"
#include "serve/bytes_wire.h"
#include "serve/echo.h"
#include "serve/priority.h"

namespace streamline::serve {
namespace {

namespace pb = ::inference;
using google::protobuf::RepeatedField;

// Shapes of more dims than this are refused (as over HTTP).
constexpr size_t kMaxRank = 32;

// A client's shape in a message: the first dims only.
std::string shape_text(const std::vector<int64_t>& dims) {
  return dims_text(dims);
}

// Element count of `dims`; InvalidArgument for a negative dimension or an overflowing product.
Result<int64_t> element_count(const std::vector<int64_t>& dims, const std::string& where) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return invalid_argument(where + "shape " + shape_text(dims) + " has a negative dimension");
    if (__builtin_mul_overflow(n, d, &n))
      return invalid_argument(where + "shape " + shape_text(dims) + " has too many elements");
  }
  return n;
}

// Copies typed contents into `t`, converting each element to the tensor's C++ type.
template <typename Dst, typename Src>
void copy_elements(const RepeatedField<Src>& src, Tensor& t) {
  Dst* dst = t.data<Dst>();
  for (int i = 0; i < src.size(); ++i) dst[i] = static_cast<Dst>(src.Get(i));
}

// The typed contents field a datatype travels in, and how many elements it holds.
struct TypedField {
  const char* name = nullptr;  // nullptr: the datatype has no typed field
  int size = 0;
};

TypedField typed_field(const pb::InferTensorContents& c, DType t) {
  switch (t) {
    case DType::kFloat32:
      return {"fp32_contents", c.fp32_contents_size()};
    case DType::kFloat64:
      return {"fp64_contents", c.fp64_contents_size()};
    case DType::kInt64:
      return {"int64_contents", c.int64_contents_size()};
    case DType::kInt32:
    case DType::kInt16:
    case DType::kInt8:
      return {"int_contents", c.int_contents_size()};
    case DType::kUInt32:
    case DType::kUInt16:
    case DType::kUInt8:
      return {"uint_contents", c.uint_contents_size()};
    case DType::kUInt64:
      return {"uint64_contents", c.uint64_contents_size()};
    case DType::kBool:
      return {"bool_contents", c.bool_contents_size()};
    default:
      return {};
  }
}

void copy_typed(const pb::InferTensorContents& c, Tensor& t) {
  switch (t.dtype()) {
    case DType::kFloat32:
      copy_elements<float>(c.fp32_contents(), t);
      break;
    case DType::kFloat64:
      copy_elements<double>(c.fp64_contents(), t);
      break;
    case DType::kInt64:
      copy_elements<int64_t>(c.int64_contents(), t);
      break;
    case DType::kInt32:
      copy_elements<int32_t>(c.int_contents(), t);
      break;
    case DType::kInt16:
      copy_elements<int16_t>(c.int_contents(), t);
      break;
    case DType::kInt8:
      copy_elements<int8_t>(c.int_contents(), t);
      break;
    case DType::kUInt32:
      copy_elements<uint32_t>(c.uint_contents(), t);
      break;
    case DType::kUInt16:
      copy_elements<uint16_t>(c.uint_contents(), t);
      break;
    case DType::kUInt8:
      copy_elements<uint8_t>(c.uint_contents(), t);
      break;
    case DType::kUInt64:
      copy_elements<uint64_t>(c.uint64_contents(), t);
      break;
    case DType::kBool:
      copy_elements<bool>(c.bool_contents(), t);
      break;
    default:
      break;
  }
}

bool has_any_contents(const pb::InferTensorContents& c) {
  return c.bool_contents_size() || c.int_contents_size() || c.int64_contents_size() || c.uint_contents_size() ||
         c.uint64_contents_size() || c.fp32_contents_size() || c.fp64_contents_size() || c.bytes_contents_size();
}

Result<int64_t> integer_parameter(const pb::InferParameter& p, const std::string& key) {
  switch (p.parameter_choice_case()) {
    case pb::InferParameter::kInt64Param:
      return p.int64_param();
    case pb::InferParameter::kUint64Param:
      if (p.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return invalid_argument("parameter '" + echo(key) + "' is out of range");
      return static_cast<int64_t>(p.uint64_param());
    default:
      return invalid_argument("parameter '" + echo(key) + "' must be an integer (int64_param or uint64_param)");
  }
}

// A BYTES input: length-prefixed elements in raw_input_contents, or one bytes_contents entry each.
Status decode_bytes(const pb::ModelInferRequest::InferInputTensor& in, const std::string* raw, int64_t n,
                    const std::string& where, const std::string& type_text, Tensor* out) {
  const std::vector<int64_t> dims(in.shape().begin(), in.shape().end());
  const size_t given = raw ? raw->size() : 0;
  if (raw && has_any_contents(in.contents()))
    return invalid_argument(where + "has both typed contents and raw_input_contents");
  if (!raw && in.contents().bytes_contents_size() != n)
    return invalid_argument(where + std::to_string(in.contents().bytes_contents_size()) +
                            " elements in bytes_contents, expected " + std::to_string(n) + " for " + type_text);
  // Every raw element takes at least its 4-byte length: a count the bytes cannot hold is refused
  // before anything is allocated.
  if (raw && static_cast<uint64_t>(n) > given / 4)
    return invalid_argument(where + std::to_string(given) + " bytes of raw_input_contents cannot hold " +
                            std::to_string(n) + " elements for " + type_text);
  *out = Tensor::empty(DType::kString, Shape(dims));
  if (out->raw() == nullptr) return resource_exhausted(where + "cannot allocate its tensor");
  if (raw) {
    Status s = unpack_bytes(*raw, out);
    return s.ok() ? s : Status(s.code(), where + s.message());
  }
  for (int64_t i = 0; i < n; ++i) out->strings()[i] = in.contents().bytes_contents(static_cast<int>(i));
  return ok_status();
}

Status decode_input(const pb::ModelInferRequest::InferInputTensor& in, const std::string* raw, Tensor* out) {
  const std::string where = "input '" + echo(in.name()) + "': ";
  if (static_cast<size_t>(in.shape_size()) > kMaxRank)
    return invalid_argument(where + "rank " + std::to_string(in.shape_size()) + " is above " +
                            std::to_string(kMaxRank));
  const DType dtype = dtype_from_kserve(in.datatype());
  if (dtype == DType::kUndefined || (dtype_size(dtype) == 0 && dtype != DType::kString))
    return invalid_argument(where + "datatype '" + echo(in.datatype()) + "' is not supported");
  const std::vector<int64_t> dims(in.shape().begin(), in.shape().end());
  SL_ASSIGN_OR_RETURN(const int64_t n, element_count(dims, where));
  const std::string type_text = echo(in.datatype()) + shape_text(dims);
  if (dtype == DType::kString) return decode_bytes(in, raw, n, where, type_text, out);
  if (raw) {
    if (has_any_contents(in.contents()))
      return invalid_argument(where + "has both typed contents and raw_input_contents");
    const size_t elem = dtype_size(dtype);
    if (static_cast<uint64_t>(n) > std::numeric_limits<size_t>::max() / elem ||
        raw->size() != static_cast<size_t>(n) * elem)
      return invalid_argument(where + std::to_string(raw->size()) + " bytes of raw_input_contents, expected " +
                              std::to_string(static_cast<uint64_t>(n) * elem) + " for " + type_text);
    *out = Tensor::empty(dtype, Shape(dims));
    if (out->raw() == nullptr && n > 0) return resource_exhausted(where + "cannot allocate its tensor");
    if (!raw->empty()) std::memcpy(out->raw(), raw->data(), raw->size());
    return ok_status();
  }
  const TypedField field = typed_field(in.contents(), dtype);
  if (!field.name)
    return invalid_argument(where + "datatype " + echo(in.datatype()) +
                            " has no typed contents; send raw_input_contents");
  if (field.size != n)
    return invalid_argument(where + std::to_string(field.size) + " elements in " + field.name + ", expected " +
                            std::to_string(n) + " for " + type_text);
  *out = Tensor::empty(dtype, Shape(dims));
  if (out->raw() == nullptr && n > 0) return resource_exhausted(where + "cannot allocate its tensor");
  copy_typed(in.contents(), *out);
  return ok_status();
}

void set_duration(const StatisticDuration& d, pb::StatisticDuration* out) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

// The shared memory parameters of an input or output; nullopt when they name no region.
Result<std::optional<ShmRef>> shm_ref(const google::protobuf::Map<std::string, pb::InferParameter>& params,
                                      const std::string& what) {
  auto region = params.find("shared_memory_region");
  if (region == params.end()) return std::optional<ShmRef>();
  if (region->second.parameter_choice_case() != pb::InferParameter::kStringParam ||
      region->second.string_param().empty())
    return invalid_argument(what + "shared_memory_region must be a region name (string_param)");
  ShmRef r;
  r.region = region->second.string_param();
  auto size = params.find("shared_memory_byte_size");
  if (size == params.end()) return invalid_argument(what + "shared_memory_byte_size is missing");
  SL_ASSIGN_OR_RETURN(int64_t n, integer_parameter(size->second, "shared_memory_byte_size"));
  if (n < 0) return invalid_argument(what + "shared_memory_byte_size must be >= 0");
  r.byte_size = static_cast<uint64_t>(n);
  if (auto off = params.find("shared_memory_offset"); off != params.end()) {
    SL_ASSIGN_OR_RETURN(int64_t o, integer_parameter(off->second, "shared_memory_offset"));
    if (o < 0) return invalid_argument(what + "shared_memory_offset must be >= 0");
    r.offset = static_cast<uint64_t>(o);
  }
  return std::optional<ShmRef>(std::move(r));
}

}  // namespace

Status parse_message(const grpc::ByteBuffer& bytes, google::protobuf::Message* out) {
  grpc::ByteBuffer copy(bytes);  // shares the slices; Deserialize consumes its buffer
  if (!grpc::SerializationTraits<google::protobuf::Message>::Deserialize(&copy, out).ok())
    return invalid_argument("the request is not a valid " + out->GetDescriptor()->full_name() + " message (" +
                            std::to_string(bytes.Length()) + " bytes)");
  return ok_status();
}

Status decode_infer_request(const pb::ModelInferRequest& in, InferRequest* out, std::vector<ShmInput>* shm_inputs,
                            std::map<std::string, ShmRef>* shm_outputs, std::map<std::string, int64_t>* class_counts) {
  // Pass 1: which inputs are in shared memory (raw_input_contents lists only the others).
  std::vector<std::optional<ShmRef>> refs;
  int with_data = 0;
  for (const auto& input : in.inputs()) {
    SL_ASSIGN_OR_RETURN(std::optional<ShmRef> r, shm_ref(input.parameters(), "input '" + echo(input.name()) + "': "));
    if (r && !shm_inputs)
      return invalid_argument("input '" + echo(input.name()) + "': shared memory is not available here");
    with_data += r ? 0 : 1;
    refs.push_back(std::move(r));
  }
  const int raw_count = in.raw_input_contents_size();
  if (raw_count > 0 && raw_count != with_data)
    return invalid_argument("raw_input_contents has " + std::to_string(raw_count) + " entries for " +
                            std::to_string(with_data) + " inputs");
  int raw_index = 0;
  std::set<std::string> names;
  for (int i = 0; i < in.inputs_size(); ++i) {
    const auto& input = in.inputs(i);
    if (!names.insert(input.name()).second)
      return invalid_argument("input '" + echo(input.name()) + "' is given twice");
    if (refs[static_cast<size_t>(i)]) {
      const DType dtype = dtype_from_kserve(input.datatype());
      if (dtype == DType::kUndefined || (dtype_size(dtype) == 0 && dtype != DType::kString))
        return invalid_argument("input '" + echo(input.name()) + "': datatype '" + echo(input.datatype()) +
                                "' is not supported");
      if (static_cast<size_t>(input.shape_size()) > kMaxRank)
        return invalid_argument("input '" + echo(input.name()) + "': rank above " + std::to_string(kMaxRank));
      shm_inputs->push_back({input.name(), dtype, std::vector<int64_t>(input.shape().begin(), input.shape().end()),
                             std::move(*refs[static_cast<size_t>(i)])});
      continue;
    }
    Tensor t;
    SL_RETURN_IF_ERROR(decode_input(input, raw_count > 0 ? &in.raw_input_contents(raw_index++) : nullptr, &t));
    out->inputs.emplace(input.name(), std::move(t));
  }
  std::set<std::string> seen;
  for (const auto& o : in.outputs()) {
    if (!seen.insert(o.name()).second) return invalid_argument("output '" + echo(o.name()) + "' is requested twice");
    out->requested_outputs.push_back(o.name());
    SL_ASSIGN_OR_RETURN(std::optional<ShmRef> r, shm_ref(o.parameters(), "output '" + echo(o.name()) + "': "));
    if (r) {
      if (!shm_outputs) return invalid_argument("output '" + echo(o.name()) + "': shared memory is not available here");
      shm_outputs->emplace(o.name(), std::move(*r));
    }
    if (auto k = o.parameters().find("classification"); k != o.parameters().end()) {
      SL_ASSIGN_OR_RETURN(int64_t n, integer_parameter(k->second, "classification"));
      if (n < 1) return invalid_argument("output '" + echo(o.name()) + "': classification must be >= 1");
      if (!class_counts)
        return invalid_argument("output '" + echo(o.name()) + "': classification is not available here");
      (*class_counts)[o.name()] = n;
    }
  }
  for (const auto& [key, value] : in.parameters()) {
    if (key == "priority") {
      // Triton's priorities are uint64 (0 = the default, 1 = highest); one past the model's levels
      // runs at the lowest, as over HTTP.
      const bool huge = value.parameter_choice_case() == pb::InferParameter::kUint64Param &&
                        value.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      SL_ASSIGN_OR_RETURN(const int64_t p,
                          huge ? Result<int64_t>(std::numeric_limits<int64_t>::max()) : integer_parameter(value, key));
      if (p < 0) return invalid_argument("parameter 'priority' must be >= 0, got " + std::to_string(p));
      out->priority = priority_from_wire(static_cast<uint64_t>(p));
    } else if (key == "timeout") {
      SL_ASSIGN_OR_RETURN(const int64_t us, integer_parameter(value, key));
      if (us < 0) return invalid_argument("parameter 'timeout' must be >= 0 microseconds");
      out->timeout_us = us;
    }
    // Other parameters (sequence ids, binary_data_output, ...) do not apply to gRPC here; ignored.
  }
  return ok_status();
}

Status encode_infer_response(const InferResponse& r, const std::vector<std::string>& order, pb::ModelInferResponse* out,
                             const std::map<std::string, ShmRef>* shm_outputs,
                             const std::map<std::string, ClassifiedOutput>* classified) {
  auto append = [&](const std::string& name, const Tensor& t) -> Status {
    if (classified) {
      if (auto it = classified->find(name); it != classified->end()) {
        auto* o = out->add_outputs();
        o->set_name(name);
        o->set_datatype("BYTES");
        for (int64_t d : it->second.shape) o->add_shape(d);
        out->add_raw_output_contents(serialize_bytes(it->second.values));
        return ok_status();
      }
    }
    if (shm_outputs) {
      if (auto it = shm_outputs->find(name); it != shm_outputs->end()) {
        auto* o = out->add_outputs();
        o->set_name(name);
        o->set_datatype(dtype_to_kserve(t.dtype()));
        for (int64_t d : t.shape().dims()) o->add_shape(d);
        (*o->mutable_parameters())["shared_memory_region"].set_string_param(it->second.region);
        (*o->mutable_parameters())["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(wire_bytes(t)));
        if (it->second.offset > 0)
          (*o->mutable_parameters())["shared_memory_offset"].set_int64_param(static_cast<int64_t>(it->second.offset));
        out->add_raw_output_contents();  // keeps raw_output_contents in step with outputs
        return ok_status();
      }
    }
    const char* datatype = dtype_to_kserve(t.dtype());
    if (!datatype || !*datatype)
      return internal_error("output '" + name + "' has dtype " + dtype_name(t.dtype()) + ", which KServe cannot name");
    Tensor plain = t;
    if (t.layout() != Layout::kPlain) {
      SL_ASSIGN_OR_RETURN(plain, to_layout(t, Layout::kPlain));
    }
    auto* o = out->add_outputs();
    o->set_name(name);
    o->set_datatype(datatype);
    for (int64_t d : plain.shape().dims()) o->add_shape(d);
    std::string* raw = out->add_raw_output_contents();
    raw->clear();
    append_wire(plain, raw);  // BYTES: length-prefixed elements, as Triton sends them
    return ok_status();
  };
  std::set<std::string> done;
  for (const auto& name : order) {
    auto it = r.outputs.find(name);
    if (it == r.outputs.end() || !done.insert(name).second) continue;
    SL_RETURN_IF_ERROR(append(name, it->second));
  }
  for (const auto& [name, t] : r.outputs)
    if (!done.count(name)) SL_RETURN_IF_ERROR(append(name, t));
  return ok_status();
}

void fill_model_config(const ModelConfig& c, pb::ModelConfig* out) {
  out->set_name(c.name);
  out->set_platform(c.platform);
  out->set_backend(c.backend);
  out->set_max_batch_size(c.max_batch_size);
  auto data_type = [](DType t) {
    pb::DataType v = pb::TYPE_INVALID;
    const char* name = dtype_to_config(t);
    if (name && !pb::DataType_Parse(name, &v)) v = pb::TYPE_INVALID;
    return v;
  };
  for (const auto& t : c.inputs) {
    auto* i = out->add_input();
    i->set_name(t.name);
    i->set_data_type(data_type(t.dtype));
    for (int64_t d : t.dims) i->add_dims(d);
  }
  for (const auto& t : c.outputs) {
    auto* o = out->add_output();
    o->set_name(t.name);
    o->set_data_type(data_type(t.dtype));
    for (int64_t d : t.dims) o->add_dims(d);
    o->set_label_filename(t.label_filename);
  }
  auto* vp = out->mutable_version_policy();
  if (c.version_policy == VersionPolicyKind::kAll)
    vp->mutable_all();
  else if (c.version_policy == VersionPolicyKind::kSpecific)
    for (int64_t v : c.specific_versions) vp->mutable_specific()->add_versions(v);
  else
    vp->mutable_latest()->set_num_versions(static_cast<uint32_t>(c.latest_versions));
  out->mutable_model_transaction_policy()->set_decoupled(c.decoupled);
  auto* group = out->add_instance_group();
  group->set_name(c.name);
  group->set_count(c.instance_count);
  pb::ModelInstanceGroup::Kind kind = pb::ModelInstanceGroup::KIND_CPU;
  if (!pb::ModelInstanceGroup::Kind_Parse(c.instance_kind, &kind)) kind = pb::ModelInstanceGroup::KIND_CPU;
  group->set_kind(kind);
  if (c.dynamic_batching) {
    const BatchPolicy& b = c.batching;
    auto* db = out->mutable_dynamic_batching();
    for (int s : b.preferred_batch_sizes) db->add_preferred_batch_size(s);
    db->set_max_queue_delay_microseconds(static_cast<uint64_t>(std::max<int64_t>(0, b.max_queue_delay_us)));
    db->set_preserve_ordering(b.preserve_ordering);
    // Triton counts priority levels from 1 and writes 0 when priorities are off.
    if (b.priority_levels > 1) {
      db->set_priority_levels(static_cast<uint64_t>(b.priority_levels));
      db->set_default_priority_level(priority_to_wire(b.default_priority));
    }
    auto* q = db->mutable_default_queue_policy();
    q->set_timeout_action(b.queue.timeout_action == TimeoutAction::kDelay ? pb::ModelQueuePolicy::DELAY
                                                                          : pb::ModelQueuePolicy::REJECT);
    q->set_default_timeout_microseconds(static_cast<uint64_t>(std::max<int64_t>(0, b.queue.default_timeout_us)));
    q->set_allow_timeout_override(b.queue.allow_timeout_override);
    q->set_max_queue_size(static_cast<uint32_t>(std::max(0, b.queue.max_queue_size)));
  }
  for (const auto& [key, value] : c.parameters) (*out->mutable_parameters())[key].set_string_value(value);
}

void fill_statistics(const std::vector<ModelStatistics>& stats, pb::ModelStatisticsResponse* out) {
  for (const ModelStatistics& m : stats) {
    auto* s = out->add_model_stats();
    s->set_name(valid_utf8(m.name));
    s->set_version(valid_utf8(m.version));
    s->set_last_inference(m.last_inference);
    s->set_inference_count(m.inference_count);
    s->set_execution_count(m.execution_count);
    const InferStatistics& is = m.inference_stats;
    auto* st = s->mutable_inference_stats();
    set_duration(is.success, st->mutable_success());
    set_duration(is.fail, st->mutable_fail());
    set_duration(is.queue, st->mutable_queue());
    set_duration(is.compute_input, st->mutable_compute_input());
    set_duration(is.compute_infer, st->mutable_compute_infer());
    set_duration(is.compute_output, st->mutable_compute_output());
    set_duration(is.cache_hit, st->mutable_cache_hit());
    set_duration(is.cache_miss, st->mutable_cache_miss());
    for (const BatchStatistics& b : m.batch_stats) {
      auto* e = s->add_batch_stats();
      e->set_batch_size(static_cast<uint64_t>(b.batch_size));
      set_duration(b.compute_input, e->mutable_compute_input());
      set_duration(b.compute_infer, e->mutable_compute_infer());
      set_duration(b.compute_output, e->mutable_compute_output());
    }
  }
}

}  // namespace streamline::serve
