// streamline: the command-line front end.
//
//   streamline --version
//   streamline run MODEL [--input NAME=FILE.npy ...] [--shape NAME=d0,d1,...] [--batch N] [--threads N] [--output-dir DIR]
//   streamline bench MODEL [--shape ...] [--batch N] [--threads N] [--seconds T] [--warmup T] [--json]
//   streamline plan MODEL [--shape ...] [--json | --dot]

#include <iostream>

#include "commands.h"
#include "streamline/streamline.h"

int main(int argc, char** argv) {
  CLI::App app{"streamline: ONNX inference runtime"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version and the backends compiled in");
  std::vector<std::pair<CLI::App*, streamline::tools::Runner>> commands;
  auto add = [&](streamline::tools::Runner (*fn)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    auto r = fn(app);
    commands.emplace_back(app.get_subcommands({})[before], std::move(r));
  };
  add(&streamline::tools::add_run_command);
  add(&streamline::tools::add_bench_command);
  add(&streamline::tools::add_plan_command);
  add(&streamline::tools::add_conformance_command);
  CLI11_PARSE(app, argc, argv);
  if (version) {
    std::cout << "streamline " << streamline::version_string() << std::endl;
    return 0;
  }
  for (auto& [sub, runner] : commands)
    if (sub->parsed()) return runner();
  std::cout << app.help() << std::endl;
  return 0;
}
