// config.pbtxt: protobuf text format into our proto (model_config.proto), then checked and turned
// into ModelConfig (model_config_use.cc completes it against a model and writes it back).

#include "serve/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <type_traits>

#include "core/logging.h"
#include "model_config.pb.h"
#include "runtime/device.h"
#include "runtime/instance_pool.h"
#include "serve/config_params.h"
#include "serve/generate.h"
#include "serve/priority.h"

namespace streamline::serve {
namespace {

namespace pb = google::protobuf;
namespace pc = streamline::serve::config;
using Tree = pb::TextFormat::ParseInfoTree;

struct TypeNames {
  DType dtype;
  const char* kserve;
  const char* config;
  pc::DataType proto;
};

constexpr TypeNames kTypes[] = {
    {DType::kBool, "BOOL", "TYPE_BOOL", pc::TYPE_BOOL},
    {DType::kUInt8, "UINT8", "TYPE_UINT8", pc::TYPE_UINT8},
    {DType::kUInt16, "UINT16", "TYPE_UINT16", pc::TYPE_UINT16},
    {DType::kUInt32, "UINT32", "TYPE_UINT32", pc::TYPE_UINT32},
    {DType::kUInt64, "UINT64", "TYPE_UINT64", pc::TYPE_UINT64},
    {DType::kInt8, "INT8", "TYPE_INT8", pc::TYPE_INT8},
    {DType::kInt16, "INT16", "TYPE_INT16", pc::TYPE_INT16},
    {DType::kInt32, "INT32", "TYPE_INT32", pc::TYPE_INT32},
    {DType::kInt64, "INT64", "TYPE_INT64", pc::TYPE_INT64},
    {DType::kFloat16, "FP16", "TYPE_FP16", pc::TYPE_FP16},
    {DType::kFloat32, "FP32", "TYPE_FP32", pc::TYPE_FP32},
    {DType::kFloat64, "FP64", "TYPE_FP64", pc::TYPE_FP64},
    {DType::kString, "BYTES", "TYPE_STRING", pc::TYPE_STRING},
    {DType::kBFloat16, "BF16", "TYPE_BF16", pc::TYPE_BF16},
};

DType dtype_from_proto(pc::DataType t) {
  for (const auto& n : kTypes)
    if (n.proto == t) return n.dtype;
  return DType::kUndefined;
}

// Unknown-field warnings logged per file; the rest are counted in one line.
constexpr int kMaxLoggedWarnings = 20;

// Keeps the first parse error as "where: line L col C: message"; warnings (unknown fields) go to
// the log, the first kMaxLoggedWarnings of them.
class Collector final : public pb::io::ErrorCollector {
 public:
  explicit Collector(const std::string& where) : where_(where) {}
  ~Collector() override {
    if (warnings_ > kMaxLoggedWarnings) {
      SL_LOG(kWarning) << where_ << ": " << warnings_ - kMaxLoggedWarnings << " more unknown fields (ignored)";
    }
  }
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty()) first_ = where_ + ": " + position(line, column) + message;
  }
  void AddWarning(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (++warnings_ > kMaxLoggedWarnings) return;
    SL_LOG(kWarning) << where_ << ": " << position(line, column) << message << " (ignored)";
  }
  const std::string& first() const { return first_; }

 private:
  static std::string position(int line, int column) {
    if (line < 0) return "";
    return "line " + std::to_string(line + 1) + " col " + std::to_string(column + 1) + ": ";
  }
  const std::string& where_;
  std::string first_;
  int warnings_ = 0;
};

// Error messages for values the parser accepted but we refuse, located in the text when the parse
// tree knows where the field was written.
class Checker {
 public:
  explicit Checker(const std::string& where) : where_(where) {}

  // "line L col C: " of `field` (index -1 for a singular field) under `tree`; "" when unknown.
  static std::string at(const Tree* tree, const pb::Descriptor* d, const char* field, int index) {
    const pb::FieldDescriptor* f = d->FindFieldByName(field);
    if (!tree || !f) return "";
    auto loc = tree->GetLocation(f, f->is_repeated() ? index : -1);
    // A list ("dims: [1, 2]") records one location, at its field name: use that for every item.
    for (int i = index - 1; loc.line < 0 && f->is_repeated() && i >= 0; --i) loc = tree->GetLocation(f, i);
    if (loc.line < 0) return "";
    return "line " + std::to_string(loc.line + 1) + " col " + std::to_string(loc.column + 1) + ": ";
  }
  static const Tree* nested(const Tree* tree, const pb::Descriptor* d, const char* field, int index) {
    const pb::FieldDescriptor* f = d->FindFieldByName(field);
    if (!tree || !f) return nullptr;
    return tree->GetTreeForNested(f, f->is_repeated() ? index : -1);
  }
  Status invalid(const Tree* tree, const pb::Descriptor* d, const char* field, int index,
                 const std::string& message) const {
    return invalid_argument(where_ + ": " + at(tree, d, field, index) + message);
  }
  Status unsupported_value(const Tree* tree, const pb::Descriptor* d, const char* field, int index,
                           const std::string& message) const {
    return unsupported(where_ + ": " + at(tree, d, field, index) + message);
  }
  const std::string& where() const { return where_; }

 private:
  const std::string& where_;
};

// The parameters streamline reads, each with its accepted range.
struct IntParam {
  const char* key;
  int64_t lo, hi;
};
constexpr IntParam kIntParams[] = {
    {"streams", 1, 64}, {"threads", 0, 1024}, {"threads_per_stream", 0, 1024}, {"split_convs", 0, 64}};
constexpr const char* kBoolParams[] = {"pin",      "warmup",    "elastic_threads", "cuda_graphs",
                                       "winograd", "admission", kControllerParam};

Status check_parameters(const std::map<std::string, std::string>& params, const std::string& where) {
  for (const auto& [key, value] : params) {
    const std::string at = where + ": parameters[\"" + key + "\"]: ";
    bool known = false;
    for (const auto& p : kIntParams) {
      if (key != p.key) continue;
      known = true;
      const auto v = parse_config_int(value);
      if (!v || *v < p.lo || *v > p.hi)
        return invalid_argument(at + "expected an integer in [" + std::to_string(p.lo) + ", " + std::to_string(p.hi) +
                                "], got '" + value + "'");
    }
    for (const char* b : kBoolParams) {
      if (key != b) continue;
      known = true;
      if (!parse_config_bool(value)) return invalid_argument(at + "expected true or false, got '" + value + "'");
    }
    if (key == kLatencySloParam || key == kControlWindowParam) {
      known = true;
      if (!parse_config_ms(value))
        return invalid_argument(at + "expected milliseconds above 0 and at most 3600000, got '" + value + "'");
    }
    if (key == "precision") {
      known = true;
      auto p = runtime::parse_precision(value);
      if (!p.ok()) return invalid_argument(at + p.status().message());
      if (*p != ops::Precision::kFp32 && !runtime::cuda_built())
        return invalid_argument(at + "'" + value + "' needs the CUDA backend; this build computes in fp32");
    }
    // Generation (serve/generate.h): checked together below.
    if (key == "generate" || key == "max_new_tokens" || key == "eos_token_id") known = true;
    if (!known) {
      SL_LOG(kInfo) << where << ": parameter '" << key << "' is not one streamline reads (ignored)";
    }
  }
  return check_generate_parameters(params, where);
}

template <typename ProtoTensor>
Status read_tensors(const pb::RepeatedPtrField<ProtoTensor>& in, const char* field, const Tree* tree,
                    const Checker& check, std::vector<TensorConfig>* out) {
  const pb::Descriptor* root = pc::ModelConfig::descriptor();
  const pb::Descriptor* d = ProtoTensor::descriptor();
  std::set<std::string> seen;
  for (int i = 0; i < in.size(); ++i) {
    const ProtoTensor& t = in.Get(i);
    const Tree* sub = Checker::nested(tree, root, field, i);
    const std::string what = std::string(field) + " " + std::to_string(i);
    if (t.name().empty()) return check.invalid(tree, root, field, i, what + ": name is missing");
    if (!seen.insert(t.name()).second)
      return check.invalid(sub, d, "name", -1, std::string(field) + " '" + t.name() + "' is given twice");
    TensorConfig tc;
    tc.name = t.name();
    tc.dtype = dtype_from_proto(t.data_type());
    for (int k = 0; k < t.dims_size(); ++k) {
      const int64_t v = t.dims(k);
      if (v != -1 && v < 1)
        return check.invalid(
            sub, d, "dims", k,
            std::string(field) + " '" + t.name() + "': dims entries must be -1 or >= 1, got " + std::to_string(v));
      tc.dims.push_back(v);
    }
    if constexpr (std::is_same_v<ProtoTensor, pc::ModelOutput>) tc.label_filename = t.label_filename();
    out->push_back(std::move(tc));
  }
  return ok_status();
}

Status read_dynamic_batching(const pc::ModelDynamicBatching& db, int max_batch_size, const Tree* tree,
                             const Checker& check, BatchPolicy* bp) {
  const pb::Descriptor* root = pc::ModelConfig::descriptor();
  const pb::Descriptor* d = pc::ModelDynamicBatching::descriptor();
  const Tree* sub = Checker::nested(tree, root, "dynamic_batching", -1);
  if (max_batch_size < 1)
    return check.invalid(tree, root, "dynamic_batching", -1, "dynamic_batching needs max_batch_size >= 1");
  bp->max_batch_size = max_batch_size;
  std::set<int> seen;
  for (int i = 0; i < db.preferred_batch_size_size(); ++i) {
    const int s = db.preferred_batch_size(i);
    if (s < 1 || s > max_batch_size)
      return check.invalid(sub, d, "preferred_batch_size", i,
                           "preferred_batch_size " + std::to_string(s) +
                               " is outside [1, max_batch_size=" + std::to_string(max_batch_size) + "]");
    if (!seen.insert(s).second)
      return check.invalid(sub, d, "preferred_batch_size", i,
                           "preferred_batch_size " + std::to_string(s) + " is given twice");
    bp->preferred_batch_sizes.push_back(s);
  }
  constexpr uint64_t kMaxMicros = 3600ull * 1000 * 1000;  // an hour: larger is a typo, not a policy
  if (db.max_queue_delay_microseconds() > kMaxMicros)
    return check.invalid(sub, d, "max_queue_delay_microseconds", -1, "max_queue_delay_microseconds is over an hour");
  bp->max_queue_delay_us = static_cast<int64_t>(db.max_queue_delay_microseconds());
  bp->preserve_ordering = db.preserve_ordering();
  if (db.priority_levels() > 1024)
    return check.invalid(sub, d, "priority_levels", -1, "priority_levels must be at most 1024");
  if (db.priority_levels() == 0) {
    if (db.default_priority_level() != 0)
      return check.invalid(sub, d, "default_priority_level", -1, "default_priority_level needs priority_levels > 0");
  } else {
    const uint64_t levels = db.priority_levels();
    if (db.default_priority_level() < 1 || db.default_priority_level() > levels)
      return check.invalid(sub, d, "default_priority_level", -1,
                           "default_priority_level must be in [1, priority_levels=" + std::to_string(levels) +
                               "], got " + std::to_string(db.default_priority_level()));
    bp->priority_levels = static_cast<int>(levels);
    bp->default_priority = priority_from_wire(db.default_priority_level());
  }
  if (!db.priority_queue_policy().empty()) {
    SL_LOG(kWarning) << check.where()
                     << ": priority_queue_policy is not applied; every level uses default_queue_policy";
  }
  if (db.has_default_queue_policy()) {
    const pc::ModelQueuePolicy& q = db.default_queue_policy();
    const Tree* qt = Checker::nested(sub, d, "default_queue_policy", -1);
    if (q.default_timeout_microseconds() > kMaxMicros)
      return check.invalid(qt, pc::ModelQueuePolicy::descriptor(), "default_timeout_microseconds", -1,
                           "default_timeout_microseconds is over an hour");
    bp->queue.timeout_action =
        q.timeout_action() == pc::ModelQueuePolicy::DELAY ? TimeoutAction::kDelay : TimeoutAction::kReject;
    bp->queue.default_timeout_us = static_cast<int64_t>(q.default_timeout_microseconds());
    bp->queue.allow_timeout_override = q.allow_timeout_override();
    bp->queue.max_queue_size = static_cast<int>(std::min<uint32_t>(q.max_queue_size(), 1u << 30));
  }
  return ok_status();
}

// Text format lets a repeated message field omit the colon before a list ("input [ {...} ]"),
// but protobuf's skipping of unknown fields only understands lists after a colon. Every
// `name [` at a field position becomes `name:[` (the colon takes the place of the space, so
// error columns stay right), outside strings and comments. The same scan refuses nesting deeper
// than kMaxConfigNesting: protobuf skips unknown fields by recursion without a depth limit.
Result<std::string> colon_before_lists(const std::string& text, const std::string& where) {
  std::string out;
  out.reserve(text.size() + 8);
  const size_t n = text.size();
  char last_token = 0;  // the last non-space character outside strings and comments
  size_t i = 0;
  int depth = 0;          // open '{', '<' and '[' outside strings and comments
  int line = 1;           // 1-based, for errors
  size_t line_start = 0;  // offset of the current line
  auto is_ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  while (i < n) {
    const char c = text[i];
    if (c == '#') {  // comment to the end of the line
      const size_t e = text.find('\n', i);
      const size_t stop = e == std::string::npos ? n : e;
      out.append(text, i, stop - i);
      i = stop;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t j = i + 1;
      while (j < n && text[j] != c && text[j] != '\n') j += text[j] == '\\' ? 2 : 1;
      j = std::min(n, j + 1);
      out.append(text, i, j - i);
      i = j;
      last_token = c;
      continue;
    }
    if (is_ident(c) && !std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < n && (is_ident(text[j]) || text[j] == '.')) ++j;
      const bool field_position = last_token != ':';
      out.append(text, i, j - i);
      last_token = 'a';
      size_t k = j;
      while (k < n && (text[k] == ' ' || text[k] == '\t')) ++k;
      if (field_position && k < n && text[k] == '[') {
        if (k > j) {
          out += ':';
          out.append(text, j + 1, k - j - 1);
        } else {
          out += ':';
        }
        i = k;
        continue;
      }
      i = j;
      continue;
    }
    if (c == '\n') {
      ++line;
      line_start = i + 1;
    } else if (c == '{' || c == '<' || c == '[') {
      if (++depth > kMaxConfigNesting)
        return invalid_argument(where + ": line " + std::to_string(line) + " col " +
                                std::to_string(i - line_start + 1) + ": nested deeper than " +
                                std::to_string(kMaxConfigNesting) + " levels");
    } else if (c == '}' || c == '>' || c == ']') {
      depth = std::max(0, depth - 1);  // unbalanced closers are the parser's to report
    }
    if (!std::isspace(static_cast<unsigned char>(c))) last_token = c;
    out += c;
    ++i;
  }
  return out;
}

}  // namespace

std::optional<int64_t> parse_config_int(const std::string& s) {
  int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p != end || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> parse_config_ms(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v > 0) || v > kMaxConfigMs) return std::nullopt;
  return v;
}

std::optional<bool> parse_config_bool(const std::string& s) {
  if (s == "true" || s == "1" || s == "on" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "off" || s == "no") return false;
  return std::nullopt;
}

DType dtype_from_kserve(const std::string& name) {
  for (const auto& n : kTypes)
    if (name == n.kserve) return n.dtype;
  return DType::kUndefined;
}

const char* dtype_to_kserve(DType t) {
  for (const auto& n : kTypes)
    if (t == n.dtype) return n.kserve;
  return "";
}

DType dtype_from_config(const std::string& name) {
  for (const auto& n : kTypes)
    if (name == n.config) return n.dtype;
  return DType::kUndefined;
}

const char* dtype_to_config(DType t) {
  for (const auto& n : kTypes)
    if (t == n.dtype) return n.config;
  return "TYPE_INVALID";
}

namespace {

// The checks and the conversion shared by config.pbtxt and a JSON configuration; `tree` locates
// fields in the text (null: errors name fields without a line).
Result<ModelConfig> config_from_proto(const pc::ModelConfig& p, const Tree* tree, const std::string& where) {
  const Checker check(where);
  const pb::Descriptor* root = pc::ModelConfig::descriptor();
  ModelConfig c;
  c.name = p.name();
  c.platform = p.platform();
  c.backend = p.backend();
  // Pass 1: what runs the model.
  if (!c.platform.empty() && c.platform != "onnxruntime_onnx" && c.platform != "streamline_onnx")
    return check.unsupported_value(tree, root, "platform", -1,
                                   "platform '" + c.platform +
                                       "' is not served here; streamline serves ONNX models "
                                       "(platform \"onnxruntime_onnx\")");
  if (!c.backend.empty() && c.backend != "streamline" && c.backend != "onnxruntime")
    return check.unsupported_value(
        tree, root, "backend", -1,
        "backend '" + c.backend + "' is not served here (use \"streamline\" or \"onnxruntime\")");
  if (p.max_batch_size() < 0)
    return check.invalid(tree, root, "max_batch_size", -1,
                         "max_batch_size must be >= 0, got " + std::to_string(p.max_batch_size()));
  c.max_batch_size = p.max_batch_size();

  // Pass 2: tensors.
  SL_RETURN_IF_ERROR(read_tensors(p.input(), "input", tree, check, &c.inputs));
  SL_RETURN_IF_ERROR(read_tensors(p.output(), "output", tree, check, &c.outputs));

  // Pass 3: instances.
  if (p.instance_group_size() > 0) {
    c.instance_group_given = true;
    int64_t total = 0;
    for (int i = 0; i < p.instance_group_size(); ++i) {
      const pc::ModelInstanceGroup& g = p.instance_group(i);
      const Tree* sub = Checker::nested(tree, root, "instance_group", i);
      const pb::Descriptor* d = pc::ModelInstanceGroup::descriptor();
      if (g.has_count() && g.count() < 1)
        return check.invalid(sub, d, "count", -1,
                             "instance_group count must be >= 1, got " + std::to_string(g.count()));
      if (g.kind() == pc::ModelInstanceGroup::KIND_GPU && !runtime::cuda_built())
        return check.unsupported_value(sub, d, "kind", -1,
                                       "instance_group kind KIND_GPU is not available: this build has no CUDA "
                                       "backend (use KIND_CPU or KIND_AUTO)");
      if (g.kind() == pc::ModelInstanceGroup::KIND_GPU)
        for (int k = 0; k < g.gpus_size(); ++k) {
          if (g.gpus(k) < 0)
            return check.invalid(sub, d, "gpus", k, "gpus must be >= 0, got " + std::to_string(g.gpus(k)));
          c.gpus.push_back(g.gpus(k));
        }
      total += g.has_count() ? g.count() : 1;
      if (i == 0) c.instance_kind = pc::ModelInstanceGroup::Kind_Name(g.kind());
    }
    if (total > runtime::kMaxInstances)
      return check.invalid(tree, root, "instance_group", 0,
                           "instance_group counts add up to " + std::to_string(total) + "; at most " +
                               std::to_string(runtime::kMaxInstances));
    c.instance_count = static_cast<int>(total);
  }

  // Pass 4: batching. Without dynamic_batching each request runs as it comes.
  c.dynamic_batching = p.has_dynamic_batching();
  if (c.dynamic_batching)
    SL_RETURN_IF_ERROR(read_dynamic_batching(p.dynamic_batching(), c.max_batch_size, tree, check, &c.batching));

  // Pass 5: versions and the transaction policy.
  if (p.has_version_policy()) {
    const pc::ModelVersionPolicy& v = p.version_policy();
    const Tree* sub = Checker::nested(tree, root, "version_policy", -1);
    const pb::Descriptor* d = pc::ModelVersionPolicy::descriptor();
    if (v.has_all()) {
      c.version_policy = VersionPolicyKind::kAll;
    } else if (v.has_specific()) {
      c.version_policy = VersionPolicyKind::kSpecific;
      for (int64_t n : v.specific().versions()) {
        if (n < 0) return check.invalid(sub, d, "specific", -1, "specific versions must be >= 0");
        c.specific_versions.push_back(n);
      }
      if (c.specific_versions.empty())
        return check.invalid(sub, d, "specific", -1, "version_policy specific lists no versions");
    } else if (v.has_latest()) {
      if (v.latest().num_versions() < 1 || v.latest().num_versions() > 1024)
        return check.invalid(sub, d, "latest", -1, "latest num_versions must be in [1, 1024]");
      c.latest_versions = static_cast<int>(v.latest().num_versions());
    }
  }
  c.decoupled = p.model_transaction_policy().decoupled();

  // Pass 6: our own options.
  for (const auto& [key, value] : p.parameters()) c.parameters[key] = value.string_value();
  SL_RETURN_IF_ERROR(check_parameters(c.parameters, where));
  return c;
}

}  // namespace

Result<ModelConfig> parse_model_config(const std::string& text, const std::string& where) {
  pc::ModelConfig p;
  Collector errors(where);
  Tree tree;
  if (text.size() > kMaxConfigBytes)
    return invalid_argument(where + ": " + std::to_string(text.size()) + " bytes; at most " +
                            std::to_string(kMaxConfigBytes >> 20) + " MiB are read");
  SL_ASSIGN_OR_RETURN(const std::string prepared, colon_before_lists(text, where));
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(true);
  parser.WriteLocationsTo(&tree);
  parser.SetRecursionLimit(kMaxConfigNesting);
  if (!parser.ParseFromString(prepared, &p))
    return invalid_argument(errors.first().empty() ? where + ": not a valid config" : errors.first());

  return config_from_proto(p, &tree, where);
}

Result<ModelConfig> parse_model_config_json(const std::string& json, const std::string& where) {
  if (json.size() > kMaxConfigBytes)
    return invalid_argument(where + ": " + std::to_string(json.size()) + " bytes; at most " +
                            std::to_string(kMaxConfigBytes >> 20) + " MiB are read");
  pc::ModelConfig p;
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = pb::util::JsonStringToMessage(json, &p, options);
  if (!status.ok()) return invalid_argument(where + ": not a model configuration: " + std::string(status.message()));
  return config_from_proto(p, nullptr, where);
}

}  // namespace streamline::serve
