#pragma once
// Bounded echoes of client input in error messages: a name, a shape or a path a client sent comes
// back in the error text, but never more than a few hundred bytes of it, so a hostile request
// (a 100,000-dim shape, a megabyte-long name) cannot make the error itself large.
//
//   invalid_argument("unknown model '" + echo(name) + "'");   // "aaaa... (9744 more)"
//   "shape " + dims_text(dims)                                 // "[1,2,3,... (99997 more)]"
//   reply(cap_message(status.message()));                      // the last guard, at the boundary
//   entry.set_reason(valid_utf8(reason));                       // "bad byte \xff" -> "bad byte ?"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace streamline::serve {

// The most bytes of one client-supplied string an error message repeats.
constexpr size_t kMaxEcho = 256;
// The most dims of a client-supplied shape an error message lists.
constexpr size_t kMaxEchoDims = 16;
// The longest error message a front end sends.
constexpr size_t kMaxErrorMessage = 4096;

// `s` when it has at most `limit` bytes; else its first `limit` bytes (never cutting a UTF-8
// sequence) and "... (N more)", N the bytes left out.
std::string echo(std::string_view s, size_t limit = kMaxEcho);

// "[d0,d1,...]" listing at most `limit` dims, then "... (N more)" for the rest.
std::string dims_text(const std::vector<int64_t>& dims, size_t limit = kMaxEchoDims);

// The whole message capped at kMaxErrorMessage bytes the same way and made valid UTF-8; front
// ends apply it to every error they send.
std::string cap_message(std::string_view message);

// `s` with each byte that does not belong to a valid UTF-8 sequence replaced by '?'. JSON and
// protobuf strings must be UTF-8, and a reason or a name may quote bytes of a file or a request.
std::string valid_utf8(std::string_view s);

}  // namespace streamline::serve
