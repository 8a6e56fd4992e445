// streamline: the command-line front end.
//
//   streamline --version
//   streamline run MODEL [--input NAME=FILE.npy ...] [--shape NAME=d0,d1,...] [--batch N] [--threads N] [--output-dir
//   DIR] streamline bench MODEL [--shape ...] [--batch N] [--threads N] [--seconds T] [--warmup T] [--json] streamline
//   plan MODEL [--shape ...] [--json | --dot] (and conformance, serve, perf, classify: `streamline --help`; the
//   commands are in cli_app.cc)

#include <unistd.h>

#include <cstdlib>

#include "cli_app.h"

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
  return streamline::tools::run_command_line(argc, argv);
}
