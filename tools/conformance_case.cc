#include "conformance_case.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/small_types.h"
#include "graph/onnx_tensor.h"
#include "streamline/streamline.h"

namespace streamline::tools {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLineTag = "@@case";
constexpr size_t kMaxDetail = 4000;

CaseOutcome outcome(CaseStatus s, std::string detail) {
  return CaseOutcome{s, std::move(detail)};
}

// Whole file into `out`; false when it cannot be read.
bool read_file(const fs::path& p, std::string& out) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return false;
  out = ss.str();
  return true;
}

// The number N of a name "PREFIX<N>SUFFIX", or -1.
int64_t numbered(const std::string& name, const std::string& prefix, const std::string& suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

// Entries of `dir` named PREFIX<N>SUFFIX, sorted by N.
std::vector<fs::path> numbered_entries(const fs::path& dir, const std::string& prefix, const std::string& suffix,
                                       bool want_dirs) {
  std::vector<std::pair<int64_t, fs::path>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const bool is_dir = it->is_directory(ec);
    if (ec || is_dir != want_dirs) continue;
    const int64_t n = numbered(it->path().filename().string(), prefix, suffix);
    if (n >= 0) found.emplace_back(n, it->path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [n, p] : found) out.push_back(p);
  return out;
}

std::string type_kind(const onnx::TypeProto& t) {
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType:
      return "tensor";
    case onnx::TypeProto::kSequenceType:
      return "sequence";
    case onnx::TypeProto::kMapType:
      return "map";
    case onnx::TypeProto::kOptionalType:
      return "optional";
    case onnx::TypeProto::kSparseTensorType:
      return "sparse tensor";
    default:
      return "untyped";
  }
}

// Unsupported reason when a graph input (not an initializer) or output is not a plain tensor of a
// type streamline holds; "" otherwise.
std::string io_type_problem(const onnx::ModelProto& m) {
  const auto& g = m.graph();
  std::vector<std::string> inits;
  for (const auto& t : g.initializer()) inits.push_back(t.name());
  auto check = [&](const onnx::ValueInfoProto& v, const char* what) -> std::string {
    if (!v.has_type()) return "";
    const std::string kind = type_kind(v.type());
    if (kind != "tensor") return std::string(what) + " '" + v.name() + "' is a " + kind + " type";
    const int32_t et = v.type().tensor_type().elem_type();
    if (et != 0 && !dtype_supported(graph::dtype_from_onnx(et)))
      return std::string(what) + " '" + v.name() + "' has element type " + graph::onnx_type_name(et);
    return "";
  };
  for (const auto& in : g.input()) {
    if (std::find(inits.begin(), inits.end(), in.name()) != inits.end()) continue;
    if (std::string p = check(in, "input"); !p.empty()) return p;
  }
  for (const auto& out : g.output())
    if (std::string p = check(out, "output"); !p.empty()) return p;
  return "";
}

Result<Tensor> read_tensor_pb(const fs::path& file, onnx::TensorProto& proto) {
  std::string bytes;
  if (!read_file(file, bytes)) return not_found("cannot read " + file.string());
  if (!proto.ParseFromString(bytes)) return invalid_argument(file.filename().string() + " is not a TensorProto");
  graph::TensorReadOptions ro;
  ro.base_dir = file.parent_path().string();
  return graph::tensor_from_onnx(proto, ro, file.filename().string());
}

// ONNX's test data (before numpy had a bfloat16) stores bfloat16 tensors as uint16 bit patterns;
// read them as the bfloat16 the model declares.
Tensor as_declared(Tensor t, DType declared) {
  if (declared != DType::kBFloat16 || t.dtype() != DType::kUInt16) return t;
  Tensor b = Tensor::empty(DType::kBFloat16, t.shape());
  if (t.nbytes() > 0) std::memcpy(b.raw(), t.raw(), t.nbytes());
  return b;
}

std::string format_value(const Tensor& t, int64_t i) {
  char b[64];
  switch (t.dtype()) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
    case DType::kBFloat16:
      std::snprintf(b, sizeof b, "%.9g", element_as_double(t, i));
      break;
    case DType::kUInt64:
      std::snprintf(b, sizeof b, "%llu", static_cast<unsigned long long>(t.data<uint64_t>()[i]));
      break;
    case DType::kBool:
      return t.data<uint8_t>()[i] ? "true" : "false";
    default:
      if (is_small_float(t.dtype()))  // compared bit for bit, shown as the value
        std::snprintf(b, sizeof b, "%.9g (0x%02x)", element_as_double(t, i), t.data<uint8_t>()[i]);
      else
        std::snprintf(b, sizeof b, "%lld", static_cast<long long>(element_as_int64(t, i)));
      break;
  }
  return b;
}

bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Matches each data-set tensor to a model slot: by its TensorProto name when that names a slot,
// else by position. Returns "" or a problem.
std::string place(const std::vector<TensorDesc>& descs, const std::string& name, size_t position,
                  std::vector<int>& slot_of, std::vector<bool>& taken, const char* what) {
  int slot = -1;
  for (size_t i = 0; i < descs.size() && !name.empty(); ++i)
    if (descs[i].name == name) slot = static_cast<int>(i);
  if (slot < 0) slot = position < descs.size() ? static_cast<int>(position) : -1;
  if (slot < 0)
    return std::string(what) + " #" + std::to_string(position) + " has no counterpart: the model has " +
           std::to_string(descs.size());
  if (taken[static_cast<size_t>(slot)])
    return std::string(what) + " '" + descs[static_cast<size_t>(slot)].name + "' is given twice";
  taken[static_cast<size_t>(slot)] = true;
  slot_of.push_back(slot);
  return "";
}

CaseOutcome run_data_set(Session& session, const Model& model, const fs::path& set_dir) {
  const std::string set = set_dir.filename().string();
  std::vector<Tensor> inputs(model.inputs().size());
  std::vector<bool> taken(inputs.size(), false);
  std::vector<int> slot_of;
  const auto in_files = numbered_entries(set_dir, "input_", ".pb", false);
  for (size_t k = 0; k < in_files.size(); ++k) {
    onnx::TensorProto proto;
    auto t = read_tensor_pb(in_files[k], proto);
    if (!t.ok()) {
      const CaseStatus s =
          t.status().code() == StatusCode::kUnsupported ? CaseStatus::kUnsupported : CaseStatus::kError;
      return outcome(s, set + ": " + t.status().to_string());
    }
    if (std::string p = place(model.inputs(), proto.name(), k, slot_of, taken, "input"); !p.empty())
      return outcome(CaseStatus::kError, set + ": " + p);
    const auto& desc = model.inputs()[static_cast<size_t>(slot_of.back())];
    t = as_declared(std::move(t).value(), desc.dtype);
    if (desc.dtype != DType::kUndefined && desc.dtype != t->dtype())
      return outcome(CaseStatus::kError, set + ": input '" + desc.name + "' holds " + dtype_name(t->dtype()) +
                                             ", the model declares " + dtype_name(desc.dtype));
    inputs[static_cast<size_t>(slot_of.back())] = std::move(t).value();
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      return outcome(CaseStatus::kError, set + ": no value for input '" + model.inputs()[i].name + "'");

  auto outs = session.run(inputs);
  if (!outs.ok()) {
    const CaseStatus s =
        outs.status().code() == StatusCode::kUnsupported ? CaseStatus::kUnsupported : CaseStatus::kError;
    return outcome(s, set + ": run: " + outs.status().to_string());
  }
  if (outs->size() != model.outputs().size())
    return outcome(CaseStatus::kError, set + ": run returned " + std::to_string(outs->size()) +
                                           " outputs, the model has " + std::to_string(model.outputs().size()));

  const auto out_files = numbered_entries(set_dir, "output_", ".pb", false);
  std::vector<bool> out_taken(outs->size(), false);
  std::vector<int> out_slot;
  for (size_t k = 0; k < out_files.size(); ++k) {
    onnx::TensorProto proto;
    auto expected = read_tensor_pb(out_files[k], proto);
    if (!expected.ok()) {
      const CaseStatus s =
          expected.status().code() == StatusCode::kUnsupported ? CaseStatus::kUnsupported : CaseStatus::kError;
      return outcome(s, set + ": " + expected.status().to_string());
    }
    if (std::string p = place(model.outputs(), proto.name(), k, out_slot, out_taken, "output"); !p.empty())
      return outcome(CaseStatus::kError, set + ": " + p);
    const size_t slot = static_cast<size_t>(out_slot.back());
    const Tensor& got = (*outs)[slot];
    if (got.layout() != Layout::kPlain)
      return outcome(CaseStatus::kError,
                     set + ": output '" + model.outputs()[slot].name + "' came back in a blocked layout");
    const std::string diff = compare_tensors(as_declared(std::move(expected).value(), got.dtype()), got);
    if (!diff.empty())
      return outcome(CaseStatus::kFailed,
                     set + ": output " + std::to_string(slot) + " '" + model.outputs()[slot].name + "': " + diff);
  }
  if (out_files.empty()) return outcome(CaseStatus::kError, set + ": no output_K.pb files");
  return outcome(CaseStatus::kPassed, "");
}

std::string sanitize(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  if (s.size() > kMaxDetail) s = s.substr(0, kMaxDetail) + "...";
  return s;
}

}  // namespace

const char* case_status_name(CaseStatus s) {
  switch (s) {
    case CaseStatus::kPassed:
      return "passed";
    case CaseStatus::kFailed:
      return "failed";
    case CaseStatus::kUnsupported:
      return "unsupported";
    case CaseStatus::kError:
      return "error";
    case CaseStatus::kCrashed:
      return "crashed";
  }
  return "error";
}

std::optional<CaseStatus> case_status_from_name(const std::string& s) {
  for (CaseStatus c :
       {CaseStatus::kPassed, CaseStatus::kFailed, CaseStatus::kUnsupported, CaseStatus::kError, CaseStatus::kCrashed})
    if (s == case_status_name(c)) return c;
  return std::nullopt;
}

std::string compare_tensors(const Tensor& expected, const Tensor& got, const Tolerance& tol) {
  if (expected.dtype() != got.dtype())
    return std::string("dtype ") + dtype_name(got.dtype()) + ", expected " + dtype_name(expected.dtype());
  if (expected.shape() != got.shape())
    return "shape " + got.shape().to_string() + ", expected " + expected.shape().to_string();
  const int64_t n = expected.numel();
  const bool fp = is_float(expected.dtype());
  const size_t esize = dtype_size(expected.dtype());
  int64_t bad = 0, worst = -1;
  double worst_err = -1;
  for (int64_t i = 0; i < n; ++i) {
    double err = 0;
    if (fp) {
      const double e = element_as_double(expected, i), g = element_as_double(got, i);
      if (std::isnan(e) || std::isnan(g)) {
        if (std::isnan(e) && std::isnan(g)) continue;
        err = INFINITY;
      } else if (std::isinf(e) || std::isinf(g)) {
        if (e == g) continue;
        err = INFINITY;
      } else {
        err = std::fabs(g - e);
        if (err <= tol.atol + tol.rtol * std::fabs(e)) continue;
      }
    } else {
      const auto* pe = static_cast<const unsigned char*>(expected.raw()) + static_cast<size_t>(i) * esize;
      const auto* pg = static_cast<const unsigned char*>(got.raw()) + static_cast<size_t>(i) * esize;
      if (std::equal(pe, pe + esize, pg)) continue;
      err = std::fabs(element_as_double(got, i) - element_as_double(expected, i));
    }
    ++bad;
    if (err > worst_err) {
      worst_err = err;
      worst = i;
    }
  }
  if (bad == 0) return "";
  char e[64];
  std::snprintf(e, sizeof e, "%.6g", worst_err);
  return std::to_string(bad) + " of " + std::to_string(n) + " values differ; max abs error " + e + " at index " +
         std::to_string(worst) + " (expected " + format_value(expected, worst) + ", got " + format_value(got, worst) +
         ")";
}

CaseOutcome run_case_in_process(const std::string& case_dir, int threads) {
  const fs::path dir(case_dir);
  const fs::path model_path = dir / "model.onnx";
  std::string bytes;
  if (!read_file(model_path, bytes)) return outcome(CaseStatus::kError, "cannot read " + model_path.string());
  {
    onnx::ModelProto proto;
    if (!proto.ParseFromString(bytes)) return outcome(CaseStatus::kError, "model.onnx is not a ModelProto");
    if (std::string p = io_type_problem(proto); !p.empty()) return outcome(CaseStatus::kUnsupported, p);
  }
  bytes.clear();
  const auto sets = numbered_entries(dir, "test_data_set_", "", true);
  if (sets.empty()) return outcome(CaseStatus::kError, "no test_data_set_N folders");

  ModelOptions mo;
  mo.num_threads = std::max(1, threads);
  auto model = Model::load(model_path.string(), mo);
  if (!model.ok()) {
    const CaseStatus s =
        model.status().code() == StatusCode::kUnsupported ? CaseStatus::kUnsupported : CaseStatus::kError;
    return outcome(s, model.status().to_string());
  }
  Session session(*model);
  for (const fs::path& set : sets) {
    CaseOutcome o = run_data_set(session, **model, set);
    if (o.status != CaseStatus::kPassed) return o;
  }
  return outcome(CaseStatus::kPassed, "");
}

std::string case_op(const std::string& case_dir) {
  std::string bytes;
  onnx::ModelProto m;
  if (!read_file(fs::path(case_dir) / "model.onnx", bytes) || !m.ParseFromString(bytes)) return "?";
  const auto& g = m.graph();
  if (g.node_size() == 0) return "(no nodes)";
  // An expanded function body names its values "<Op>_<case>_function_<x>".
  std::string tag = "_";
  tag += fs::path(case_dir).filename().string();
  tag += "_function_";
  for (const auto& n : g.node())
    for (const auto& out : n.output())
      if (size_t at = out.find(tag); at != std::string::npos && at > 0) return out.substr(0, at);
  const onnx::NodeProto* pick = &g.node(0);
  for (const auto& n : g.node())
    if (n.op_type() != "Constant") {
      pick = &n;
      break;
    }
  const std::string& d = pick->domain();
  return d.empty() || d == "ai.onnx" ? pick->op_type() : d + "::" + pick->op_type();
}

std::string format_case_line(const CaseOutcome& o) {
  return std::string(kLineTag) + "\t" + case_status_name(o.status) + "\t" + sanitize(o.detail);
}

std::optional<CaseOutcome> parse_case_line(const std::string& child_stdout) {
  const std::string start = std::string(kLineTag) + "\t";
  size_t at = std::string::npos;
  for (size_t pos = 0; (pos = child_stdout.find(start, pos)) != std::string::npos; pos += start.size())
    if (pos == 0 || child_stdout[pos - 1] == '\n') at = pos;
  if (at == std::string::npos) return std::nullopt;
  size_t end = child_stdout.find('\n', at);
  if (end == std::string::npos) end = child_stdout.size();
  const std::string line = child_stdout.substr(at + start.size(), end - at - start.size());
  const size_t tab = line.find('\t');
  auto status = case_status_from_name(line.substr(0, tab));
  if (!status) return std::nullopt;
  return CaseOutcome{*status, tab == std::string::npos ? std::string() : line.substr(tab + 1)};
}

}  // namespace streamline::tools
