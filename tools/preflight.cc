#include "preflight.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace streamline::tools {
namespace {

std::string in_quotes(const std::string& path) {
  return "'" + path + "'";
}

Status from_errno(const std::string& flag, const std::string& what, int err) {
  const std::string text = flag + ": " + what + ": " + std::strerror(err);
  return err == ENOENT || err == ENOTDIR ? not_found(text) : invalid_argument(text);
}

}  // namespace

Status check_input_file(const std::string& flag, const std::string& path) {
  if (path.empty()) return invalid_argument(flag + ": the file name is empty");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return from_errno(flag, "cannot open " + in_quotes(path), errno);
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  ::close(fd);
  if (!regular) return invalid_argument(flag + ": " + in_quotes(path) + " is not a regular file");
  return ok_status();
}

Status check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty()) return invalid_argument(flag + ": the file name is empty");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return invalid_argument(flag + ": " + in_quotes(path) + " is a folder");
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return from_errno(flag, "cannot write " + in_quotes(path) + ": folder " + in_quotes(dir.string()), errno);
  if (!S_ISDIR(st.st_mode))
    return invalid_argument(flag + ": cannot write " + in_quotes(path) + ": " + in_quotes(dir.string()) +
                            " is not a folder");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return from_errno(flag, "cannot write " + in_quotes(path) + ": folder " + in_quotes(dir.string()), errno);
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0)
    return from_errno(flag, "cannot write " + in_quotes(path), errno);
  return ok_status();
}

Status check_port_free(const std::string& flag, const std::string& host, int port) {
  if (port <= 0) return ok_status();
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  const std::string where =
      (name.find(':') != std::string::npos ? "[" + name + "]" : name) + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(name.empty() ? nullptr : name.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) return unavailable(flag + ": cannot resolve " + in_quotes(name) + ": " + ::gai_strerror(rc));
  // The first address is the one an HTTP listener takes; gRPC takes every one. Any address
  // in use fails; other errors fail only when no address can be bound at all.
  int first_error = 0;
  bool any_bound = false;
  bool in_use = false;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      if (!first_error) first_error = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0) {
      any_bound = true;
    } else {
      if (errno == EADDRINUSE) in_use = true;
      if (!first_error) first_error = errno;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (in_use)
    return unavailable(flag + ": " + where +
                       " is already in use (choose another port, 0 for any free one, -1 for none)");
  if (!any_bound)
    return unavailable(flag + ": cannot listen on " + where + ": " + std::strerror(first_error ? first_error : EINVAL));
  return ok_status();
}

}  // namespace streamline::tools
