#pragma once

#include <array>
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
// computes) do not change. Any chunking gives the output of one feed() of the whole.
//
// An occurrence is the needle's bytes as they are, or (THREATS 30) written the way an echo
// commonly escapes text: each needle character may also appear as a JSON escape (`\/`, `\"`,
// `\\`, `\u002b` in either case), a percent escape (`%2B`, `%2b`), or an HTML character
// reference (`&#43;`, `&#x2B;`, `&plus;`, `&amp;`, ...), the forms mixed freely. Escapes are
// preferred where one spells the needle's next character (no backtracking: a needle holding a
// literal `%25` written as `%2525` is not found). Overlapping occurrences are all found.
// Memory: holds back at most the longest needle's longest escaped spelling
// (kMaxSpelling bytes a character).
class Redactor {
 public:
  static constexpr char kFiller = '*';
  // The longest spelling of one character: "&#x" then at most 7 hex digits and ";".
  static constexpr std::size_t kMaxSpelling = 11;

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
  struct Range {
    std::size_t begin = 0, end = 0;  // offsets into held_
  };
  // Finds the occurrences that start in text[from, ...) (into `found`); returns the first
  // start not decided yet (text.size() when all are): an occurrence starting there may end
  // in bytes not seen. `at_end`: no bytes follow `text`, so every start is decided.
  std::size_t scan(std::string_view text, std::size_t from, bool at_end,
                   std::vector<Range>& found) const;

  std::vector<std::string> needles_;
  std::array<bool, 256> starts_{};  // bytes an occurrence of some needle may begin with
  std::string held_;                // original bytes not released yet
  std::size_t next_ = 0;            // offset in held_ of the first start not decided yet
  std::vector<Range> pending_;      // occurrences found, not yet released (offsets in held_)
  std::size_t redactions_ = 0;
};

}  // namespace sandgate::secrets
