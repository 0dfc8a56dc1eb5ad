// libFuzzer target for proxy::classify_first_bytes. Besides "no crash, no sanitizer report" it
// checks what the sessions rely on: a decision never changes when more bytes arrive (every
// prefix of the input is undecided or decided the same way), nothing stays undecided past
// the classifier's bound, and every head the strict parser accepts is recognised as HTTP (or
// as a proxy request for the absolute and authority forms and CONNECT in any case): a lenient
// server reads at least what the strict one does.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "common/ascii.hpp"
#include "http/request_head.hpp"
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

// RFC 9110 tchar: what a method is made of.
bool is_method_char(std::uint8_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
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
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const sandgate::http::HeadLimits limits;
  if (const auto end = sandgate::http::find_head_end(text, limits); end && *end > 0) {
    if (const auto head = sandgate::http::parse_request_head(text.substr(0, *end), limits)) {
      const bool proxy_form = head->form == sandgate::http::RequestHead::Form::absolute ||
                              head->form == sandgate::http::RequestHead::Form::authority;
      // CONNECT in any case is a proxy request to the classifier, as a lenient server reads
      // it, where the strict parser takes "cOnNeCt /x" for an unknown method in origin form.
      const std::string_view line = text.substr(text.find_first_not_of("\r\n"));
      const bool connect = sandgate::iequals_ascii(line.substr(0, line.find(' ')), "CONNECT");
      check(r.kind == (proxy_form || connect ? StreamStart::proxy_request : StreamStart::http));
    }
  }
  return 0;
}
