#pragma once
// Helpers shared by the streamline CLI commands: parsing --shape/--input flags, making seeded
// random inputs, and formatting tables and JSON.

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "streamline/streamline.h"

namespace streamline::tools {

struct InputFlags {
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> shapes;  // NAME=d0,d1,...
  int64_t batch = 0;                // 0 = not given
  uint32_t seed = 0;
};

// Flags that shape how a model is loaded and planned, shared by run, bench and plan.
struct ModelFlags {
  std::string path;
  int threads = 0;             // total threads; 0 = all cores
  int streams = 1;
  int threads_per_stream = 0;  // 0 = threads / streams
  std::string pin_streams;     // JSON file {"node": stream}
  bool pin_threads = false;
  bool elastic_threads = false;
  int split_convs = 0;
  bool safe = false;
  bool no_optimize = false;
  bool no_winograd = false;
  int block = 0;                   // channels per block of the blocked layout; 0 = by CPU
  std::string device = "cpu";      // cpu, cuda, cuda:N
  std::string precision = "fp32";  // fp32, tf32, fp16 (GPU only)
  bool no_cuda_graphs = false;
};
void add_model_flags(CLI::App* app, ModelFlags& f);
// --shape and --batch, plus --input files when `with_files`.
void add_input_flags(CLI::App* app, InputFlags& f, bool with_files);
Result<std::shared_ptr<Model>> load_model(const ModelFlags& f);

// What a command needs before it runs: the model, each input's shape and (when asked) the inputs.
struct Prepared {
  std::shared_ptr<Model> model;
  std::vector<Shape> shapes;
  std::vector<Tensor> inputs;
};
Result<Prepared> prepare(const ModelFlags& mf, const InputFlags& in, bool with_inputs);

// Shapes for every model input: --shape wins, then --input files' shapes, then the model's
// declared dims with symbolic batch = --batch (default 1).
Result<std::vector<Shape>> resolve_shapes(const Model& model, const InputFlags& flags);
// Input tensors: from --input files where given, else seeded random values (floats in [-1, 1),
// integers in [0, 1000), bools 0/1).
Result<std::vector<Tensor>> make_inputs(const Model& model, const InputFlags& flags, const std::vector<Shape>& shapes);
Tensor random_tensor(DType dtype, const Shape& shape, uint32_t seed);

// Percentile (0..100) of unsorted samples, linear interpolation.
double percentile(std::vector<double> v, double p);
std::string json_escape(const std::string& s);
// Prints rows with columns padded to the widest cell.
void print_table(const std::vector<std::vector<std::string>>& rows);
std::string fmt(double v, int digits = 3);

}  // namespace streamline::tools
