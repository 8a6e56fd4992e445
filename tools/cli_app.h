#pragma once
// The streamline command line as a function: main() calls it, and tests drive it in-process.
//
//   int main(int argc, char** argv) { return streamline::tools::run_command_line(argc, argv); }
//
// Exit codes (cli_flags.h): 0 done, 1 the work failed, 2 a usage error. A flag CLI11 refuses (an
// unknown flag, a missing argument, a value out of range) prints "error: <flag>: <why>" and a
// pointer to --help on stderr and returns 2; --help prints the help and returns 0.

namespace streamline::tools {

int run_command_line(int argc, const char* const* argv);

}  // namespace streamline::tools
