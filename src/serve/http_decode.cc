// decode_infer_request: a KServe v2 JSON inference request decoded in one streaming pass.
//
// RapidJSON's SAX reader walks the document once. The numbers of each input's "data" go straight
// into that input's tensor (DataSink), so decoding needs the body, the tensors and little else; a
// DOM of a large body costs many times the body. Everything else (id, parameters, outputs and each
// input's name, datatype, shape and parameters) is small and is built into a skeleton document,
// which the checks below read as before. When "data" comes before the datatype and shape it
// belongs to, its text range is kept and decoded once the input object is complete.

#include <rapidjson/document.h>
#include <rapidjson/encodedstream.h>
#include <rapidjson/error/en.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <cstring>
#include <set>
#include <type_traits>

#include "serve/bytes_wire.h"
#include "serve/echo.h"
#include "serve/http_codec.h"
#include "serve/json_data_sink.h"
#include "serve/model_config.h"
#include "serve/priority.h"

namespace streamline::serve {
namespace {

using rapidjson::Value;
using Stream = rapidjson::EncodedInputStream<rapidjson::UTF8<>, rapidjson::MemoryStream>;

// Iterative parsing keeps deep nesting off the call stack; invalid UTF-8 is refused; numbers come
// as text and are converted exactly by JsonNumber::from_text (RapidJSON's own conversion misreads
// some). Trailing bytes after the document are an error (kParseStopWhenDoneFlag is off, and
// read_request checks that a NUL byte did not end the input early).
constexpr unsigned kParseFlags =
    rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag | rapidjson::kParseNumbersAsStringsFlag;
constexpr size_t kMaxRank = 32;
constexpr int64_t kMaxElements = int64_t{1} << 40;
// Values of the skeleton (everything but input data) beyond which a request is refused.
constexpr size_t kMaxSkeletonValues = size_t{1} << 20;

std::string str(const Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

const Value* member(const Value& obj, const char* key) {
  auto it = obj.FindMember(key);
  return it == obj.MemberEnd() ? nullptr : &it->value;
}

// A non-negative integer that fits int64.
bool as_count(const Value& v, int64_t* out) {
  if (!v.IsInt64() || v.GetInt64() < 0) return false;
  *out = v.GetInt64();
  return true;
}

Status malformed(const rapidjson::Reader& reader) {
  return invalid_argument("malformed JSON at byte " + std::to_string(reader.GetErrorOffset()) + ": " +
                          rapidjson::GetParseError_En(reader.GetParseErrorCode()));
}

Status trailing_bytes(size_t offset) {
  return invalid_argument("malformed JSON at byte " + std::to_string(offset) + ": " +
                          rapidjson::GetParseError_En(rapidjson::kParseErrorDocumentRootNotSingular));
}

// The dtype and dims an input object declares, as far as they were seen before its "data".
struct Declared {
  bool have_datatype = false, have_shape = false, shape_ok = true, has_parameters = false;
  std::string name, datatype;
  std::vector<int64_t> dims;
};

// The element count of `dims`, or -1 when a dim is negative or the product passes kMaxElements.
int64_t checked_numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d != 0 && n > kMaxElements / d)) return -1;
    n *= d;
  }
  return n;
}

// A tensor for an input, or ResourceExhausted when the memory cannot be had.
// The datatypes requests can carry: the fixed-size ones and BYTES (string tensors).
bool carried(DType dtype) {
  return dtype == DType::kString || (dtype_supported(dtype) && dtype_size(dtype) > 0);
}

Status allocate(DType dtype, const std::vector<int64_t>& dims, Tensor* t) {
  *t = Tensor::empty(dtype, Shape(dims));
  if (t->raw() == nullptr && checked_numel(dims) > 0)
    return resource_exhausted("cannot allocate " + std::to_string(checked_numel(dims) * dtype_size(dtype)) +
                              " bytes for its tensor");
  return ok_status();
}

// What became of one input's "data" value while the document was read.
struct InputData {
  bool streamed = false;  // decoded into `tensor` during the pass (status says how that went)
  Status status;          // what was wrong with the data, reported when the input is checked
  Tensor tensor;
  std::string_view text;  // not streamed: the value's text, decoded after the pass
};

// Sends the events of a deferred "data" value to a DataSink.
struct SinkHandler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, SinkHandler> {
  explicit SinkHandler(DataSink& s) : sink(s) {}
  bool Null() { return sink.scalar(JsonNumber::other()); }
  bool Bool(bool b) { return sink.scalar(JsonNumber::boolean(b)); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool) {
    return sink.scalar(JsonNumber::from_text(std::string_view(s, n)));
  }
  bool String(const char* s, rapidjson::SizeType n, bool) { return sink.scalar(JsonNumber::text({s, n})); }
  bool StartObject() { return sink.start_object(); }
  bool Key(const char*, rapidjson::SizeType, bool) { return true; }  // inside an object: not counted
  bool EndObject(rapidjson::SizeType) { return sink.end_object(); }
  bool StartArray() { return sink.start_array(); }
  bool EndArray(rapidjson::SizeType) { return sink.end_array(); }
  DataSink& sink;
};

// The SAX handler of the whole request: forwards the skeleton to `doc`, streams input data into
// tensors, skips members nobody reads.
class RequestHandler : public rapidjson::BaseReaderHandler<rapidjson::UTF8<>, RequestHandler> {
 public:
  RequestHandler(rapidjson::Document& doc, Stream& is, size_t text_size) : doc_(doc), is_(is), text_size_(text_size) {}

  // Set when the handler stopped the parse; the reader's error otherwise.
  const Status& status() const { return status_; }
  std::vector<InputData>& inputs_data() { return inputs_data_; }
  void set_text(std::string_view text) { text_ = text; }

  bool Null() {
    return scalar(JsonNumber::other(), [&] { return doc_.Null(); });
  }
  bool Bool(bool b) {
    return scalar(JsonNumber::boolean(b), [&] { return doc_.Bool(b); });
  }
  bool RawNumber(const char* s, rapidjson::SizeType size, bool) {
    const JsonNumber n = JsonNumber::from_text(std::string_view(s, size));
    return scalar(n, [&] {
      if (n.kind == JsonNumber::kSigned) return doc_.Int64(n.i);
      if (n.kind == JsonNumber::kUnsigned) return doc_.Uint64(n.u);
      return doc_.Double(n.d);
    });
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    const std::string_view text(s, n);
    return scalar(
        JsonNumber::text(text), [&] { return doc_.String(s, n, copy); }, &text);
  }

  bool StartObject() { return open(true); }
  bool StartArray() { return open(false); }
  bool EndObject(rapidjson::SizeType) { return close(true); }
  bool EndArray(rapidjson::SizeType) { return close(false); }
  bool Key(const char* s, rapidjson::SizeType n, bool copy);

 private:
  enum class Role { kOther, kRoot, kInputs, kInput, kShape };
  enum class Capture { kNone, kName, kDatatype, kShape };
  struct Frame {
    Role role;
    bool object;
    rapidjson::SizeType forwarded = 0;  // members or elements given to doc_
  };

  bool skipping() const { return skip_depth_ > 0 || pending_skip_; }
  bool fail(Status s) {
    status_ = std::move(s);
    return false;
  }
  bool count_value() {
    if (++skeleton_values_ > kMaxSkeletonValues)
      return fail(invalid_argument("the request holds more than " + std::to_string(kMaxSkeletonValues) +
                                   " values outside input data"));
    return true;
  }
  // The data does not fit: kept for decode_input (which names the input, after the checks that
  // come first), and the rest of the value is only walked through.
  bool data_error(Status s) {
    inputs_data_.back().status = std::move(s);
    sink_.reset();
    data_failed_ = true;
    return true;
  }

  // `text`: the characters of a string value (names and datatypes are captured from it).
  template <typename Forward>
  bool scalar(const JsonNumber& n, Forward forward, const std::string_view* text = nullptr);
  bool open(bool object);
  bool close(bool object);
  bool start_data();
  bool end_data(size_t end_offset);

  rapidjson::Document& doc_;
  Stream& is_;
  const size_t text_size_;
  std::string_view text_;
  Status status_;
  std::vector<Frame> frames_;
  size_t skeleton_values_ = 0;
  int skip_depth_ = 0;                // containers still open in a skipped value
  bool pending_skip_ = false;         // the next value is skipped (set by Key)
  Role pending_role_ = Role::kOther;  // the role of the next container
  Capture capture_ = Capture::kNone;  // what the next value of an input object declares
  // Root-level members already seen (the first one counts, as a DOM lookup finds it).
  std::set<std::string> root_seen_, input_seen_;
  bool inputs_taken_ = false;
  Declared declared_;  // of the input object being read
  std::vector<InputData> inputs_data_;
  // The "data" value being read: its sink (streaming) or none (kept as text), its open lists.
  std::optional<DataSink> sink_;
  bool data_ = false;
  bool data_failed_ = false;
  int data_depth_ = 0;
  size_t data_key_end_ = 0;
};

bool RequestHandler::Key(const char* s, rapidjson::SizeType n, bool copy) {
  if (data_ || skipping()) return true;  // a key in an object inside data (kept as text) or skipped
  const std::string key(s, n);
  Frame& f = frames_.back();
  capture_ = Capture::kNone;
  if (f.role == Role::kRoot) {
    const bool known = key == "id" || key == "parameters" || key == "outputs" || key == "inputs";
    if (!known || !root_seen_.insert(key).second) {
      pending_skip_ = true;
      return true;
    }
    if (key == "inputs") pending_role_ = Role::kInputs;
  } else if (f.role == Role::kInput) {
    const bool known = key == "name" || key == "datatype" || key == "shape" || key == "parameters" || key == "data";
    if (!known || !input_seen_.insert(key).second) {
      pending_skip_ = true;
      return true;
    }
    if (key == "data") {
      // The skeleton records that there is data; the value itself goes to the sink or is kept.
      if (!doc_.Key(s, n, copy) || !doc_.Null() || !count_value()) return false;
      f.forwarded += 1;
      data_ = true;
      data_failed_ = false;
      data_depth_ = 0;
      data_key_end_ = is_.Tell();  // just past the key's closing quote
      return start_data();
    }
    if (key == "name") capture_ = Capture::kName;
    if (key == "datatype") capture_ = Capture::kDatatype;
    if (key == "shape") capture_ = Capture::kShape;
    if (key == "parameters") declared_.has_parameters = true;
  }
  return doc_.Key(s, n, copy);
}

// Streams the data when the dtype and shape it belongs to are known and plausible; else keeps it.
bool RequestHandler::start_data() {
  sink_.reset();
  const Declared& d = declared_;
  if (!d.have_datatype || !d.have_shape || !d.shape_ok || d.has_parameters || d.dims.size() > kMaxRank) return true;
  const DType dtype = dtype_from_kserve(d.datatype);
  if (!carried(dtype)) return true;
  const int64_t numel = checked_numel(d.dims);
  if (numel < 0) return true;
  InputData& data = inputs_data_.back();
  data.streamed = true;
  // Each value takes at least two bytes of text ("0,"): a count the rest of the body cannot hold
  // is only counted, never allocated.
  const bool plausible = static_cast<uint64_t>(numel) <= (text_size_ - std::min(text_size_, is_.Tell())) / 2 + 1;
  if (plausible) {
    Status s = allocate(dtype, d.dims, &data.tensor);
    if (!s.ok()) return data_error(std::move(s));
  }
  sink_.emplace(plausible ? &data.tensor : nullptr, dtype, d.dims);
  return true;
}

bool RequestHandler::end_data(size_t end_offset) {
  data_ = false;
  InputData& data = inputs_data_.back();
  if (sink_) {
    data.status = sink_->finish();
    sink_.reset();
    return true;
  }
  if (data_failed_ || data.streamed) return true;
  data.text = text_.substr(data_key_end_, end_offset - data_key_end_);
  return true;
}

template <typename Forward>
bool RequestHandler::scalar(const JsonNumber& n, Forward forward, const std::string_view* text) {
  if (data_) {
    if (sink_ && !sink_->scalar(n)) data_error(invalid_argument(sink_->error()));
    return data_depth_ == 0 ? end_data(is_.Tell()) : true;  // just past the value
  }
  if (skip_depth_ > 0) return true;
  if (pending_skip_) {
    pending_skip_ = false;
    return true;
  }
  if (frames_.empty()) {  // the whole document is one scalar: a placeholder root; refused later
    return doc_.Null();
  }
  Frame& f = frames_.back();
  if (f.role == Role::kInputs) inputs_data_.emplace_back();  // keeps indices aligned with "inputs"
  if (f.role == Role::kInput && text && capture_ == Capture::kName) declared_.name.assign(*text);
  if (f.role == Role::kInput && text && capture_ == Capture::kDatatype) {
    declared_.datatype.assign(*text);
    declared_.have_datatype = true;
  }
  if (f.role == Role::kShape) {
    if (n.kind != JsonNumber::kSigned || n.i < 0)
      declared_.shape_ok = false;
    else
      declared_.dims.push_back(n.i);
  } else if (f.role == Role::kInput && capture_ == Capture::kShape) {
    declared_.have_shape = true;
    declared_.shape_ok = false;  // not an array
  }
  capture_ = Capture::kNone;
  pending_role_ = Role::kOther;
  f.forwarded += 1;
  return count_value() && forward();
}

bool RequestHandler::open(bool object) {
  if (data_) {
    ++data_depth_;
    if (!sink_) return true;
    const bool ok = object ? sink_->start_object() : sink_->start_array();
    return ok || data_error(invalid_argument(sink_->error()));
  }
  if (skip_depth_ > 0 || pending_skip_) {
    pending_skip_ = false;
    ++skip_depth_;
    return true;
  }
  if (frames_.empty()) {
    if (!object) {  // an array document: skipped and refused once it has been parsed
      skip_depth_ = 1;
      return doc_.Null();
    }
    frames_.push_back({Role::kRoot, true});
    return count_value() && doc_.StartObject();
  }
  Frame& parent = frames_.back();
  Role role = Role::kOther;
  if (parent.role == Role::kRoot && pending_role_ == Role::kInputs && !object && !inputs_taken_) {
    role = Role::kInputs;
    inputs_taken_ = true;
  } else if (parent.role == Role::kInputs && object) {
    role = Role::kInput;
    declared_ = Declared{};
    input_seen_.clear();
    inputs_data_.emplace_back();
  } else if (parent.role == Role::kInput && capture_ == Capture::kShape && !object) {
    role = Role::kShape;
    declared_.have_shape = true;
  } else if (parent.role == Role::kInput && capture_ == Capture::kShape) {
    declared_.have_shape = true;
    declared_.shape_ok = false;
  } else if (parent.role == Role::kShape) {
    declared_.shape_ok = false;  // a nested array in a shape
  }
  if (parent.role == Role::kInputs && !object) inputs_data_.emplace_back();  // keeps indices aligned
  capture_ = Capture::kNone;
  pending_role_ = Role::kOther;
  parent.forwarded += 1;
  frames_.push_back({role, object});
  if (!count_value()) return false;
  return object ? doc_.StartObject() : doc_.StartArray();
}

bool RequestHandler::close(bool object) {
  if (data_) {
    if (sink_ && !(object ? sink_->end_object() : sink_->end_array())) data_error(invalid_argument(sink_->error()));
    return --data_depth_ == 0 ? end_data(is_.Tell() + 1) : true;  // Tell() is at the closing bracket
  }
  if (skip_depth_ > 0) {
    --skip_depth_;
    return true;
  }
  const Frame f = frames_.back();
  frames_.pop_back();
  if (f.role == Role::kInput) {
    declared_ = Declared{};
    input_seen_.clear();
  }
  return object ? doc_.EndObject(f.forwarded) : doc_.EndArray(f.forwarded);
}

// Parses `text` once: the skeleton into `doc`, input data into `data`.
Status read_request(std::string_view text, rapidjson::Document* doc, std::vector<InputData>* data) {
  rapidjson::MemoryStream ms(text.data(), text.size());
  Stream is(ms);
  RequestHandler handler(*doc, is, text.size());
  handler.set_text(text);
  rapidjson::Reader reader;
  bool parsed = false;
  auto generate = [&](rapidjson::Document&) {
    parsed = !reader.Parse<kParseFlags>(is, handler).IsError();
    return parsed;
  };
  doc->Populate(generate);
  if (!handler.status().ok()) return handler.status();
  if (!parsed) return malformed(reader);
  // RapidJSON takes a NUL byte for the end of its input; what follows one is not a document.
  if (is.Tell() != text.size()) return trailing_bytes(is.Tell());
  *data = std::move(handler.inputs_data());
  return ok_status();
}

// Decodes a "data" value kept as text, now that its dtype and shape are known.
Status decode_deferred(std::string_view text, DType dtype, const std::vector<int64_t>& dims, int64_t numel, Tensor* t) {
  size_t start = text.find_first_not_of(" \t\r\n");
  start = text.find_first_not_of(" \t\r\n", start + 1);  // past the ':'
  text = text.substr(start);
  const bool plausible = static_cast<uint64_t>(numel) <= text.size() / 2 + 1;
  if (plausible) SL_RETURN_IF_ERROR(allocate(dtype, dims, t));
  DataSink sink(plausible ? t : nullptr, dtype, dims);
  SinkHandler h(sink);
  rapidjson::MemoryStream ms(text.data(), text.size());
  Stream is(ms);
  rapidjson::Reader reader;
  if (reader.Parse<kParseFlags>(is, h).IsError() && sink.error().empty())
    return internal_error("a data value parsed twice failed the second time: " + malformed(reader).message());
  if (!sink.error().empty()) return invalid_argument(sink.error());
  return sink.finish();
}

// parameters.shared_memory_region, _offset and _byte_size of an input or output; nullopt when
// the parameters name no region.
Result<std::optional<ShmRef>> shm_ref(const Value& params, const std::string& what) {
  const Value* region = member(params, "shared_memory_region");
  if (!region) return std::optional<ShmRef>();
  if (!region->IsString() || region->GetStringLength() == 0)
    return invalid_argument(what + ": shared_memory_region must be a region name");
  ShmRef r;
  r.region = str(*region);
  int64_t x = 0;
  const Value* size = member(params, "shared_memory_byte_size");
  if (!size || !as_count(*size, &x))
    return invalid_argument(what + ": shared_memory_byte_size must be a non-negative integer");
  r.byte_size = static_cast<uint64_t>(x);
  if (const Value* off = member(params, "shared_memory_offset")) {
    if (!as_count(*off, &x)) return invalid_argument(what + ": shared_memory_offset must be a non-negative integer");
    r.offset = static_cast<uint64_t>(x);
  }
  return std::optional<ShmRef>(std::move(r));
}

// One entry of "inputs". Binary inputs consume `binary` from `*offset` on; shared memory inputs
// are listed in `shm` (read later from their region).
Status decode_input(const Value& v, size_t i, InputData& data, std::string_view binary, size_t* offset,
                    std::set<std::string>* seen, InferRequest* request, std::vector<ShmInput>* shm) {
  std::string what = "inputs[" + std::to_string(i) + "]";
  if (!v.IsObject()) return invalid_argument(what + " must be an object");
  const Value* name = member(v, "name");
  if (!name || !name->IsString() || name->GetStringLength() == 0)
    return invalid_argument(what + " needs a \"name\" string");
  what = "input '" + echo(str(*name)) + "'";
  if (!seen->insert(str(*name)).second) return invalid_argument(what + " is given twice");

  const Value* datatype = member(v, "datatype");
  if (!datatype || !datatype->IsString()) return invalid_argument(what + " needs a \"datatype\" string");
  const DType dtype = dtype_from_kserve(str(*datatype));
  if (!carried(dtype)) return invalid_argument(what + ": datatype '" + echo(str(*datatype)) + "' is not supported");

  const Value* shape_v = member(v, "shape");
  if (!shape_v || !shape_v->IsArray()) return invalid_argument(what + " needs a \"shape\" array");
  if (shape_v->Size() > kMaxRank) return invalid_argument(what + ": rank above " + std::to_string(kMaxRank));
  std::vector<int64_t> dims;
  int64_t numel = 1;
  for (const Value& d : shape_v->GetArray()) {
    int64_t x = 0;
    if (!as_count(d, &x)) return invalid_argument(what + ": shape dims must be non-negative integers");
    if (x != 0 && numel > kMaxElements / x) return invalid_argument(what + ": shape holds too many elements");
    numel *= x;
    dims.push_back(x);
  }
  const Shape shape(dims);
  const int64_t nbytes = numel * static_cast<int64_t>(dtype_size(dtype));

  int64_t binary_size = -1;
  if (const Value* params = member(v, "parameters")) {
    if (!params->IsObject()) return invalid_argument(what + ": \"parameters\" must be an object");
    SL_ASSIGN_OR_RETURN(std::optional<ShmRef> ref, shm_ref(*params, what));
    if (ref) {
      if (member(v, "data") || member(*params, "binary_data_size"))
        return invalid_argument(what + " has shared_memory_region and data of its own");
      shm->push_back({str(*name), dtype, dims, std::move(*ref)});
      return ok_status();
    }
    if (const Value* b = member(*params, "binary_data_size"))
      if (!as_count(*b, &binary_size))
        return invalid_argument(what + ": binary_data_size must be a non-negative integer");
  }
  const bool has_data = member(v, "data") != nullptr;
  Tensor t;
  if (binary_size >= 0) {
    if (has_data) return invalid_argument(what + " has both \"data\" and binary_data_size");
    if (binary_size != nbytes && dtype != DType::kString)
      return invalid_argument(what + ": binary_data_size " + std::to_string(binary_size) + " does not match " +
                              str(*datatype) + shape.to_string() + " (" + std::to_string(nbytes) + " bytes)");
    if (static_cast<uint64_t>(binary_size) > binary.size() - *offset)
      return invalid_argument(what + ": binary_data_size " + std::to_string(binary_size) +
                              " runs past the end of the body (" + std::to_string(binary.size() - *offset) +
                              " bytes left)");
    if (dtype == DType::kString) {
      // Each element a 4-byte little-endian length and its bytes; the count must fill the shape.
      // Every element takes at least 4 bytes, so the count is checked before allocating.
      if (numel > binary_size / 4)
        return invalid_argument(what + ": binary_data_size " + std::to_string(binary_size) + " cannot hold " +
                                std::to_string(numel) + " BYTES elements");
      Status s = allocate(dtype, dims, &t);
      if (!s.ok()) return Status(s.code(), what + ": " + s.message());
      s = unpack_bytes(binary.substr(*offset, static_cast<size_t>(binary_size)), &t);
      if (!s.ok()) return Status(s.code(), what + ": " + s.message());
    } else {
      Status s = allocate(dtype, dims, &t);
      if (!s.ok()) return Status(s.code(), what + ": " + s.message());
      if (nbytes > 0) std::memcpy(t.raw(), binary.data() + *offset, static_cast<size_t>(nbytes));
    }
    *offset += static_cast<size_t>(binary_size);
    if (dtype == DType::kBool) {  // keep bools 0/1 whatever bytes came
      auto* p = static_cast<uint8_t*>(t.raw());
      for (int64_t k = 0; k < numel; ++k) p[k] = p[k] != 0;
    }
  } else if (has_data) {
    if (data.streamed) {
      if (!data.status.ok()) return Status(data.status.code(), what + ": " + data.status.message());
      t = std::move(data.tensor);  // decoded with this dtype and shape during the pass
    } else {
      Status s = decode_deferred(data.text, dtype, dims, numel, &t);
      if (!s.ok()) return Status(s.code(), what + ": " + s.message());
    }
  } else {
    return invalid_argument(what + " has neither \"data\" nor parameters.binary_data_size");
  }
  request->inputs[str(*name)] = std::move(t);
  return ok_status();
}

Status decode_parameters(const Value& params, DecodedInfer* d) {
  if (!params.IsObject()) return invalid_argument("\"parameters\" must be an object");
  if (const Value* p = member(params, "priority")) {
    int64_t x = 0;
    if (!as_count(*p, &x)) return invalid_argument("parameters.priority must be a non-negative integer");
    d->request.priority = priority_from_wire(static_cast<uint64_t>(x));
  }
  if (const Value* p = member(params, "timeout")) {
    int64_t x = 0;
    if (!as_count(*p, &x)) return invalid_argument("parameters.timeout must be a non-negative integer (microseconds)");
    d->request.timeout_us = x;
  }
  if (const Value* p = member(params, "binary_data_output")) {
    if (!p->IsBool()) return invalid_argument("parameters.binary_data_output must be true or false");
    d->binary_default = p->GetBool();
  }
  return ok_status();
}

Status decode_outputs(const Value& outputs, DecodedInfer* d) {
  if (!outputs.IsArray()) return invalid_argument("\"outputs\" must be an array");
  std::set<std::string> seen;
  for (rapidjson::SizeType i = 0; i < outputs.Size(); ++i) {
    const Value& o = outputs[i];
    const std::string where = "outputs[" + std::to_string(i) + "]";
    if (!o.IsObject()) return invalid_argument(where + " must be an object");
    const Value* name = member(o, "name");
    if (!name || !name->IsString() || name->GetStringLength() == 0)
      return invalid_argument(where + " needs a \"name\" string");
    RequestedOutput r;
    r.name = str(*name);
    r.binary = d->binary_default;
    const std::string named = "output '" + echo(r.name) + "'";
    if (!seen.insert(r.name).second) return invalid_argument(named + " is requested twice");
    if (const Value* params = member(o, "parameters")) {
      if (!params->IsObject()) return invalid_argument(named + ": \"parameters\" must be an object");
      if (const Value* k = member(*params, "classification")) {
        if (!as_count(*k, &r.class_count) || r.class_count < 1)
          return invalid_argument(named + ": classification must be an integer >= 1");
      }
      SL_ASSIGN_OR_RETURN(r.shm, shm_ref(*params, named));
      if (const Value* b = member(*params, "binary_data")) {
        if (!b->IsBool()) return invalid_argument(named + ": binary_data must be true or false");
        r.binary = b->GetBool();
      }
    }
    d->request.requested_outputs.push_back(r.name);
    d->outputs.push_back(std::move(r));
  }
  return ok_status();
}

}  // namespace

Result<DecodedInfer> decode_infer_request(std::string_view body, std::optional<size_t> header_length) {
  const size_t hl = header_length.value_or(body.size());
  if (hl > body.size()) return invalid_argument("the JSON header is longer than the body");
  rapidjson::Document doc;
  std::vector<InputData> data;
  SL_RETURN_IF_ERROR(read_request(body.substr(0, hl), &doc, &data));
  if (!doc.IsObject()) return invalid_argument("the request must be a JSON object");

  DecodedInfer d;
  if (const Value* id = member(doc, "id")) {
    if (!id->IsString()) return invalid_argument("\"id\" must be a string");
    d.id = str(*id);
  }
  if (const Value* params = member(doc, "parameters")) SL_RETURN_IF_ERROR(decode_parameters(*params, &d));
  if (const Value* outputs = member(doc, "outputs")) SL_RETURN_IF_ERROR(decode_outputs(*outputs, &d));

  const Value* inputs = member(doc, "inputs");
  if (!inputs || !inputs->IsArray() || inputs->Empty()) return invalid_argument("\"inputs\" must be a non-empty array");
  const std::string_view binary = body.substr(hl);
  size_t offset = 0;
  std::set<std::string> seen;
  data.resize(inputs->Size());
  for (rapidjson::SizeType i = 0; i < inputs->Size(); ++i)
    SL_RETURN_IF_ERROR(decode_input((*inputs)[i], i, data[i], binary, &offset, &seen, &d.request, &d.shm_inputs));
  if (offset != binary.size())
    return invalid_argument("the body holds " + std::to_string(binary.size()) +
                            " bytes after the JSON header but the inputs' binary_data_size add up to " +
                            std::to_string(offset));
  return d;
}

}  // namespace streamline::serve
