#pragma once
// Helpers shared by the streamline CLI commands: parsing --shape/--input flags, filling dynamic
// dimensions, making seeded random inputs, and formatting tables and JSON. Flag range checks are
// in cli_flags.h, file and port checks in preflight.h, the progress line in progress.h.

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

// An input as a model declares it: dims are -1 where dynamic; symbols name dims where the model
// does ("" or a shorter list: unnamed).
struct DeclaredInput {
  std::string name;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;
};

// Concrete dims for every input, and a line per dimension the command chose by itself.
struct FilledDims {
  std::vector<std::vector<int64_t>> dims;  // per input, in the declared order
  std::vector<std::string> notes;          // "input 'ids': dimension 1 ('seq') is dynamic; using 1 (set it with ...)"
};

// Fills the dynamic dimensions of the inputs that no flag gave (`given[i]` false; `given` may be
// shorter than `inputs`, then the rest are not given): the first dimension with `batch` (--batch,
// 1 when 0), the others with 1. Each filled dimension gets a note naming the flag that sets it
// (--batch, or --shape with the other dims spelled out), except the first when --batch was given.
// With `unnamed_dynamic` false, a dynamic dimension past the first that the model does not name
// is an error (ONNX leaves its size open: it must be given); true treats it as any other (a
// server's metadata names none).
Result<FilledDims> fill_dynamic_dims(const std::vector<DeclaredInput>& inputs, const std::vector<bool>& given,
                                     int64_t batch, bool unnamed_dynamic);
// "d0,d1,..." from --shape NAME=d0,d1,...: InvalidArgument naming the flag for a bad dimension.
Result<std::vector<int64_t>> parse_dims(const std::string& flag_value, const std::string& dims);

// Flags that shape how a model is loaded and planned, shared by run, bench, plan and classify.
// Flags whose value is a ModelOptions field as it stands are bound to `options` itself (--threads,
// --streams, --threads-per-stream, --pin-threads, --elastic-threads, --split-convs, --safe,
// --block, --device); the rest need a conversion at load_model(): inverted switches, a name to
// parse, a file to read.
struct ModelFlags {
  std::string path;
  ModelOptions options;
  std::string pin_streams;         // JSON file {"node": stream}
  bool no_optimize = false;        // options.optimize = !no_optimize
  bool no_winograd = false;        // options.winograd = !no_winograd
  std::string precision = "fp32";  // fp32, tf32, fp16 (GPU only)
  bool no_cuda_graphs = false;     // options.cuda_graphs = !no_cuda_graphs
};
void add_model_flags(CLI::App* app, ModelFlags& f);
// --shape and --batch, plus --input files when `with_files`.
void add_input_flags(CLI::App* app, InputFlags& f, bool with_files);
Result<std::shared_ptr<Model>> load_model(const ModelFlags& f);

// What a command needs before it runs: the model, each input's shape and (when asked) the inputs.
// The flags' files are checked before the model loads; each dimension filled in by itself is
// printed on stderr (fill_dynamic_dims).
struct Prepared {
  std::shared_ptr<Model> model;
  std::vector<Shape> shapes;
  std::vector<Tensor> inputs;
};
Result<Prepared> prepare(const ModelFlags& mf, const InputFlags& in, bool with_inputs);

// Shapes for every model input: an --input file's shape (the truth), else --shape, else the
// model's declared dims with the dynamic ones filled (fill_dynamic_dims). A --shape that
// contradicts an --input file is ignored. `notes` (optional) receives a line per dimension filled
// and per --shape ignored.
Result<std::vector<Shape>> resolve_shapes(const Model& model, const InputFlags& flags,
                                          std::vector<std::string>* notes = nullptr);
// Input tensors: from --input files where given, else seeded random values (floats in [-1, 1),
// integers in [0, 1000), bools 0/1).
Result<std::vector<Tensor>> make_inputs(const Model& model, const InputFlags& flags, const std::vector<Shape>& shapes);
// ResourceExhausted when the tensor does not fit in memory.
Result<Tensor> random_tensor(DType dtype, const Shape& shape, uint32_t seed);

// Percentile (0..100) of unsorted samples, linear interpolation.
double percentile(std::vector<double> v, double p);
std::string json_escape(const std::string& s);
// Prints rows with columns padded to the widest cell.
void print_table(const std::vector<std::vector<std::string>>& rows);
std::string fmt(double v, int digits = 3);

}  // namespace streamline::tools
