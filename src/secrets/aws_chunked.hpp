#pragma once

// The body of an S3 streaming upload signed with SigV4 (Content-Encoding: aws-chunked,
// x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]), signed again as it
// streams: each chunk's `chunk-signature` chains from the one before, the first from the
// request's new signature (sigv4::resign), and the trailer's `x-amz-trailer-signature` from the
// last chunk's. What the client sent is otherwise passed on as it came: sizes as it spelled
// them, data, trailers, so the body's length (Content-Length) does not change. Pure: no I/O.
//
// A chunk's new signature covers its data, and goes before it: each chunk is held whole before
// it is passed on, so a chunk may hold at most `max_chunk` bytes (1 MiB unless told; the SDKs
// that sign chunks send 64 or 128 KiB); a larger one, or any framing this format does not
// allow, stops the body.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "secrets/sigv4.hpp"

namespace sandgate::secrets::sigv4 {

class ChunkResigner {
 public:
  static constexpr std::size_t kDefaultMaxChunk = 1024 * 1024;

  // `secret_access_key`: the real key the request was signed again with; `seed_signature`:
  // that request's new signature; `trailer`: the payload mode has a signed trailer.
  ChunkResigner(std::string_view secret_access_key, Scope scope, std::string amz_date,
                std::string seed_signature, bool trailer, std::size_t max_chunk = kDefaultMaxChunk);

  // Takes the next bytes of the client's body; appends to `out` what may be sent on. False
  // when the body breaks the format (then nothing more is accepted; error() says why).
  bool feed(std::string_view in, std::string& out);
  // The whole body has been passed on (the last chunk and the end of the trailer).
  bool finished() const { return state_ == State::done; }
  std::string_view error() const { return error_; }

 private:
  enum class State { header, data, data_end, trailer, done, failed };

  bool fail(std::string why);
  bool on_header_line(std::string_view line, std::string& out);
  bool on_trailer_line(std::string_view line, std::string& out);
  std::string next_signature(std::string_view data);

  SigningKey key_;
  Scope scope_;
  std::string amz_date_;
  std::string previous_;  // the last signature sent
  bool trailer_;
  std::size_t max_chunk_;

  State state_ = State::header;
  std::string line_;          // a header or trailer line being read (bounded)
  std::string size_spelled_;  // the client's spelling of the chunk size
  std::size_t size_ = 0;
  std::string data_;           // the chunk being held
  std::string trailer_lines_;  // "name:value\n" of each trailer read, for its signature
  std::string trailer_out_;    // the trailer as it will be sent, but its signature
  std::string error_;
};

}  // namespace sandgate::secrets::sigv4
