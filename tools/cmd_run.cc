// `streamline run`: one inference, outputs written as .npy.

#include <chrono>
#include <filesystem>
#include <iostream>
#include <limits>

#include "cli_common.h"
#include "cli_flags.h"
#include "commands.h"
#include "core/npy.h"
#include "exec/trace.h"
#include "preflight.h"

namespace streamline::tools {
namespace {

struct RunFlags {
  ModelFlags model;
  InputFlags in;
  std::string output_dir;
  std::string trace;
};

int run_once(const RunFlags& f) {
  if (!f.trace.empty()) {
    if (Status s = check_output_file("--trace", f.trace); !s.ok()) {
      std::cerr << "error: " << s.to_string() << std::endl;
      return kUsageError;
    }
  }
  auto prepared = prepare(f.model, f.in, true);
  if (!prepared.ok()) {
    std::cerr << "error: " << prepared.status().to_string() << std::endl;
    return 2;
  }
  auto* model = &prepared->model;
  auto* shapes = &prepared->shapes;
  auto* inputs = &prepared->inputs;
  const auto p0 = std::chrono::steady_clock::now();
  auto mode = (*model)->execution_mode(*shapes);
  if (!mode.ok()) {
    std::cerr << "error: " << mode.status().to_string() << std::endl;
    return 2;
  }
  if (*mode == ExecutionMode::kEager)
    std::cout << "no plan for these shapes (" << (*model)->eager_reason(*shapes) << "); running node by node"
              << std::endl;
  const double plan_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p0).count();
  Session session(*model);
  exec::TraceRecorder trace;
  RunOptions ro;
  if (!f.trace.empty()) ro.observer = &trace;
  const auto t0 = std::chrono::steady_clock::now();
  auto outs = session.run(*inputs, ro);
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
  if (!f.trace.empty()) {
    const Status s = trace.write(f.trace);
    if (!s.ok()) {
      std::cerr << "error: " << s.to_string() << std::endl;
      return 1;
    }
    std::cout << "trace: " << f.trace << " (open in Perfetto or chrome://tracing)" << std::endl;
  }
  std::cout << "plan: " << fmt(plan_ms) << " ms (" << execution_mode_name(*mode) << "), run: " << fmt(ms)
            << " ms (first run)" << std::endl;
  return 0;
}

}  // namespace

Runner add_run_command(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* c = app.add_subcommand("run", "Run a model once and write its outputs");
  add_model_flags(c, f->model);
  add_input_flags(c, f->in, true);
  c->add_option("--output-dir", f->output_dir, "Write each output as DIR/NAME.npy");
  c->add_option("--seed", f->in.seed, "Seed for random inputs")
      ->check(int_range(0, std::numeric_limits<uint32_t>::max()));
  c->add_option("--trace", f->trace, "Write a Chrome trace-event JSON file of the run");
  return [f] { return run_once(*f); };
}

}  // namespace streamline::tools
