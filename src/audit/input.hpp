#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sandgate::audit {

// Receives the lines of one input, in order.
class LineSink {
 public:
  virtual ~LineSink() = default;
  // One line without its '\n' (the last one of an input may lack it).
  virtual void line(std::string_view text) = 0;
  // A line longer than the limit was skipped without being kept in memory.
  virtual void too_long() = 0;
};

// What reading one input came to.
struct InputSummary {
  std::string name;         // the path, or "-" for stdin
  std::uint64_t lines = 0;  // lines handed to the sink, too long ones included
  std::uint64_t bytes = 0;  // bytes read (after decompression)
  bool compressed = false;  // gzip (detected from its content, whatever its name)
  std::string error;        // "" when read to its end
};

// Reads `path` ("-": standard input) line by line; gzip (a rotated `audit.log.1.gz`, several
// members included, on stdin too) is recognised by its magic bytes and inflated with zlib,
// a plain input is read as it is. Memory is one
// buffer of about max(1 MiB, max_line_bytes) whatever the size of the input. A read error or
// a truncated gzip stream ends the input with `error` set; the lines before it count.
InputSummary read_lines(const std::string& path, std::size_t max_line_bytes, LineSink& sink);

}  // namespace sandgate::audit
