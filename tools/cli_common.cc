#include "cli_common.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>
#include <sstream>

#include "core/npy.h"
#include "plan/schedule.h"

namespace streamline::tools {
namespace {

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
  c->add_option("model", f.path, "ONNX model file")->required();
  c->add_option("--threads", f.threads, "Total threads (default: all cores)")->check(CLI::NonNegativeNumber);
  c->add_option("--streams", f.streams, "Streams per run (independent branches run concurrently)")
      ->check(CLI::Range(1, 64));
  c->add_option("--threads-per-stream", f.threads_per_stream, "Intra-op threads per stream (default: threads/streams)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--pin-streams", f.pin_streams, "JSON file {\"node name\": stream, ...} pinning nodes to streams");
  c->add_flag("--pin-threads", f.pin_threads, "Pin each stream's threads to their own cores");
  c->add_flag("--elastic-threads", f.elastic_threads,
              "With several streams: each step uses threads/(streams busy at that moment) threads");
  c->add_option("--split-convs", f.split_convs,
                "Cut each heavy convolution into N output-channel slices for multi-stream plans (0: off)")
      ->check(CLI::Range(0, 64));
  c->add_flag("--safe", f.safe, "Safe mode: canaries checked after every step, dead buffers poisoned");
  c->add_flag("--no-optimize", f.no_optimize, "Turn graph passes off (debugging)");
  c->add_flag("--no-winograd", f.no_winograd, "Run every convolution with oneDNN's direct algorithm");
  c->add_option("--block", f.block, "Channels per block of the blocked layout: 8 or 16 (default: 16 with AVX-512)")
      ->check(CLI::IsMember({0, 8, 16}));
  c->add_option("--device", f.device, "Where to run: cpu, cuda (GPU 0) or cuda:N");
  c->add_option("--precision", f.precision, "GPU arithmetic: fp32, tf32 or fp16 (weights converted at load)");
  c->add_flag("--no-cuda-graphs", f.no_cuda_graphs, "GPU: launch every kernel instead of replaying a CUDA graph");
}

void add_input_flags(CLI::App* c, InputFlags& f, bool with_files) {
  if (with_files) c->add_option("--input", f.inputs, "NAME=FILE.npy input (repeatable)");
  c->add_option("--shape", f.shapes, "NAME=d0,d1,... input shape (repeatable)");
  c->add_option("--batch", f.batch, "Batch size for symbolic first dimensions");
}

Result<std::shared_ptr<Model>> load_model(const ModelFlags& f) {
  ModelOptions mo;
  mo.optimize = !f.no_optimize;
  mo.winograd = !f.no_winograd;
  mo.blocked_channels = f.block;
  mo.num_threads = f.threads;
  mo.num_streams = f.streams;
  mo.threads_per_stream = f.threads_per_stream;
  mo.pin_threads = f.pin_threads;
  mo.elastic_threads = f.elastic_threads;
  mo.split_convs = f.split_convs;
  mo.safe = f.safe;
  mo.device = f.device;
  SL_ASSIGN_OR_RETURN(mo.precision, runtime::parse_precision(f.precision));
  mo.cuda_graphs = !f.no_cuda_graphs;
  if (!f.pin_streams.empty()) {
    SL_ASSIGN_OR_RETURN(mo.pinned_streams, plan::parse_pin_file(f.pin_streams));
  }
  return Model::load(f.path, mo);
}

Result<Prepared> prepare(const ModelFlags& mf, const InputFlags& in, bool with_inputs) {
  Prepared p;
  SL_ASSIGN_OR_RETURN(p.model, load_model(mf));
  SL_ASSIGN_OR_RETURN(p.shapes, resolve_shapes(*p.model, in));
  if (with_inputs) {
    SL_ASSIGN_OR_RETURN(p.inputs, make_inputs(*p.model, in, p.shapes));
  }
  return p;
}

Result<std::vector<Shape>> resolve_shapes(const Model& model, const InputFlags& flags) {
  SL_ASSIGN_OR_RETURN(std::vector<Shape> shapes, model.default_shapes(flags.batch > 0 ? flags.batch : 1));
  for (const auto& f : flags.inputs) {
    SL_ASSIGN_OR_RETURN(auto kv, split_assignment(f, "--input"));
    SL_ASSIGN_OR_RETURN(int idx, input_index(model, kv.first, "--input"));
    SL_ASSIGN_OR_RETURN(Tensor t, read_npy(kv.second));
    shapes[static_cast<size_t>(idx)] = t.shape();
  }
  for (const auto& f : flags.shapes) {
    SL_ASSIGN_OR_RETURN(auto kv, split_assignment(f, "--shape"));
    SL_ASSIGN_OR_RETURN(int idx, input_index(model, kv.first, "--shape"));
    Shape s;
    std::stringstream ss(kv.second);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      const long long v = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || v < 0)
        return invalid_argument("--shape " + f + ": '" + item + "' is not a dimension");
      s.push_back(v);
    }
    shapes[static_cast<size_t>(idx)] = s;
  }
  return shapes;
}

Tensor random_tensor(DType dtype, const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::empty(dtype, shape);
  std::mt19937 rng(seed);
  const int64_t n = t.numel();
  std::uniform_real_distribution<float> uf(-1.f, 1.f);
  std::uniform_int_distribution<int64_t> ui(0, 999);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kFloat32: t.data<float>()[i] = uf(rng); break;
      case DType::kFloat64: t.data<double>()[i] = uf(rng); break;
      case DType::kFloat16: t.data<uint16_t>()[i] = float_to_half(uf(rng)); break;
      case DType::kInt64: t.data<int64_t>()[i] = ui(rng); break;
      case DType::kInt32: t.data<int32_t>()[i] = static_cast<int32_t>(ui(rng)); break;
      case DType::kInt8: t.data<int8_t>()[i] = static_cast<int8_t>(ui(rng) % 128); break;
      case DType::kUInt8: t.data<uint8_t>()[i] = static_cast<uint8_t>(ui(rng) % 256); break;
      case DType::kBool: t.data<uint8_t>()[i] = static_cast<uint8_t>(ui(rng) & 1); break;
      default: break;  // other types stay zero
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
    if (t.shape() != shapes[static_cast<size_t>(idx)])
      return invalid_argument("--input " + kv.first + ": file shape " + t.shape().to_string() +
                              " differs from --shape " + shapes[static_cast<size_t>(idx)].to_string());
    ins[static_cast<size_t>(idx)] = t;
  }
  for (size_t i = 0; i < ins.size(); ++i)
    if (!ins[i].defined())
      ins[i] = random_tensor(model.inputs()[i].dtype, shapes[i], flags.seed + static_cast<uint32_t>(i));
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
    if (c == '"' || c == '\\') { o += '\\'; o += c; }
    else if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
    else o += c;
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
