#pragma once
// The live dashboard's files (src/serve/dashboard/*.html, *.js, *.css), embedded in the binary at
// build time (cmake/embed_files.cmake), so the page needs no files beside the server and works
// offline (no CDN, no npm).
//
//   const EmbeddedFile* f = dashboard_file("/dashboard/dashboard.js");
//   if (f) respond(200, std::string_view(f->data, f->size), f->content_type);

#include <cstddef>
#include <span>
#include <string_view>

namespace streamline::serve {

struct EmbeddedFile {
  const char* path;           // "/dashboard/index.html"
  const unsigned char* data;  // the file's bytes (static storage)
  size_t size;
  const char* content_type;  // "text/html; charset=utf-8", ...
};

// Every embedded file (generated source).
std::span<const EmbeddedFile> dashboard_files();

// The file served at `path`; "/dashboard" and "/dashboard/" give index.html. Null when none.
inline const EmbeddedFile* dashboard_file(std::string_view path) {
  if (path == "/dashboard" || path == "/dashboard/") path = "/dashboard/index.html";
  for (const EmbeddedFile& f : dashboard_files())
    if (path == f.path) return &f;
  return nullptr;
}

}  // namespace streamline::serve
