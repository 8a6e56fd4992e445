#include "core/npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/utf8.h"

namespace streamline {
namespace {

const char* descr_for(DType t) {
  switch (t) {
    case DType::kFloat32: return "<f4";
    case DType::kFloat64: return "<f8";
    case DType::kFloat16: return "<f2";
    case DType::kInt64: return "<i8";
    case DType::kInt32: return "<i4";
    case DType::kInt16: return "<i2";
    case DType::kInt8: return "|i1";
    case DType::kUInt64: return "<u8";
    case DType::kUInt32: return "<u4";
    case DType::kUInt16: return "<u2";
    case DType::kUInt8: return "|u1";
    case DType::kBool: return "|b1";
    default: return nullptr;
  }
}

DType dtype_for(const std::string& d) {
  static const struct { const char* d; DType t; } kMap[] = {
      {"f4", DType::kFloat32}, {"f8", DType::kFloat64}, {"f2", DType::kFloat16}, {"i8", DType::kInt64},
      {"i4", DType::kInt32},   {"i2", DType::kInt16},   {"i1", DType::kInt8},    {"u8", DType::kUInt64},
      {"u4", DType::kUInt32},  {"u2", DType::kUInt16},  {"u1", DType::kUInt8},   {"b1", DType::kBool},
  };
  if (d.size() != 3 || (d[0] != '<' && d[0] != '|' && d[0] != '=')) return DType::kUndefined;
  for (const auto& m : kMap)
    if (d.substr(1) == m.d) return m.t;
  return DType::kUndefined;
}

// Width of a fixed-width string descr: "<U7" -> ('U', 7), "|S3" -> ('S', 3); kind 0 otherwise.
std::pair<char, int64_t> string_descr(const std::string& d) {
  if (d.size() < 3 || (d[1] != 'U' && d[1] != 'S')) return {0, 0};
  if (d[1] == 'U' && d[0] != '<' && d[0] != '|' && d[0] != '=') return {0, 0};
  if (d[1] == 'S' && d[0] != '|') return {0, 0};
  int64_t width = 0;
  for (size_t i = 2; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9' || width > (int64_t{1} << 30)) return {0, 0};
    width = width * 10 + (d[i] - '0');
  }
  return {d[1], width};
}

// Fills a string tensor from fixed-width elements: 'U' is UTF-32 little-endian (written as UTF-8),
// 'S' raw bytes; trailing NULs are padding.
void read_strings(Tensor& t, const char* data, char kind, int64_t width) {
  const size_t unit = kind == 'U' ? 4 : 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const char* e = data + static_cast<size_t>(i * width) * unit;
    std::string& out = t.strings()[i];
    if (kind == 'S') {
      out.assign(e, static_cast<size_t>(width));
      out.erase(out.find_last_not_of('\0') + 1);
      continue;
    }
    std::u32string cps;
    for (int64_t k = 0; k < width; ++k) {
      uint32_t cp = 0;
      std::memcpy(&cp, e + static_cast<size_t>(k) * 4, 4);
      cps.push_back(cp);
    }
    while (!cps.empty() && cps.back() == 0) cps.pop_back();
    out = utf8_encode(cps);
  }
}

}  // namespace

Result<Tensor> parse_npy(const std::string& bytes, const std::string& what) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    return invalid_argument(what + ": not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return invalid_argument(what + ": truncated .npy header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    offset = 12;
  } else {
    return invalid_argument(what + ": unsupported .npy version " + std::to_string(major));
  }
  if (offset + header_len > bytes.size()) return invalid_argument(what + ": truncated .npy header");
  const std::string header = bytes.substr(offset, header_len);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr'\\s*:\\s*'([^']*)'")))
    return invalid_argument(what + ": .npy header has no descr");
  const auto [str_kind, str_width] = string_descr(m[1].str());
  const DType dt = str_kind ? DType::kString : dtype_for(m[1].str());
  if (dt == DType::kUndefined) return unsupported(what + ": .npy dtype '" + m[1].str() + "' is not supported");
  if (std::regex_search(header, m, std::regex("'fortran_order'\\s*:\\s*True")))
    return unsupported(what + ": Fortran-ordered .npy arrays are not supported");
  if (!std::regex_search(header, m, std::regex("'shape'\\s*:\\s*\\(([^)]*)\\)")))
    return invalid_argument(what + ": .npy header has no shape");
  Shape shape;
  std::stringstream ss(m[1].str());
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str() + b, &end, 10);
    if (v < 0) return invalid_argument(what + ": negative dimension in .npy shape");
    shape.push_back(v);
  }
  const size_t data_off = offset + header_len;
  if (dt == DType::kString) {
    // Check the size before allocating one std::string per element.
    const size_t unit = str_kind == 'U' ? 4 : 1;
    const auto n = static_cast<size_t>(shape.numel());
    const size_t room = (bytes.size() - data_off) / unit;
    // Zero-width strings carry no bytes; bound their count all the same.
    if ((str_width > 0 && room / static_cast<size_t>(str_width) < n) || (str_width == 0 && n > (size_t{1} << 24)))
      return invalid_argument(what + ": .npy data is truncated (" + std::to_string(bytes.size() - data_off) +
                              " bytes for " + std::to_string(shape.numel()) + " strings of width " +
                              std::to_string(str_width) + ")");
    Tensor t = Tensor::empty(DType::kString, shape);
    if (!t.defined()) return resource_exhausted(what + ": cannot allocate " + t.describe());
    read_strings(t, bytes.data() + data_off, str_kind, str_width);
    return t;
  }
  Tensor t = Tensor::empty(dt, shape);
  if (bytes.size() - data_off < t.nbytes())
    return invalid_argument(what + ": .npy data is truncated (" + std::to_string(bytes.size() - data_off) +
                            " bytes for " + t.describe() + ")");
  if (t.nbytes()) std::memcpy(t.raw(), bytes.data() + data_off, t.nbytes());
  return t;
}

Result<Tensor> read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_npy(ss.str(), path);
}

Status write_npy(const std::string& path, const Tensor& t) {
  // Strings are written as NumPy unicode ('<U<width>', UTF-32 padded to the longest element).
  std::u32string str_data;
  std::string str_descr;
  if (t.dtype() == DType::kString) {
    std::vector<std::u32string> cps;
    size_t width = 1;
    for (int64_t i = 0; i < t.numel(); ++i) {
      cps.push_back(utf8_decode(t.strings()[i]));
      width = std::max(width, cps.back().size());
    }
    for (std::u32string& c : cps) {
      c.resize(width, U'\0');
      str_data += c;
    }
    str_descr = "<U" + std::to_string(width);
  }
  const char* descr = t.dtype() == DType::kString ? str_descr.c_str() : descr_for(t.dtype());
  if (!descr) return unsupported(std::string("cannot write dtype ") + dtype_name(t.dtype()) + " to .npy");
  if (t.layout() != Layout::kPlain) return invalid_argument("write_npy needs a plain-layout tensor");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().rank(); ++i) shape += std::to_string(t.shape()[i]) + ", ";
  if (t.shape().rank() > 1) shape.erase(shape.size() - 2, 1);  // "(2, 3)" not "(2, 3, )"
  if (t.shape().rank() > 1) shape.pop_back();
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) return unavailable("cannot write '" + path + "'");
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char lenb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(lenb, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (t.dtype() == DType::kString)
    f.write(reinterpret_cast<const char*>(str_data.data()), static_cast<std::streamsize>(str_data.size() * 4));
  else
    f.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  if (!f) return unavailable("short write to '" + path + "'");
  return ok_status();
}

}  // namespace streamline
