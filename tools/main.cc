// streamline: the command-line front end.
//
//   streamline --version
//   streamline run MODEL [--input NAME=FILE.npy ...] [--shape NAME=d0,d1,...] [--batch N] [--threads N] [--output-dir DIR]
//   streamline bench MODEL [--shape ...] [--batch N] [--threads N] [--seconds T] [--warmup T] [--json]
//   streamline plan MODEL [--shape ...] [--json | --dot]

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "commands.h"
#include "streamline/streamline.h"

namespace {

// OpenMP reads its wait policy when the library loads, before main. libgomp's default lets idle
// workers spin for a long time (300,000 rounds), which collapses when the machine is shared: a
// 2-thread MobileNetV2 run went from 65 ms to over 500 ms under load. Passive waiting (sleep at
// once) avoids that but pays a futex wake-up for every parallel region, and oneDNN's AVX2
// convolutions open several per call: ResNet-50 on 2 threads ran 1.5x faster than on one thread
// with passive waiting and 1.87x with spinning. So unless the user chose a policy, restart once
// with a short spin (about a millisecond) before a worker sleeps.
constexpr const char* kSpinCount = "20000";

void prefer_short_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT") || std::getenv("SL_OPENMP_SET")) return;
  setenv("GOMP_SPINCOUNT", kSpinCount, 1);
  setenv("SL_OPENMP_SET", "1", 1);
  execv("/proc/self/exe", argv);
  // execv only returns on failure; carry on with the default policy.
}

}  // namespace

int main(int argc, char** argv) {
  prefer_short_spin(argv);
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
  add(&streamline::tools::add_perf_command);
  add(&streamline::tools::add_serve_command);
  add(&streamline::tools::add_classify_command);
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
