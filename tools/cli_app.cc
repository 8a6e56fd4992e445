#include "cli_app.h"

#include <iostream>
#include <utility>
#include <vector>

#include "cli_flags.h"
#include "commands.h"
#include "runtime/device.h"
#include "streamline/streamline.h"

namespace streamline::tools {

int run_command_line(int argc, const char* const* argv) {
  CLI::App app{"streamline: ONNX inference runtime"};
  app.require_subcommand(0, 1);
  // The backends (cpu, eager, cuda when built) are registered once, before any command or flag
  // looks one up.
  if (Status s = runtime::init_backends(); !s.ok()) {
    std::cerr << "error: " << s.to_string() << std::endl;
    return kRunFailed;
  }
  bool version = false;
  app.add_flag("--version", version, "Print the version and the backends compiled in");
  std::vector<std::pair<CLI::App*, Runner>> commands;
  auto add = [&](Runner (*fn)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    Runner r = fn(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(r));
  };
  add(&add_run_command);
  add(&add_bench_command);
  add(&add_plan_command);
  add(&add_conformance_command);
  add(&add_perf_command);
  add(&add_serve_command);
  add(&add_classify_command);
  add(&add_tune_command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help
    std::string where = "streamline";
    for (const auto& [sub, runner] : commands)
      if (sub->parsed()) where += " " + sub->get_name();
    std::cerr << "error: " << e.what() << "\n(" << where << " --help lists the flags)" << std::endl;
    return kUsageError;
  }
  if (version) {
    std::cout << "streamline " << version_string() << std::endl;
    return kExitOk;
  }
  for (auto& [sub, runner] : commands)
    if (sub->parsed()) return runner();
  std::cout << app.help() << std::endl;
  return kExitOk;
}

}  // namespace streamline::tools
