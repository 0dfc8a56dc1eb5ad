#include "secrets/aws_chunked.hpp"

#include <utility>

#include "common/ascii.hpp"

namespace sandgate::secrets::sigv4 {
namespace {

constexpr std::size_t kMaxHeaderLine = 256;
constexpr std::size_t kMaxTrailerLine = 1024;
constexpr std::size_t kMaxTrailer = 8192;
constexpr std::string_view kChunkSignature = ";chunk-signature=";
constexpr std::string_view kTrailerSignature = "x-amz-trailer-signature";

}  // namespace

ChunkResigner::ChunkResigner(std::string_view secret_access_key, Scope scope, std::string amz_date,
                             std::string seed_signature, bool trailer, std::size_t max_chunk)
    : key_(secret_access_key, scope),
      scope_(std::move(scope)),
      amz_date_(std::move(amz_date)),
      previous_(std::move(seed_signature)),
      trailer_(trailer),
      max_chunk_(max_chunk) {}

bool ChunkResigner::fail(std::string why) {
  state_ = State::failed;
  error_ = std::move(why);
  return false;
}

std::string ChunkResigner::next_signature(std::string_view data) {
  previous_ = key_.sign(chunk_string_to_sign(amz_date_, scope_, previous_, data));
  return previous_;
}

bool ChunkResigner::feed(std::string_view in, std::string& out) {
  while (!in.empty()) {
    switch (state_) {
      case State::failed:
        return false;
      case State::done:
        return fail("bytes after the end of the aws-chunked body");
      case State::data: {
        const std::size_t take = std::min(size_ - data_.size(), in.size());
        data_.append(in.substr(0, take));
        in.remove_prefix(take);
        if (data_.size() == size_) state_ = State::data_end;
        break;
      }
      case State::data_end: {
        line_ += in.front();
        in.remove_prefix(1);
        if (line_.size() < 2) break;
        if (line_ != "\r\n") return fail("a chunk's data does not end in CRLF");
        line_.clear();
        out += size_spelled_;
        out += kChunkSignature;
        out += next_signature(data_);
        out += "\r\n";
        out += data_;
        out += "\r\n";
        data_.clear();
        state_ = State::header;
        break;
      }
      case State::header:
      case State::trailer: {
        const std::size_t limit = state_ == State::header ? kMaxHeaderLine : kMaxTrailerLine;
        const std::size_t lf = in.find('\n');
        const std::size_t take = lf == std::string_view::npos ? in.size() : lf + 1;
        line_.append(in.substr(0, take));
        in.remove_prefix(take);
        if (line_.size() > limit) return fail("a chunk header or trailer line is too long");
        if (lf == std::string_view::npos) break;
        if (line_.size() < 2 || line_[line_.size() - 2] != '\r') {
          return fail("a line ends in LF without CR");
        }
        const std::string line = line_.substr(0, line_.size() - 2);
        line_.clear();
        if (!(state_ == State::header ? on_header_line(line, out) : on_trailer_line(line, out))) {
          return false;
        }
        break;
      }
    }
  }
  return state_ != State::failed;
}

bool ChunkResigner::on_header_line(std::string_view line, std::string& out) {
  // SIZE;chunk-signature=SIGNATURE, SIZE in hex; no other extension.
  const std::size_t semi = line.find(';');
  if (semi == std::string_view::npos || semi == 0 || semi > 16 ||
      line.substr(semi, kChunkSignature.size()) != kChunkSignature ||
      line.size() != semi + kChunkSignature.size() + 64) {
    return fail("a chunk header is not SIZE;chunk-signature=SIGNATURE");
  }
  std::size_t size = 0;
  for (const char c : line.substr(0, semi)) {
    const int v = hex_value(c);
    if (v < 0) return fail("a chunk size is not hex");
    size = size * 16 + static_cast<std::size_t>(v);
  }
  if (size > max_chunk_) return fail("a chunk is larger than sandgate holds to sign it again");
  size_spelled_ = line.substr(0, semi);
  size_ = size;
  if (size > 0) {
    state_ = State::data;
    return true;
  }
  out += size_spelled_;
  out += kChunkSignature;
  out += next_signature({});
  out += "\r\n";
  state_ = State::trailer;
  return true;
}

bool ChunkResigner::on_trailer_line(std::string_view line, std::string& out) {
  if (line.empty()) {
    if (trailer_) {
      if (trailer_lines_.empty()) return fail("a signed trailer that holds nothing");
      out += trailer_out_;
      out += kTrailerSignature;
      out += ':';
      out += key_.sign(trailer_string_to_sign(amz_date_, scope_, previous_, trailer_lines_));
      out += "\r\n";
    }
    out += "\r\n";
    state_ = State::done;
    return true;
  }
  if (!trailer_) return fail("a trailer where the payload mode has none");
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0)
    return fail("a trailer line is not NAME:VALUE");
  if (iequals_ascii(line.substr(0, colon), kTrailerSignature)) return true;  // ours replaces it
  trailer_lines_ += line;
  trailer_lines_ += '\n';
  trailer_out_ += line;
  trailer_out_ += "\r\n";
  if (trailer_out_.size() > kMaxTrailer) return fail("the trailer is too long");
  return true;
}

}  // namespace sandgate::secrets::sigv4
