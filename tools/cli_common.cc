#include "cli_common.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>

#include "cli_flags.h"
#include "core/npy.h"
#include "plan/schedule.h"
#include "preflight.h"
#include "runtime/device.h"

namespace streamline::tools {
namespace {

// Largest --shape dimension, and the most bytes one random input may take: bounds that turn a
// typo into a clear error instead of an allocation that fails or swaps.
constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;
constexpr uint64_t kMaxInputBytes = uint64_t{64} << 30;

Result<std::pair<std::string, std::string>> split_assignment(const std::string& s, const char* flag) {
  const size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0)
    return invalid_argument(std::string(flag) + " expects NAME=VALUE, got '" + s + "'");
  return std::make_pair(s.substr(0, eq), s.substr(eq + 1));
}

Result<int> input_index(const Model& model, const std::string& name, const char* flag) {
  for (size_t i = 0; i < model.inputs().size(); ++i)
    if (model.inputs()[i].name == name) return static_cast<int>(i);
  std::string names;
  for (const auto& d : model.inputs()) names += (names.empty() ? "" : ", ") + d.name;
  return invalid_argument(std::string(flag) + ": model has no input '" + name + "' (inputs: " + names + ")");
}

}  // namespace

void add_model_flags(CLI::App* c, ModelFlags& f) {
  ModelOptions& o = f.options;
  c->add_option("model", f.path, "ONNX model file")->required();
  c->add_option("--threads", o.num_threads, "Total threads (default: all cores)")
      ->check(int_range(0, kMaxThreads, "0: all cores"));
  c->add_option("--streams", o.num_streams, "Streams per run (independent branches run concurrently)")
      ->check(int_range(1, 64));
  c->add_option("--threads-per-stream", o.threads_per_stream, "Intra-op threads per stream (default: threads/streams)")
      ->check(int_range(0, kMaxThreads, "0: threads / streams"));
  c->add_option("--pin-streams", f.pin_streams, "JSON file {\"node name\": stream, ...} pinning nodes to streams");
  c->add_flag("--pin-threads", o.pin_threads, "Pin each stream's threads to their own cores");
  c->add_flag("--elastic-threads", o.elastic_threads,
              "With several streams: each step uses threads/(streams busy at that moment) threads");
  c->add_option("--split-convs", o.split_convs,
                "Cut each heavy convolution into N output-channel slices for multi-stream plans (0: off)")
      ->check(int_range(0, 64, "0: off"));
  c->add_flag("--safe", o.safe, "Safe mode: canaries checked after every step, dead buffers poisoned");
  c->add_flag("--no-optimize", f.no_optimize, "Turn graph passes off (debugging)");
  c->add_flag("--no-winograd", f.no_winograd, "Run every convolution with oneDNN's direct algorithm");
  c->add_option("--block", o.blocked_channels,
                "Channels per block of the blocked layout: 8 or 16 (default: 16 with AVX-512)")
      ->check(CLI::IsMember({0, 8, 16}));
  c->add_option("--device", o.device, "Where to run: cpu, cuda (GPU 0), cuda:N, or eager (CPU, node by node, no plan)");
  c->add_option("--precision", f.precision, "GPU arithmetic: fp32, tf32 or fp16 (weights converted at load)");
  c->add_flag("--no-cuda-graphs", f.no_cuda_graphs, "GPU: launch every kernel instead of replaying a CUDA graph");
}

void add_input_flags(CLI::App* c, InputFlags& f, bool with_files) {
  if (with_files) c->add_option("--input", f.inputs, "NAME=FILE.npy input (repeatable)");
  c->add_option("--shape", f.shapes, "NAME=d0,d1,... input shape (repeatable)");
  c->add_option("--batch", f.batch, "Batch size for dynamic first dimensions (default 1)")
      ->check(int_range(1, kMaxBatch));
}

Result<std::shared_ptr<Model>> load_model(const ModelFlags& f) {
  ModelOptions mo = f.options;
  mo.optimize = !f.no_optimize;
  mo.winograd = !f.no_winograd;
  mo.cuda_graphs = !f.no_cuda_graphs;
  SL_ASSIGN_OR_RETURN(mo.precision, runtime::parse_precision(f.precision));
  if (!f.pin_streams.empty()) {
    SL_RETURN_IF_ERROR(check_input_file("--pin-streams", f.pin_streams));
    SL_ASSIGN_OR_RETURN(mo.pinned_streams, plan::parse_pin_file(f.pin_streams));
  }
  return Model::load(f.path, mo);
}

Result<Prepared> prepare(const ModelFlags& mf, const InputFlags& in, bool with_inputs) {
  // The flags' files first: a missing one fails before a model that may take seconds to load.
  for (const auto& f : in.inputs) {
    SL_ASSIGN_OR_RETURN(auto kv, split_assignment(f, "--input"));
    SL_RETURN_IF_ERROR(check_input_file("--input " + kv.first, kv.second));
  }
  Prepared p;
  SL_ASSIGN_OR_RETURN(p.model, load_model(mf));
  // The commands feed tensors (.npy files or random ones); a model taking a sequence or an optional
  // runs from the library (Session::run_values).
  for (const auto& d : p.model->inputs())
    if (d.kind != ValueKind::kTensor)
      return unsupported("input '" + d.name + "' is a " + value_type_name(d.kind, d.dtype) +
                         "; the command line gives tensors only (.npy files)");
  std::vector<std::string> notes;
  SL_ASSIGN_OR_RETURN(p.shapes, resolve_shapes(*p.model, in, &notes));
  for (const auto& n : notes) std::cerr << "note: " << n << "\n";
  std::cerr << std::flush;
  if (with_inputs) {
    SL_ASSIGN_OR_RETURN(p.inputs, make_inputs(*p.model, in, p.shapes));
  }
  return p;
}

Result<std::vector<int64_t>> parse_dims(const std::string& flag_value, const std::string& dims) {
  std::vector<int64_t> out;
  std::stringstream ss(dims);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || v < 0 || v > kMaxDim)
      return invalid_argument("--shape " + flag_value + ": '" + item + "' is not a dimension (an integer from 0 to " +
                              std::to_string(kMaxDim) + ")");
    out.push_back(v);
  }
  if (!dims.empty() && dims.back() == ',')
    return invalid_argument("--shape " + flag_value + ": a dimension is missing after the last ','");
  return out;
}

Result<FilledDims> fill_dynamic_dims(const std::vector<DeclaredInput>& inputs, const std::vector<bool>& given,
                                     int64_t batch, bool unnamed_dynamic) {
  FilledDims out;
  const int64_t rows = batch > 0 ? batch : 1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const DeclaredInput& in = inputs[i];
    std::vector<int64_t> dims = in.dims;
    if (i < given.size() && given[i]) {
      out.dims.push_back(std::move(dims));
      continue;
    }
    auto symbol = [&](size_t d) { return d < in.symbols.size() ? in.symbols[d] : std::string(); };
    // The --shape a user would write for this input: sizes where known, <name> where not.
    std::string spelled;
    std::vector<size_t> filled;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (d) spelled += ",";
      if (dims[d] >= 0) {
        spelled += std::to_string(dims[d]);
        continue;
      }
      if (d == 0) {
        dims[d] = rows;
        spelled += std::to_string(rows);
        if (batch <= 0) filled.push_back(d);
        continue;
      }
      dims[d] = 1;
      spelled += "<" + (symbol(d).empty() ? "d" + std::to_string(d) : symbol(d)) + ">";
      filled.push_back(d);
    }
    for (size_t d : filled) {
      const std::string named = symbol(d).empty() ? "" : " ('" + symbol(d) + "')";
      if (d > 0 && symbol(d).empty() && !unnamed_dynamic)
        return invalid_argument("input '" + in.name + "': dimension " + std::to_string(d) +
                                " has neither a size nor a name in the model; give the shape with --shape " + in.name +
                                "=" + spelled);
      out.notes.push_back("input '" + in.name + "': dimension " + std::to_string(d) + named + " is dynamic; using " +
                          std::to_string(dims[d]) + " (set it with " +
                          (d == 0 ? std::string("--batch N") : "--shape " + in.name + "=" + spelled) + ")");
    }
    out.dims.push_back(std::move(dims));
  }
  return out;
}

Result<std::vector<Shape>> resolve_shapes(const Model& model, const InputFlags& flags,
                                          std::vector<std::string>* notes) {
  const size_t n = model.inputs().size();
  std::vector<DeclaredInput> declared;
  for (const auto& d : model.inputs()) declared.push_back({d.name, d.dims, d.symbols});
  std::vector<Shape> shapes(n);
  std::vector<bool> given(n, false), from_file(n, false);
  std::vector<std::string> extra_notes;
  // Pass 1: --input files; the shapes of the tensors given are the truth.
  for (const auto& f : flags.inputs) {
    SL_ASSIGN_OR_RETURN(auto kv, split_assignment(f, "--input"));
    SL_ASSIGN_OR_RETURN(int idx, input_index(model, kv.first, "--input"));
    SL_ASSIGN_OR_RETURN(Tensor t, read_npy(kv.second));
    shapes[static_cast<size_t>(idx)] = t.shape();
    given[static_cast<size_t>(idx)] = true;
    from_file[static_cast<size_t>(idx)] = true;
  }
  // Pass 2: --shape fills in the inputs no file gives.
  for (const auto& f : flags.shapes) {
    SL_ASSIGN_OR_RETURN(auto kv, split_assignment(f, "--shape"));
    SL_ASSIGN_OR_RETURN(int idx, input_index(model, kv.first, "--shape"));
    SL_ASSIGN_OR_RETURN(std::vector<int64_t> dims, parse_dims(f, kv.second));
    if (from_file[static_cast<size_t>(idx)]) {
      // Pass 2 fills in only inputs no file gives: a file's tensor keeps its own shape.
      if (shapes[static_cast<size_t>(idx)] != Shape(dims))
        extra_notes.push_back("--shape " + f + " ignored: the --input file for '" + kv.first + "' is " +
                              shapes[static_cast<size_t>(idx)].to_string());
      continue;
    }
    shapes[static_cast<size_t>(idx)] = Shape(dims);
    given[static_cast<size_t>(idx)] = true;
  }
  // Pass 3: the model's declared dims for the rest, the dynamic ones filled.
  SL_ASSIGN_OR_RETURN(FilledDims filled, fill_dynamic_dims(declared, given, flags.batch, false));
  for (size_t i = 0; i < n; ++i)
    if (!given[i]) shapes[i] = Shape(filled.dims[i]);
  extra_notes.insert(extra_notes.end(), filled.notes.begin(), filled.notes.end());
  if (notes) *notes = std::move(extra_notes);
  return shapes;
}

Result<Tensor> random_tensor(DType dtype, const Shape& shape, uint32_t seed) {
  // The size first, without overflow: a --shape typo must not become a wild allocation.
  uint64_t bytes = dtype == DType::kString ? sizeof(std::string) : dtype_size(dtype);
  for (size_t d = 0; d < shape.rank(); ++d)
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(shape[d]), &bytes) || bytes > kMaxInputBytes)
      return resource_exhausted("an input of shape " + shape.to_string() + " (" + dtype_name(dtype) +
                                ") is larger than the " + std::to_string(kMaxInputBytes >> 30) +
                                " GiB an input may have");
  Tensor t = Tensor::empty(dtype, shape);
  if (!t.defined())
    return resource_exhausted("cannot allocate " + std::to_string(bytes) + " bytes for an input of shape " +
                              shape.to_string());
  std::mt19937 rng(seed);
  const int64_t n = t.numel();
  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  std::uniform_int_distribution<int64_t> ui(0, 999);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kFloat32:
        t.data<float>()[i] = uf(rng);
        break;
      case DType::kFloat64:
        t.data<double>()[i] = uf(rng);
        break;
      case DType::kFloat16:
        t.data<uint16_t>()[i] = float_to_half(uf(rng));
        break;
      case DType::kInt64:
        t.data<int64_t>()[i] = ui(rng);
        break;
      case DType::kInt32:
        t.data<int32_t>()[i] = static_cast<int32_t>(ui(rng));
        break;
      case DType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(ui(rng) % 128);
        break;
      case DType::kUInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(ui(rng) % 256);
        break;
      case DType::kBool:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(ui(rng) & 1);
        break;
      case DType::kString:
        t.strings()[i] = std::to_string(ui(rng));
        break;
      default:
        break;  // other types stay zero
    }
  }
  return t;
}

Result<std::vector<Tensor>> make_inputs(const Model& model, const InputFlags& flags, const std::vector<Shape>& shapes) {
  std::vector<Tensor> ins(model.inputs().size());
  for (const auto& f : flags.inputs) {
    SL_ASSIGN_OR_RETURN(auto kv, split_assignment(f, "--input"));
    SL_ASSIGN_OR_RETURN(int idx, input_index(model, kv.first, "--input"));
    SL_ASSIGN_OR_RETURN(Tensor t, read_npy(kv.second));
    if (t.dtype() != model.inputs()[static_cast<size_t>(idx)].dtype)
      return invalid_argument("--input " + kv.first + ": file holds " + dtype_name(t.dtype()) + ", model expects " +
                              dtype_name(model.inputs()[static_cast<size_t>(idx)].dtype));
    ins[static_cast<size_t>(idx)] = t;
  }
  for (size_t i = 0; i < ins.size(); ++i)
    if (!ins[i].defined()) {
      auto t = random_tensor(model.inputs()[i].dtype, shapes[i], flags.seed + static_cast<uint32_t>(i));
      if (!t.ok()) return t.status().with_context("input '" + model.inputs()[i].name + "'");
      ins[i] = std::move(*t);
    }
  return ins;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (c == '\n')
      o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else
      o += c;
  }
  return o;
}

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], r[i].size());
    }
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    std::string line;
    for (size_t i = 0; i < rows[ri].size(); ++i) {
      std::string cell = rows[ri][i];
      cell.resize(w[i], ' ');
      line += (i ? "  " : "") + cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
    if (ri == 0) {
      std::string rule;
      for (size_t i = 0; i < w.size(); ++i) rule += (i ? "  " : "") + std::string(w[i], '-');
      std::cout << rule << "\n";
    }
  }
}

std::string fmt(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

}  // namespace streamline::tools
