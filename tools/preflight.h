#pragma once
// Checks a command makes before its slow work (loading models, running cases), so that a
// missing file or a busy port fails at once, naming the flag:
//
//   SL_RETURN_IF_ERROR(check_input_file("--labels", f.labels));
//   SL_RETURN_IF_ERROR(check_output_file("--trace", f.trace));
//   SL_RETURN_IF_ERROR(check_port_free("--http-port", "127.0.0.1", 8000));
//
// Each check looks once: a file removed or a port taken afterwards still fails later, where it is
// used, with that code's own message.

#include <string>

#include "core/status.h"

namespace streamline::tools {

// A regular file this process can read. NotFound / InvalidArgument:
//   "--labels: cannot open 'missing.txt': No such file or directory"
[[nodiscard]] Status check_input_file(const std::string& flag, const std::string& path);
// A file this process can create or overwrite: its folder exists and is writable, and the path
// is not a folder. NotFound / InvalidArgument naming the flag.
[[nodiscard]] Status check_output_file(const std::string& flag, const std::string& path);
// Whether a TCP listener could be opened on host:port now. Binds a socket the way the servers
// do (SO_REUSEADDR, on each address the host resolves to) and closes it at once. Port 0 (any
// free port) and negative ports (endpoint off) pass without a look. Unavailable:
//   "--grpc-port: 127.0.0.1:8001 is already in use (choose another port, 0 for any free one, -1 for none)"
[[nodiscard]] Status check_port_free(const std::string& flag, const std::string& host, int port);

}  // namespace streamline::tools
