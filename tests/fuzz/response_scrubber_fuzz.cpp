// libFuzzer target for the response scrubber (secrets::ResponseScrubber: gzip, deflate and br
// decoding, then the Redactor with its escaped spellings) and for parse_content_codings. The
// first byte picks the codings and the chunking; the rest is the body as a destination would
// send it. Besides "no crash, no sanitizer report" it checks that any chunking gives the same
// outcome as one push of the whole (the same output when both succeed; the ratio bound may cut
// at another point, as it counts the encoded bytes taken so far), that no piece is larger than the
// output buffer plus the redactor's hold-back, that the decoded size stays within the limits, that
// the needle never comes out whole, and that without codings the output has the input's length.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "secrets/response_scrubber.hpp"

namespace {

namespace secrets = sandgate::secrets;

void check(bool ok) {
  if (!ok) std::abort();
}

const std::string kNeedle = "tok+en/1=";

struct Outcome {
  std::string out;
  secrets::ResponseScrubber::Failure failure = secrets::ResponseScrubber::Failure::none;
};

Outcome scrub(const std::vector<secrets::Coding>& codings, std::string_view body,
              std::size_t step) {
  secrets::ScrubLimits limits;
  limits.free_bytes = 1 << 20;
  limits.max_ratio = 16;
  secrets::ResponseScrubber s({kNeedle}, codings, limits);
  Outcome o;
  for (std::size_t at = 0;;) {
    const std::size_t n = step == 0 ? body.size() - at : std::min(step, body.size() - at);
    const bool last = at + n == body.size();
    s.push(body.substr(at, n), last);
    for (std::string_view piece = s.pull(); !piece.empty(); piece = s.pull()) {
      check(piece.size() <= secrets::ResponseScrubber::kOutChunk +
                                kNeedle.size() * secrets::Redactor::kMaxSpelling);
      o.out += piece;
    }
    check(s.decoded_bytes() <= std::max<std::uint64_t>(limits.free_bytes, 16 * body.size()) +
                                   secrets::ResponseScrubber::kOutChunk);
    for (std::size_t found = o.out.find(kNeedle.front()); found != std::string::npos;
         found = o.out.find(kNeedle.front(), found + 1)) {
      check(o.out.compare(found, kNeedle.size(), kNeedle) != 0);
    }
    if (s.failed()) {
      o.failure = s.failure();
      return o;
    }
    at += n;
    if (last) break;
  }
  check(s.finished());
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  // The codings: none, one of three, or two of them.
  static constexpr secrets::Coding kAll[] = {secrets::Coding::gzip, secrets::Coding::deflate,
                                             secrets::Coding::br};
  std::vector<secrets::Coding> codings;
  if ((mode & 3) != 0) codings.push_back(kAll[(mode & 3) - 1]);
  if ((mode & 12) != 0 && (mode & 3) != 0) codings.push_back(kAll[((mode >> 2) & 3) - 1]);

  using Failure = secrets::ResponseScrubber::Failure;
  const Outcome whole = scrub(codings, body, 0);
  const Outcome chunked = scrub(codings, body, 1 + (mode >> 4));
  if (whole.failure != Failure::too_large && chunked.failure != Failure::too_large) {
    check(whole.failure == chunked.failure);
    if (whole.failure == Failure::none) check(whole.out == chunked.out);
  }
  if (codings.empty()) {
    check(whole.failure == Failure::none);
    check(whole.out.size() == body.size());
  }

  // The same bytes as Content-Encoding values.
  const std::vector<std::string_view> values = {body.substr(0, body.size() / 2),
                                                body.substr(body.size() / 2)};
  (void)secrets::parse_content_codings(values);
  return 0;
}
