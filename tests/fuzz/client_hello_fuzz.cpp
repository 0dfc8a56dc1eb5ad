// libFuzzer target for tls::peek_client_hello. Besides "no crash, no sanitizer report" it
// checks the properties the proxy relies on and aborts when one fails.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "tls/client_hello.hpp"

namespace {

using sandgate::tls::PeekResult;
using sandgate::tls::PeekStatus;

void check(bool ok) {
  if (!ok) std::abort();
}

bool same_hello(const PeekResult& a, const PeekResult& b) {
  return a.status == b.status && a.hello.sni == b.hello.sni && a.hello.alpn == b.hello.alpn &&
         a.hello.has_ech == b.hello.has_ech && a.record_bytes == b.record_bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  const PeekResult r = sandgate::tls::peek_client_hello(in);

  if (size >= 2 && !sandgate::tls::looks_like_tls(in)) check(r.status == PeekStatus::not_tls);
  switch (r.status) {
    case PeekStatus::need_more:
      check(r.bytes_needed_hint >= 1 && size < sandgate::tls::kMaxClientHelloBytes);
      break;
    case PeekStatus::complete: {
      check(r.record_bytes > 0 && r.record_bytes <= size &&
            r.record_bytes <= sandgate::tls::kMaxClientHelloBytes);
      if (r.hello.sni) {
        check(!r.hello.sni->empty());
        check(std::all_of(r.hello.sni->begin(), r.hello.sni->end(),
                          [](char c) { return c > 0x20 && c < 0x7f; }));
      }
      for (const auto& proto : r.hello.alpn) check(!proto.empty());
      // Bytes after the hello change nothing; one byte fewer is never complete.
      check(same_hello(r, sandgate::tls::peek_client_hello(in.first(r.record_bytes))));
      check(sandgate::tls::peek_client_hello(in.first(r.record_bytes - 1)).status ==
            PeekStatus::need_more);
      break;
    }
    case PeekStatus::not_tls:
    case PeekStatus::malformed:
      break;
  }
  return 0;
}
