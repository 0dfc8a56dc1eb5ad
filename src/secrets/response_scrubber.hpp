#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "secrets/redactor.hpp"

namespace sandgate::secrets {

// A content coding sandgate can undo (RFC 9110 section 8.4.1).
enum class Coding {
  gzip,     // also "x-gzip"; several members one after another are decoded in turn
  deflate,  // zlib-wrapped (RFC 1950) or, as browsers tolerate, raw deflate (RFC 1951)
  br,       // brotli (RFC 7932)
};

// The codings of a response's Content-Encoding fields (each may be a comma list), in the
// order they were applied; "identity" and empty members are dropped. nullopt when one of
// them is a coding sandgate cannot decode ("zstd", "compress", anything unknown): such a
// response cannot be scanned, so it is refused.
std::optional<std::vector<Coding>> parse_content_codings(
    std::span<const std::string_view> field_values);

// The ETag of a body passed on decoded: the same validator, weak (RFC 9110 section 8.8.1:
// the bytes differ from the encoded representation's).
std::string weakened_etag(std::string_view etag);

// How far a decoded body may grow: past `free_bytes` decoded bytes, at most `max_ratio`
// decoded bytes per encoded byte read so far. A decompression bomb (gzip reaches ~1000:1,
// brotli far more) is stopped at about free_bytes; an ordinary large compressed body (text
// compresses 3-20:1) is not.
struct ScrubLimits {
  std::uint64_t free_bytes = std::uint64_t{64} << 20;
  std::uint64_t max_ratio = 64;
};

// The body of a response on its way back to the sandbox, from a host a credential is bound
// to (THREATS 22, 30): undoes its content codings as it streams, then runs the Redactor over
// what the sandbox would read once decoded, so a compressed echo of the token is caught as a
// plain one. The caller sends the output decoded (no Content-Encoding, no Content-Length).
//
// Pull-driven, so memory stays bounded whatever the compression ratio: push() one piece of
// the body as received, then call pull() until it returns an empty view, sending each piece
// it returns; then push the next one. Each stage keeps one kOutChunk buffer (plus zlib's or
// brotli's own state: up to 16 MiB for a brotli window the stream asks for). When pull()
// returns empty, failed() says whether the body could not be decoded (corrupt, truncated,
// trailing bytes, past ScrubLimits): the caller then ends the response abruptly; nothing
// undecoded ever comes out. One instance per response; not thread-safe.
class ResponseScrubber {
 public:
  static constexpr std::size_t kOutChunk = 16 * 1024;
  enum class Failure { none, corrupt, too_large };

  // `needles`: the Redactor's (the secret forms). `codings` in the order applied (as
  // parse_content_codings returns them); empty: the body is passed through, redacted.
  ResponseScrubber(std::vector<std::string> needles, std::vector<Coding> codings,
                   ScrubLimits limits = {});
  ~ResponseScrubber();
  ResponseScrubber(ResponseScrubber&&) noexcept;
  ResponseScrubber& operator=(ResponseScrubber&&) noexcept;

  // The next bytes of the body as received (they must stay valid until pull() returns an
  // empty view); `last`: the body ends with them (an empty `encoded` with last is fine).
  void push(std::string_view encoded, bool last);
  // The next piece to send (decoded, redacted), valid until the next call; empty once all
  // that was pushed is out (or the body failed).
  std::string_view pull();

  bool failed() const { return failure_ != Failure::none; }
  Failure failure() const { return failure_; }
  // Whether the whole body is out (last pushed, decoded to its end, the redactor flushed).
  bool finished() const { return finished_; }
  std::uint64_t decoded_bytes() const { return decoded_; }
  std::size_t redactions() const { return redactor_.redactions(); }
  // For a header field's value: same-length redaction, counted with the body's.
  std::string redact(std::string_view value) { return redactor_.redact(value); }

  // One step of one coding (response_scrubber.cpp).
  class Decoder;

 private:
  struct Stage;
  std::string_view decoded_piece();  // the next piece out of the last stage; empty: none now
  std::string_view run_stage(std::size_t i);
  void fail(Failure f);

  Redactor redactor_;
  std::vector<std::unique_ptr<Stage>> stages_;  // in decoding order (the last coding first)
  ScrubLimits limits_;
  std::string_view input_;  // identity: what is left of the pushed bytes
  bool input_last_ = false;
  bool any_input_ = false;
  std::uint64_t encoded_ = 0;
  std::uint64_t decoded_ = 0;
  std::string out_;
  Failure failure_ = Failure::none;
  bool finished_ = false;
};

}  // namespace sandgate::secrets
