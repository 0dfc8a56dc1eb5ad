#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::secrets {

// Removes secrets from a response on its way back to the sandbox (an endpoint that echoes
// the request's headers, an error page quoting them; THREATS 22). Streaming: feed() takes
// each body chunk as it arrives and returns the bytes that may be released now; a secret cut
// in two by a chunk boundary is still found. Every occurrence of every needle is replaced by
// the same number of filler bytes, so lengths (Content-Length, chunk sizes the caller
// computes) do not change. Matching is on the original bytes, overlapping occurrences
// included, so any chunking gives the output of one feed() of the whole. Memory: holds back
// at most (longest needle - 1) bytes. One instance per response; not thread-safe.
class Redactor {
 public:
  static constexpr char kFiller = '*';

  // Empty needles are ignored.
  explicit Redactor(std::vector<std::string> needles);
  ~Redactor();  // wipes its copies of the needles
  Redactor(Redactor&&) = default;
  Redactor& operator=(Redactor&&) = default;

  // The bytes of `chunk` (and of earlier chunks held back) that can be released.
  std::string feed(std::string_view chunk);
  // The bytes still held back; call once at the end of the body.
  std::string finish();

  // Occurrences replaced so far.
  std::size_t redactions() const { return redactions_; }
  std::size_t held() const { return held_.size(); }

  // One-shot, for a header value: the value with every occurrence replaced; adds the count.
  std::string redact(std::string_view value);

 private:
  std::vector<std::string> needles_;
  std::size_t longest_ = 0;
  struct Range {
    std::size_t begin = 0, end = 0;  // offsets into held_
  };
  std::string held_;            // original bytes not released yet
  std::vector<Range> pending_;  // occurrences found, not yet released (offsets in held_)
  std::size_t redactions_ = 0;
};

}  // namespace sandgate::secrets
