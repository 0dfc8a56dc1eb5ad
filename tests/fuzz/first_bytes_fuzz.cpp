// libFuzzer target for proxy::classify_first_bytes. Besides "no crash, no sanitizer report" it
// checks what the sessions rely on: a decision never changes when more bytes arrive (every
// prefix of the input is undecided or decided the same way), and nothing stays undecided past
// the classifier's bound.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "proxy/first_bytes.hpp"

namespace {

using sandgate::proxy::FirstBytes;
using sandgate::proxy::StreamStart;

void check(bool ok) {
  if (!ok) std::abort();
}

bool same(const FirstBytes& a, const FirstBytes& b) {
  return a.kind == b.kind && a.skipped == b.skipped && a.hello.sni == b.hello.sni &&
         a.hello.alpn == b.hello.alpn && a.hello.has_ech == b.hello.has_ech;
}

// The classifier's method characters.
bool is_method_char(std::uint8_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '-';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  const FirstBytes r = sandgate::proxy::classify_first_bytes(in);
  switch (r.kind) {
    case StreamStart::need_more:
      check(size <= sandgate::proxy::kMaxUndecidedBytes);
      break;
    case StreamStart::undecidable:
      check(size > sandgate::proxy::kMaxUndecidedBytes);
      break;
    case StreamStart::http:
    case StreamStart::proxy_request:
      check(r.skipped < size && is_method_char(data[r.skipped]));
      break;
    case StreamStart::tls:
    case StreamStart::tls_malformed:
      check(data[0] == 0x16);
      break;
    case StreamStart::other:
      break;
  }
  // Prefixes: the byte before the end, and a few cut points spread over the input.
  for (const std::size_t cut : {size - 1, size / 2, size / 4, std::size_t{1}}) {
    if (size == 0 || cut >= size) continue;
    const FirstBytes p = sandgate::proxy::classify_first_bytes(in.first(cut));
    // Past the bound a stream is refused as undecidable, whatever follows.
    if (p.kind == StreamStart::need_more || p.kind == StreamStart::undecidable) continue;
    check(same(p, r));
  }
  return 0;
}
