// `streamline run`: one inference, outputs written as .npy.

#include <chrono>
#include <filesystem>
#include <iostream>

#include "cli_common.h"
#include "commands.h"
#include "core/npy.h"

namespace streamline::tools {
namespace {

struct RunFlags {
  std::string model;
  InputFlags in;
  int threads = 0;
  std::string output_dir;
  bool no_optimize = false;
};

int run_once(const RunFlags& f) {
  ModelOptions mo;
  mo.optimize = !f.no_optimize;
  mo.num_threads = f.threads;
  auto model = Model::load(f.model, mo);
  if (!model.ok()) {
    std::cerr << "error: " << model.status().to_string() << std::endl;
    return 2;
  }
  auto shapes = resolve_shapes(**model, f.in);
  if (!shapes.ok()) {
    std::cerr << "error: " << shapes.status().to_string() << std::endl;
    return 2;
  }
  auto inputs = make_inputs(**model, f.in, *shapes);
  if (!inputs.ok()) {
    std::cerr << "error: " << inputs.status().to_string() << std::endl;
    return 2;
  }
  const auto p0 = std::chrono::steady_clock::now();
  auto plan = (*model)->plan_for(*shapes);
  if (!plan.ok()) {
    std::cerr << "error: " << plan.status().to_string() << std::endl;
    return 2;
  }
  const double plan_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p0).count();
  Session session(*model);
  const auto t0 = std::chrono::steady_clock::now();
  auto outs = session.run(*inputs);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!outs.ok()) {
    std::cerr << "error: " << outs.status().to_string() << std::endl;
    return 1;
  }
  if (!f.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.output_dir, ec);
    if (ec) {
      std::cerr << "error: cannot create '" << f.output_dir << "': " << ec.message() << std::endl;
      return 2;
    }
  }
  std::vector<std::vector<std::string>> rows{{"output", "dtype", "shape"}};
  for (size_t i = 0; i < outs->size(); ++i) {
    const auto& desc = (*model)->outputs()[i];
    const Tensor& t = (*outs)[i];
    rows.push_back({desc.name, dtype_name(t.dtype()), t.shape().to_string()});
    if (!f.output_dir.empty()) {
      std::string file = desc.name;
      for (char& c : file)
        if (c == '/' || c == '\\' || c == ':') c = '_';
      const Status s = write_npy((std::filesystem::path(f.output_dir) / (file + ".npy")).string(), t);
      if (!s.ok()) {
        std::cerr << "error: " << s.to_string() << std::endl;
        return 1;
      }
    }
  }
  print_table(rows);
  std::cout << "plan: " << fmt(plan_ms) << " ms, run: " << fmt(ms) << " ms (first run)" << std::endl;
  return 0;
}

}  // namespace

Runner add_run_command(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* c = app.add_subcommand("run", "Run a model once and write its outputs");
  c->add_option("model", f->model, "ONNX model file")->required();
  c->add_option("--input", f->in.inputs, "NAME=FILE.npy input (repeatable)");
  c->add_option("--shape", f->in.shapes, "NAME=d0,d1,... input shape (repeatable)");
  c->add_option("--batch", f->in.batch, "Batch size for symbolic first dimensions");
  c->add_option("--threads", f->threads, "Intra-op threads (default: all cores)");
  c->add_option("--output-dir", f->output_dir, "Write each output as DIR/NAME.npy");
  c->add_option("--seed", f->in.seed, "Seed for random inputs");
  c->add_flag("--no-optimize", f->no_optimize, "Turn graph passes off (debugging)");
  return [f] { return run_once(*f); };
}

}  // namespace streamline::tools
