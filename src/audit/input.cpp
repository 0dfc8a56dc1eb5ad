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
constexpr unsigned kZlibBuffer = 256U * 1024U;

std::string zlib_error(gzFile f) {
  int code = Z_OK;
  const char* message = gzerror(f, &code);
  if (code == Z_ERRNO) return std::strerror(errno);
  return message != nullptr && *message != '\0' ? message : "read error";
}

}  // namespace

InputSummary read_lines(const std::string& path, std::size_t max_line_bytes, LineSink& sink) {
  InputSummary summary;
  summary.name = path;
  const int fd = path == "-" ? ::dup(STDIN_FILENO) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    summary.error = std::strerror(errno);
    return summary;
  }
  gzFile f = gzdopen(fd, "rb");
  if (f == nullptr) {
    ::close(fd);
    summary.error = "cannot allocate a zlib stream";
    return summary;
  }
  gzbuffer(f, kZlibBuffer);

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
    const std::size_t room = buffer.size() - have;
    const int n = gzread(f, buffer.data() + have,
                         static_cast<unsigned>(std::min<std::size_t>(room, 1U << 30)));
    if (n < 0) {
      summary.error = zlib_error(f);
      break;
    }
    if (n == 0) {
      // End of input. gzread reports a cut gzip stream only through gzerror.
      int code = Z_OK;
      gzerror(f, &code);
      if (code != Z_OK) summary.error = zlib_error(f);
      break;
    }
    summary.bytes += static_cast<std::uint64_t>(n);
    const char* data = buffer.data();
    const std::size_t end = have + static_cast<std::size_t>(n);
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
  summary.compressed = gzdirect(f) == 0;
  gzclose(f);
  return summary;
}

}  // namespace sandgate::audit
