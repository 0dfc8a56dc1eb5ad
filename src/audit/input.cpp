#include "audit/input.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace sandgate::audit {

namespace {

constexpr std::size_t kMinBuffer = 1U << 20;
constexpr std::size_t kInflateInput = 256U * 1024U;

// Bytes of one input, plain or gzip (told apart by the gzip magic in the first bytes read):
// a plain input is read straight into the caller's buffer; a gzip one is inflated into it,
// member after member.
class Source {
 public:
  explicit Source(int fd) : fd_(fd) {}
  ~Source() {
    if (gzip_) inflateEnd(&z_);
    ::close(fd_);
  }
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;

  bool compressed() const { return gzip_; }
  const std::string& error() const { return error_; }

  // Up to n bytes into dst; 0 at the end of the input or on an error (error() says which).
  std::size_t read(char* dst, std::size_t n) {
    if (!started_) {
      started_ = true;
      const std::size_t got = raw_read(dst, n);
      if (got >= 2 && static_cast<unsigned char>(dst[0]) == 0x1F &&
          static_cast<unsigned char>(dst[1]) == 0x8B) {
        in_.assign(dst, dst + got);
        in_.resize(std::max(in_.size(), kInflateInput));
        in_len_ = got;
        if (inflateInit2(&z_, 15 + 16) != Z_OK) {
          error_ = "cannot start zlib";
          return 0;
        }
        gzip_ = true;
      } else {
        return got;
      }
    }
    return gzip_ ? inflate_some(dst, n) : raw_read(dst, n);
  }

 private:
  std::size_t raw_read(char* dst, std::size_t n) {
    for (;;) {
      const ssize_t got = ::read(fd_, dst, n);
      if (got >= 0) return static_cast<std::size_t>(got);
      if (errno == EINTR) continue;
      error_ = std::strerror(errno);
      return 0;
    }
  }

  std::size_t inflate_some(char* dst, std::size_t n) {
    z_.next_out = reinterpret_cast<Bytef*>(dst);
    z_.avail_out = static_cast<uInt>(std::min<std::size_t>(n, 1U << 30));
    for (;;) {  // until some bytes come out, or the input ends
      if (z_.avail_in == 0) {
        if (in_len_ == 0 && !eof_) {
          in_len_ = raw_read(in_.data(), in_.size());
          if (in_len_ == 0) eof_ = true;
        }
        if (in_len_ == 0) {
          if (!error_.empty()) return 0;
          if (mid_member_) error_ = "unexpected end of file (gzip stream cut short)";
          return 0;
        }
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(in_len_);
        in_len_ = 0;
      }
      mid_member_ = true;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        mid_member_ = false;
        inflateReset(&z_);  // another member may follow (cat a.gz b.gz)
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        error_ = z_.msg != nullptr ? z_.msg : "invalid gzip data";
        return 0;
      }
      if (z_.next_out != reinterpret_cast<Bytef*>(dst)) break;
    }
    return static_cast<std::size_t>(reinterpret_cast<char*>(z_.next_out) - dst);
  }

  int fd_;
  bool started_ = false;
  bool gzip_ = false;
  bool eof_ = false;
  bool mid_member_ = false;
  z_stream z_{};
  std::vector<char> in_;
  std::size_t in_len_ = 0;  // bytes in in_ not yet handed to zlib
  std::string error_;
};

}  // namespace

InputSummary read_lines(const std::string& path, std::size_t max_line_bytes, LineSink& sink) {
  InputSummary summary;
  summary.name = path;
  const int fd = path == "-" ? ::dup(STDIN_FILENO) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    summary.error = std::strerror(errno);
    return summary;
  }
  Source source(fd);

  std::vector<char> buffer(std::max(kMinBuffer, max_line_bytes + 64 * 1024));
  std::size_t have = 0;   // bytes of an unfinished line at the front of buffer
  bool skipping = false;  // inside a line already counted as too long
  const auto deliver = [&](std::string_view text) {
    ++summary.lines;
    if (text.size() > max_line_bytes) {
      sink.too_long();
    } else {
      sink.line(text);
    }
  };
  for (;;) {
    const std::size_t n = source.read(buffer.data() + have, buffer.size() - have);
    if (n == 0) break;  // the end, or an error (source.error())
    summary.bytes += n;
    const char* data = buffer.data();
    const std::size_t end = have + n;
    std::size_t start = 0;
    std::size_t scan = have;
    while (const void* nl = std::memchr(data + scan, '\n', end - scan)) {
      const auto at = static_cast<std::size_t>(static_cast<const char*>(nl) - data);
      if (skipping) {
        skipping = false;
      } else {
        deliver(std::string_view(data + start, at - start));
      }
      start = scan = at + 1;
    }
    const std::size_t rest = end - start;
    if (skipping) {
      have = 0;
    } else if (rest > max_line_bytes) {
      ++summary.lines;
      sink.too_long();
      skipping = true;
      have = 0;
    } else {
      std::memmove(buffer.data(), data + start, rest);
      have = rest;
    }
  }
  if (!skipping && have > 0) deliver(std::string_view(buffer.data(), have));
  summary.compressed = source.compressed();
  summary.error = source.error();
  return summary;
}

}  // namespace sandgate::audit
