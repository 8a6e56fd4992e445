#pragma once
// The streamline CLI's subcommands. Each registers its flags on a CLI11 app and returns a runner.

#include <CLI/CLI.hpp>
#include <functional>

namespace streamline::tools {

using Runner = std::function<int()>;

Runner add_run_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
Runner add_plan_command(CLI::App& app);
Runner add_conformance_command(CLI::App& app);
Runner add_perf_command(CLI::App& app);
Runner add_serve_command(CLI::App& app);
Runner add_classify_command(CLI::App& app);
Runner add_tune_command(CLI::App& app);

}  // namespace streamline::tools
