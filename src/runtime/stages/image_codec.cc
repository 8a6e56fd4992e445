// JPEG (libjpeg-turbo) and PNG (libpng's simplified API) decoding and encoding.
//
// libjpeg reports fatal errors through error_exit, which must not return: ours longjmps back to
// the function that called libjpeg. Each such function sets its own jump point before its first
// libjpeg call and keeps no object with a destructor in its frame, so the jump skips nothing that
// C++ would have cleaned up. Warnings (truncated or corrupt data, which libjpeg would otherwise
// patch over with grey) are collected and turned into errors after decoding.
// libpng's simplified API catches its own errors and returns 0 with a message.

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <png.h>

#include "runtime/stages/image_ops.h"

namespace streamline::runtime {
namespace {

struct JpegError {
  jpeg_error_mgr mgr;  // first: libjpeg hands back a pointer to it
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];  // the fatal error
  char warning[JMSG_LENGTH_MAX];  // the first warning
};

void jpeg_on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Called for warnings (and trace messages when tracing); keeps the text instead of printing it.
void jpeg_on_output(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegError*>(c->err);
  if (e->warning[0] == '\0') (*c->err->format_message)(c, e->warning);
}

void init_error(JpegError* e) {
  jpeg_std_error(&e->mgr);
  e->mgr.error_exit = jpeg_on_error;
  e->mgr.output_message = jpeg_on_output;
  e->message[0] = '\0';
  e->warning[0] = '\0';
}

struct JpegDecoder {
  jpeg_decompress_struct cinfo;
  JpegError err;
};

// Reads the header and fixes the output colour space. False on a libjpeg error.
bool jpeg_begin(JpegDecoder* d, const uint8_t* data, size_t size, int channels) {
  if (setjmp(d->err.jump)) return false;
  jpeg_create_decompress(&d->cinfo);
  jpeg_mem_src(&d->cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&d->cinfo, TRUE);
  d->cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_calc_output_dimensions(&d->cinfo);
  return true;
}

// Decodes every row into `out` (row_bytes apart). False on a libjpeg error.
bool jpeg_rows(JpegDecoder* d, uint8_t* out, size_t row_bytes) {
  if (setjmp(d->err.jump)) return false;
  jpeg_start_decompress(&d->cinfo);
  while (d->cinfo.output_scanline < d->cinfo.output_height) {
    JSAMPROW row = out + static_cast<size_t>(d->cinfo.output_scanline) * row_bytes;
    jpeg_read_scanlines(&d->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&d->cinfo);
  return true;
}

struct JpegEncoder {
  jpeg_compress_struct cinfo;
  JpegError err;
  unsigned char* buffer;  // malloc'ed by libjpeg; freed by the caller
  unsigned long size;
};

bool jpeg_encode_rows(JpegEncoder* e, const uint8_t* pixels, int width, int height, int channels, int quality) {
  if (setjmp(e->err.jump)) return false;
  jpeg_create_compress(&e->cinfo);
  jpeg_mem_dest(&e->cinfo, &e->buffer, &e->size);
  e->cinfo.image_width = static_cast<JDIMENSION>(width);
  e->cinfo.image_height = static_cast<JDIMENSION>(height);
  e->cinfo.input_components = channels;
  e->cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&e->cinfo);
  jpeg_set_quality(&e->cinfo, quality, TRUE);
  jpeg_start_compress(&e->cinfo, TRUE);
  const size_t row_bytes = static_cast<size_t>(width) * static_cast<size_t>(channels);
  while (e->cinfo.next_scanline < e->cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels) + static_cast<size_t>(e->cinfo.next_scanline) * row_bytes;
    jpeg_write_scanlines(&e->cinfo, &row, 1);
  }
  jpeg_finish_compress(&e->cinfo);
  return true;
}

Status check_decode_options(const ImageDecodeOptions& o) {
  if (o.channels != 1 && o.channels != 3)
    return invalid_argument("image channels must be 1 or 3, got " + std::to_string(o.channels));
  if (o.max_pixels < 1) return invalid_argument("max_pixels must be >= 1");
  return ok_status();
}

Status check_size(const char* what, int64_t w, int64_t h, const ImageDecodeOptions& o) {
  if (w < 1 || h < 1) return invalid_argument(std::string(what) + " image has no pixels");
  if (w * h > o.max_pixels)
    return invalid_argument(std::string(what) + " image of " + std::to_string(w) + "x" + std::to_string(h) +
                            " pixels is larger than max_pixels (" + std::to_string(o.max_pixels) + ")");
  return ok_status();
}

// uint8 [H, W, C] with C 1 or 3, dims that fit the codecs.
Status check_encodable(const Tensor& t) {
  if (t.dtype() != DType::kUInt8 || t.shape().rank() != 3)
    return invalid_argument("expected uint8 [H, W, C], got " + t.describe());
  const Shape& s = t.shape();
  if (s[2] != 1 && s[2] != 3) return invalid_argument("expected 1 or 3 channels, got " + t.describe());
  if (s[0] < 1 || s[1] < 1 || s[0] > 65500 || s[1] > 65500)
    return invalid_argument("image size out of range: " + t.describe());
  return ok_status();
}

}  // namespace

ImageFormat sniff_image_format(const uint8_t* data, size_t size) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (data && size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::kJpeg;
  if (data && size >= 8 && std::memcmp(data, kPng, 8) == 0) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

Result<Tensor> decode_image(const uint8_t* data, size_t size, const ImageDecodeOptions& options) {
  switch (sniff_image_format(data, size)) {
    case ImageFormat::kJpeg:
      return decode_jpeg(data, size, options);
    case ImageFormat::kPng:
      return decode_png(data, size, options);
    case ImageFormat::kUnknown:
      break;
  }
  std::string head;
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; data && i < std::min<size_t>(size, 4); ++i) {
    head += i ? " " : "";
    head += kHex[data[i] >> 4];
    head += kHex[data[i] & 15];
  }
  return invalid_argument("not a JPEG or PNG image (" + std::to_string(size) + " bytes" +
                          (head.empty() ? std::string() : ", starting " + head) + ")");
}

Result<Tensor> decode_jpeg(const uint8_t* data, size_t size, const ImageDecodeOptions& options) {
  SL_RETURN_IF_ERROR(check_decode_options(options));
  if (!data || size == 0) return invalid_argument("empty JPEG data");
  auto d = std::make_unique<JpegDecoder>();
  std::memset(d.get(), 0, sizeof(JpegDecoder));
  d->cinfo.err = &d->err.mgr;
  init_error(&d->err);
  auto fail = [&](const char* what) -> Status {
    const std::string msg = d->err.message;
    jpeg_destroy_decompress(&d->cinfo);
    return invalid_argument(std::string(what) + ": " + msg);
  };
  if (!jpeg_begin(d.get(), data, size, options.channels)) return fail("invalid JPEG header");
  const int64_t w = d->cinfo.output_width, h = d->cinfo.output_height;
  const int c = d->cinfo.output_components;
  Status st = check_size("JPEG", w, h, options);
  if (st.ok() && c != options.channels)
    st =
        invalid_argument("JPEG decodes to " + std::to_string(c) + " channels, not " + std::to_string(options.channels));
  if (!st.ok()) {
    jpeg_destroy_decompress(&d->cinfo);
    return st;
  }
  Tensor out = Tensor::empty(DType::kUInt8, Shape{h, w, c});
  if (!jpeg_rows(d.get(), out.data<uint8_t>(), static_cast<size_t>(w) * static_cast<size_t>(c)))
    return fail("corrupt JPEG data");
  const long warnings = d->err.mgr.num_warnings;
  const std::string warning = d->err.warning;
  jpeg_destroy_decompress(&d->cinfo);
  if (warnings > 0) return invalid_argument("corrupt JPEG data: " + warning);
  return out;
}

Result<Tensor> decode_png(const uint8_t* data, size_t size, const ImageDecodeOptions& options) {
  SL_RETURN_IF_ERROR(check_decode_options(options));
  if (!data || size == 0) return invalid_argument("empty PNG data");
  // libpng stops reading after the image data; a file cut short after it still lacks its end.
  static constexpr uint8_t kIend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
  if (std::search(data, data + size, kIend, kIend + 12) == data + size)
    return invalid_argument("truncated PNG: no IEND chunk");
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&img, data, size))
    return invalid_argument(std::string("invalid PNG: ") + img.message);
  const Status st = check_size("PNG", img.width, img.height, options);
  if (!st.ok()) {
    png_image_free(&img);
    return st;
  }
  img.format = options.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  // Zeroed, so alpha is composited onto black.
  Tensor out = Tensor::empty(DType::kUInt8, Shape{img.height, img.width, options.channels});
  if (!png_image_finish_read(&img, nullptr, out.raw(), 0, nullptr)) {
    const std::string msg = img.message;
    png_image_free(&img);
    return invalid_argument("corrupt PNG data: " + msg);
  }
  return out;
}

Result<std::vector<uint8_t>> encode_jpeg(const Tensor& hwc, int quality) {
  SL_RETURN_IF_ERROR(check_encodable(hwc));
  if (quality < 1 || quality > 100) return invalid_argument("JPEG quality must be in [1, 100]");
  auto e = std::make_unique<JpegEncoder>();
  std::memset(e.get(), 0, sizeof(JpegEncoder));
  e->cinfo.err = &e->err.mgr;
  init_error(&e->err);
  const Shape& s = hwc.shape();
  const bool ok = jpeg_encode_rows(e.get(), hwc.data<uint8_t>(), static_cast<int>(s[1]), static_cast<int>(s[0]),
                                   static_cast<int>(s[2]), quality);
  std::vector<uint8_t> bytes;
  if (ok && e->buffer) bytes.assign(e->buffer, e->buffer + e->size);
  const std::string msg = e->err.message;
  jpeg_destroy_compress(&e->cinfo);
  std::free(e->buffer);
  if (!ok) return internal_error("JPEG encoding failed: " + msg);
  return bytes;
}

Result<std::vector<uint8_t>> encode_png(const Tensor& hwc) {
  SL_RETURN_IF_ERROR(check_encodable(hwc));
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(hwc.shape()[1]);
  img.height = static_cast<png_uint_32>(hwc.shape()[0]);
  img.format = hwc.shape()[2] == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_get_memory_size(img, size, 0, hwc.raw(), 0, nullptr))
    return internal_error(std::string("PNG encoding failed: ") + img.message);
  std::vector<uint8_t> bytes(size);
  if (!png_image_write_to_memory(&img, bytes.data(), &size, 0, hwc.raw(), 0, nullptr))
    return internal_error(std::string("PNG encoding failed: ") + img.message);
  bytes.resize(size);
  return bytes;
}

}  // namespace streamline::runtime
