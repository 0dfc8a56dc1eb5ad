#include "secrets/response_scrubber.hpp"

#include <brotli/decode.h>
#include <zlib.h>

#include <algorithm>

#include "common/ascii.hpp"

namespace sandgate::secrets {

std::optional<std::vector<Coding>> parse_content_codings(
    std::span<const std::string_view> field_values) {
  std::vector<Coding> out;
  for (std::string_view value : field_values) {
    for (;;) {
      const std::size_t comma = value.find(',');
      const std::string_view member = trim_ows(value.substr(0, comma));
      if (iequals_ascii(member, "gzip") || iequals_ascii(member, "x-gzip")) {
        out.push_back(Coding::gzip);
      } else if (iequals_ascii(member, "deflate")) {
        out.push_back(Coding::deflate);
      } else if (iequals_ascii(member, "br")) {
        out.push_back(Coding::br);
      } else if (!member.empty() && !iequals_ascii(member, "identity")) {
        return std::nullopt;
      }
      if (comma == std::string_view::npos) break;
      value.remove_prefix(comma + 1);
    }
  }
  return out;
}

std::string weakened_etag(std::string_view etag) {
  if (etag.starts_with("W/")) return std::string(etag);
  return "W/" + std::string(etag);
}

// One coding undone step by step. run() decodes what it can of `in` (consuming it from the
// front) into `out`; a stream that reached its end says so on a later call that produces
// nothing (ended), once its input has ended too. Bytes after the end of the stream (other
// than further gzip members) are an error: they would be bytes nobody decoded.
class ResponseScrubber::Decoder {
 public:
  struct Step {
    std::size_t produced = 0;
    bool moved = false;  // it took input or gave output: calling again may get further
    bool ended = false;
    bool error = false;
  };
  virtual ~Decoder() = default;
  virtual Step run(std::string_view& in, bool in_end, std::span<char> out) = 0;
};

namespace {

using Step = ResponseScrubber::Decoder::Step;

// gzip (windowBits 15 + 16) and deflate. deflate is zlib-wrapped by the RFC but sent raw by
// some servers, which browsers accept: the first two bytes decide (a valid zlib header, or
// raw), so they are kept until both are here.
class ZlibDecoder final : public ResponseScrubber::Decoder {
 public:
  explicit ZlibDecoder(bool gzip) : gzip_(gzip) {}
  ~ZlibDecoder() override {
    if (inited_) inflateEnd(&z_);
  }

  Step run(std::string_view& in, bool in_end, std::span<char> out) override {
    Step step;
    const std::size_t had = in.size();
    if (!inited_ && !init(in, in_end, step)) return step;
    step.moved = in.size() != had;
    if (at_end_) {
      if (in.empty()) {
        step.ended = in_end;
        return step;
      }
      // gzip: another member follows (RFC 1952 section 2.2); anything else is trailing junk.
      if (!gzip_ || inflateReset(&z_) != Z_OK) {
        step.error = true;
        return step;
      }
      at_end_ = false;
    }
    const bool from_stash = stash_used_ < stash_.size();
    std::string_view src = from_stash ? std::string_view(stash_).substr(stash_used_) : in;
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(src.data()));
    z_.avail_in = static_cast<uInt>(src.size());
    z_.next_out = reinterpret_cast<Bytef*>(out.data());
    z_.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&z_, Z_NO_FLUSH);
    const std::size_t used = src.size() - z_.avail_in;
    if (from_stash) {
      stash_used_ += used;
    } else {
      in.remove_prefix(used);
    }
    step.produced = out.size() - z_.avail_out;
    step.moved = step.moved || used > 0 || step.produced > 0;
    if (rc == Z_STREAM_END) {
      at_end_ = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      step.error = true;  // Z_DATA_ERROR, Z_NEED_DICT, Z_MEM_ERROR
    }
    return step;
  }

 private:
  // False while deflate waits for its first two bytes (or on an error, in `step`).
  bool init(std::string_view& in, bool in_end, Step& step) {
    int window = 15 + 16;
    if (!gzip_) {
      while (stash_.size() < 2 && !in.empty()) {
        stash_ += in.front();
        in.remove_prefix(1);
      }
      if (stash_.size() < 2) {
        step.error = in_end;  // a deflate stream is never one byte long
        return false;
      }
      const auto cmf = static_cast<unsigned char>(stash_[0]);
      const auto flg = static_cast<unsigned char>(stash_[1]);
      const bool zlib_header = (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && ((cmf << 8) | flg) % 31 == 0;
      window = zlib_header ? 15 : -15;
    }
    if (inflateInit2(&z_, window) != Z_OK) {
      step.error = true;
      return false;
    }
    inited_ = true;
    return true;
  }

  bool gzip_;
  bool inited_ = false;
  bool at_end_ = false;
  z_stream z_{};
  std::string stash_;  // deflate: its first two bytes, fed before `in`
  std::size_t stash_used_ = 0;
};

class BrotliDecoder final : public ResponseScrubber::Decoder {
 public:
  BrotliDecoder() : state_(BrotliDecoderCreateInstance(nullptr, nullptr, nullptr)) {}
  ~BrotliDecoder() override {
    if (state_ != nullptr) BrotliDecoderDestroyInstance(state_);
  }

  Step run(std::string_view& in, bool in_end, std::span<char> out) override {
    Step step;
    if (state_ == nullptr) {
      step.error = true;
      return step;
    }
    if (at_end_) {
      step.error = !in.empty();
      step.ended = in.empty() && in_end;
      return step;
    }
    std::size_t avail_in = in.size();
    const auto* next_in = reinterpret_cast<const std::uint8_t*>(in.data());
    std::size_t avail_out = out.size();
    auto* next_out = reinterpret_cast<std::uint8_t*>(out.data());
    const BrotliDecoderResult rc =
        BrotliDecoderDecompressStream(state_, &avail_in, &next_in, &avail_out, &next_out, nullptr);
    step.moved = avail_in != in.size() || avail_out != out.size();
    in.remove_prefix(in.size() - avail_in);
    step.produced = out.size() - avail_out;
    if (rc == BROTLI_DECODER_RESULT_SUCCESS) at_end_ = true;
    if (rc == BROTLI_DECODER_RESULT_ERROR) step.error = true;
    return step;
  }

 private:
  BrotliDecoderState* state_;
  bool at_end_ = false;
};

}  // namespace

struct ResponseScrubber::Stage {
  std::unique_ptr<Decoder> decoder;
  std::string_view input;  // not consumed yet: the pushed bytes (first stage) or the last
                           // piece of the stage before
  bool input_end = false;  // no input comes after `input`
  bool done = false;       // decoded to its end
  bool full = false;       // its last step filled `out`: more may come without input
  bool stuck = false;      // its last step neither took input nor gave output
  std::array<char, kOutChunk> out;
};

ResponseScrubber::ResponseScrubber(std::vector<std::string> needles, std::vector<Coding> codings,
                                   ScrubLimits limits)
    : redactor_(std::move(needles)), limits_(limits) {
  // Applied first, undone last.
  for (auto it = codings.rbegin(); it != codings.rend(); ++it) {
    auto stage = std::make_unique<Stage>();
    if (*it == Coding::br) {
      stage->decoder = std::make_unique<BrotliDecoder>();
    } else {
      stage->decoder = std::make_unique<ZlibDecoder>(*it == Coding::gzip);
    }
    stages_.push_back(std::move(stage));
  }
}

ResponseScrubber::~ResponseScrubber() = default;
ResponseScrubber::ResponseScrubber(ResponseScrubber&&) noexcept = default;
ResponseScrubber& ResponseScrubber::operator=(ResponseScrubber&&) noexcept = default;

void ResponseScrubber::push(std::string_view encoded, bool last) {
  input_ = encoded;
  input_last_ = last;
  any_input_ = any_input_ || !encoded.empty();
  // An empty body (a 204, a redirect that names a coding) has nothing to decode.
  if (last && !any_input_) {
    for (auto& stage : stages_) stage->done = true;
  }
}

std::string_view ResponseScrubber::run_stage(std::size_t i) {
  Stage& st = *stages_[i];
  for (;;) {
    if (failed() || st.done) return {};
    if (st.input.empty() && !st.input_end && !st.full) {
      if (i == 0) {
        if (input_.empty() && !input_last_) return {};
        st.input = input_;
        st.input_end = input_last_;
        input_ = {};
      } else {
        const std::string_view piece = run_stage(i - 1);
        if (failed()) return {};
        if (piece.empty() && !stages_[i - 1]->done) return {};
        st.input = piece;
        st.input_end = piece.empty();
      }
    }
    const std::size_t before = st.input.size();
    const Decoder::Step step = st.decoder->run(st.input, st.input_end, st.out);
    if (i == 0) encoded_ += before - st.input.size();
    if (step.moved) st.stuck = false;
    st.full = step.produced == st.out.size();
    if (step.error) {
      fail(Failure::corrupt);
      return {};
    }
    if (step.produced > 0) return {st.out.data(), step.produced};
    if (step.ended) {
      st.done = true;
      return {};
    }
    // The decoder neither took input nor gave output although it has all there is (the
    // stream was cut short), or it took none of what it has twice in a row (it would never
    // get further).
    if (!step.moved && ((st.input_end && st.input.empty()) || (!st.input.empty() && st.stuck))) {
      fail(Failure::corrupt);
      return {};
    }
    if (!step.moved) st.stuck = true;
  }
}

std::string_view ResponseScrubber::decoded_piece() {
  if (!stages_.empty()) return run_stage(stages_.size() - 1);
  const std::string_view piece = input_.substr(0, kOutChunk);
  input_.remove_prefix(piece.size());
  encoded_ += piece.size();
  return piece;
}

std::string_view ResponseScrubber::pull() {
  out_.clear();
  while (!failed() && !finished_) {
    const std::string_view piece = decoded_piece();
    if (failed()) return {};
    if (piece.empty()) {
      const bool all_done = stages_.empty() ? input_.empty() && input_last_ : stages_.back()->done;
      if (!all_done) return {};
      out_ = redactor_.finish();
      finished_ = true;
      return out_;
    }
    decoded_ += piece.size();
    if (decoded_ > limits_.free_bytes && decoded_ / limits_.max_ratio > encoded_) {
      fail(Failure::too_large);
      return {};
    }
    out_ = redactor_.feed(piece);
    if (!out_.empty()) return out_;
  }
  return {};
}

void ResponseScrubber::fail(Failure f) {
  failure_ = f;
  out_.clear();
}

}  // namespace sandgate::secrets
