#include "support/compress.hpp"

#include <brotli/encode.h>
#include <zlib.h>

#include <cstdint>
#include <stdexcept>

namespace sandgate::test {

namespace {

// zlib's deflate with `window`: 15 + 16 gzip, 15 zlib-wrapped, -15 raw.
std::string zlib_encode(std::string_view plain, int window) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, window, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2");
  }
  std::string out(deflateBound(&z, static_cast<uLong>(plain.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  z.avail_in = static_cast<uInt>(plain.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("deflate");
  return out;
}

}  // namespace

std::string gzip_encode(std::string_view plain) {
  return zlib_encode(plain, 15 + 16);
}
std::string zlib_deflate_encode(std::string_view plain) {
  return zlib_encode(plain, 15);
}
std::string raw_deflate_encode(std::string_view plain) {
  return zlib_encode(plain, -15);
}

std::string brotli_encode(std::string_view plain) {
  std::size_t size = BrotliEncoderMaxCompressedSize(plain.size()) + 16;
  std::string out(size, '\0');
  if (!BrotliEncoderCompress(BROTLI_DEFAULT_QUALITY, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC,
                             plain.size(), reinterpret_cast<const std::uint8_t*>(plain.data()),
                             &size, reinterpret_cast<std::uint8_t*>(out.data()))) {
    throw std::runtime_error("BrotliEncoderCompress");
  }
  out.resize(size);
  return out;
}

}  // namespace sandgate::test
