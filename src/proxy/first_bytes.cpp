#include "proxy/first_bytes.hpp"

#include <string_view>

namespace sandgate::proxy {

namespace {

constexpr std::size_t kMaxSchemeBytes = 32;
constexpr std::uint8_t kHandshakeRecord = 0x16;

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}
// RFC 9110 5.6.2: a method is any token, which is what sandgate's own request parser (and
// servers such as Apache) accept; nginx forwards unknown ones too.
bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
bool is_letter(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}
// RFC 3986 3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
bool is_scheme_char(char c, bool first) {
  if (is_letter(c)) return true;
  return !first && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.');
}

FirstBytes result(StreamStart kind, std::size_t skipped = 0) {
  FirstBytes out;
  out.kind = kind;
  out.skipped = skipped;
  return out;
}

// A request line as a lenient server reads it, starting at `text[at]`: a method (any token, any
// case, any length), blanks, a target, and somewhere later on the line "HTTP/" after a blank.
FirstBytes classify_text(std::string_view text) {
  const std::size_t at = std::min(text.find_first_not_of(" \t\r\n"), text.size());
  const auto more = [&] {
    return result(text.size() > kMaxUndecidedBytes ? StreamStart::undecidable
                                                   : StreamStart::need_more);
  };
  std::size_t i = at;
  while (i < text.size() && is_tchar(text[i])) ++i;
  if (i == text.size()) return more();
  if (i == at || !is_blank(text[i])) return result(StreamStart::other);
  if (iequals(text.substr(at, i - at), "CONNECT")) return result(StreamStart::proxy_request, at);

  while (i < text.size() && is_blank(text[i])) ++i;
  // An absolute-form target ("scheme://"): clients send that only to proxies (RFC 9112 3.2.2).
  std::size_t j = i;
  while (j < text.size() && j - i <= kMaxSchemeBytes && is_scheme_char(text[j], j == i)) ++j;
  if (j == text.size()) return more();
  if (j > i && j - i <= kMaxSchemeBytes) {
    const std::string_view rest = text.substr(j, 3);
    if (rest == std::string_view("://").substr(0, rest.size())) {
      return rest.size() == 3 ? result(StreamStart::proxy_request, at) : more();
    }
  }
  // Anything else is HTTP when the line, once it ends, has a version after a blank.
  const std::size_t eol = text.find_first_of("\r\n", i);
  if (eol == std::string_view::npos) return more();
  const std::string_view line = text.substr(i, eol - i);
  for (std::size_t k = line.find_first_of(" \t"); k != std::string_view::npos;
       k = line.find_first_of(" \t", k + 1)) {
    if (iequals(line.substr(k + 1, 5), "HTTP/")) return result(StreamStart::http, at);
  }
  return result(StreamStart::other);
}

}  // namespace

FirstBytes classify_first_bytes(std::span<const std::uint8_t> data) {
  if (data.empty()) return result(StreamStart::need_more);
  if (data[0] == kHandshakeRecord) {
    // However the record header and the ClientHello are split across reads, they are
    // waited for (up to the peeker's bound) before anything is decided.
    if (data.size() == 1) return result(StreamStart::need_more);
    if (tls::looks_like_tls(data)) {
      const tls::PeekResult peek = tls::peek_client_hello(data);
      switch (peek.status) {
        case tls::PeekStatus::complete: {
          FirstBytes out = result(StreamStart::tls);
          out.hello = peek.hello;
          return out;
        }
        case tls::PeekStatus::need_more:
          return result(StreamStart::need_more);
        case tls::PeekStatus::not_tls:
        case tls::PeekStatus::malformed:
          return result(StreamStart::tls_malformed);
      }
    }
    return result(StreamStart::other);
  }
  return classify_text(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
}

}  // namespace sandgate::proxy
