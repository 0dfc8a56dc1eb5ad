#include "http/request_head.hpp"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <limits>
#include <vector>

#include "common/ascii.hpp"

namespace sandgate::http {

namespace beast_http = boost::beast::http;

namespace {

// RFC 9110 §5.6.2 tchar.
bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  return kSymbols.find(c) != std::string_view::npos;
}

// RFC 9110 §5.5 field-value bytes: VCHAR, SP, HTAB and obs-text. No NUL, no other control.
bool is_field_value_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::error_code err(Errc e) {
  return make_error_code(e);
}

std::optional<std::uint64_t> to_std(const boost::optional<std::uint64_t>& v) {
  return v ? std::optional<std::uint64_t>(*v) : std::nullopt;
}

// A field line as it arrived, after the byte-level checks. Views into the head.
struct RawField {
  std::string_view name;
  std::string_view value;  // OWS-trimmed
};

// Splits a complete head into lines and checks the bytes Beast is lax about: obs-fold (Beast
// unfolds it), and the field-name and field-value character sets.
Result<std::vector<RawField>> scan_fields(std::string_view head, const HeadLimits& limits) {
  const auto end = find_head_end(head, limits);
  if (!end) return end.error();
  if (*end == 0 || *end != head.size()) return err(Errc::malformed_request);  // partial/extra
  // find_head_end guarantees every CR and LF in head is part of a CRLF.
  std::size_t pos = head.find("\r\n") + 2;
  if (pos == 2) return err(Errc::malformed_request);  // leading empty line
  std::vector<RawField> fields;
  for (;;) {
    const std::size_t eol = head.find("\r\n", pos);
    const std::string_view line = head.substr(pos, eol - pos);
    pos = eol + 2;
    if (line.empty()) return fields;
    if (line.front() == ' ' || line.front() == '\t') return err(Errc::obs_fold);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return err(Errc::invalid_header);
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim_ows(line.substr(colon + 1));
    if (!std::all_of(name.begin(), name.end(), is_tchar) ||
        !std::all_of(value.begin(), value.end(), is_field_value_char)) {
      return err(Errc::invalid_header);
    }
    fields.push_back({name, value});
  }
}

// Message framing as sandgate reads it, decided before Beast sees the head so that the answer
// does not depend on field order (Beast reports CL+TE differently depending on which came first).
struct Framing {
  bool chunked = false;
  std::optional<std::uint64_t> content_length;
  std::size_t host_fields = 0;
};

Result<Framing> check_framing(const std::vector<RawField>& fields) {
  std::vector<std::string_view> lengths;
  std::vector<std::string_view> encodings;
  Framing out;
  for (const RawField& f : fields) {
    if (iequals_ascii(f.name, "content-length")) lengths.push_back(f.value);
    if (iequals_ascii(f.name, "transfer-encoding")) encodings.push_back(f.value);
    if (iequals_ascii(f.name, "host")) ++out.host_fields;
  }
  if (!lengths.empty() && !encodings.empty()) return err(Errc::content_length_with_te);
  // Repeated Content-Length is refused even when the values agree: RFC 9110 §8.6 allows
  // collapsing them, but every intermediary that does so differently is a smuggling vector.
  if (lengths.size() > 1 ||
      (lengths.size() == 1 && lengths[0].find(',') != std::string_view::npos)) {
    return err(Errc::conflicting_length);
  }
  if (lengths.size() == 1) {
    const std::string_view v = lengths[0];
    if (v.empty() ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return err(Errc::malformed_request);
    }
    std::uint64_t n = 0;
    for (const char c : v) {
      const auto d = static_cast<std::uint64_t>(c - '0');
      if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) {
        return err(Errc::malformed_request);
      }
      n = n * 10 + d;
    }
    out.content_length = n;
  }
  // Only plain "chunked": a proxy that forwards "gzip, chunked" or "chunked, identity" relies on
  // the upstream agreeing on which coding frames the body.
  if (encodings.size() > 1 || (encodings.size() == 1 && !iequals_ascii(encodings[0], "chunked"))) {
    return err(Errc::bad_transfer_encoding);
  }
  out.chunked = encodings.size() == 1;
  if (out.host_fields > 1) return err(Errc::invalid_header);
  return out;
}

Errc from_beast(const boost::system::error_code& ec) {
  using E = beast_http::error;
  if (ec == E::bad_method || ec == E::bad_target || ec == E::bad_version) {
    return Errc::malformed_request;
  }
  if (ec == E::bad_field || ec == E::bad_value || ec == E::bad_line_ending) {
    return Errc::invalid_header;
  }
  if (ec == E::multiple_content_length) return Errc::conflicting_length;
  if (ec == E::bad_transfer_encoding) return Errc::bad_transfer_encoding;
  if (ec == E::header_limit) return Errc::headers_too_large;
  return Errc::malformed_request;
}

// The tokens of every Connection field, in order. Views into f.
std::vector<std::string_view> connection_tokens(const beast_http::fields& f) {
  std::vector<std::string_view> out;
  for (const auto& field : f) {
    if (field.name() != beast_http::field::connection) continue;
    for (const auto& token : beast_http::token_list(field.value())) out.emplace_back(token);
  }
  return out;
}

bool has_token(const std::vector<std::string_view>& tokens, std::string_view want) {
  return std::any_of(tokens.begin(), tokens.end(), [&](auto t) { return iequals_ascii(t, want); });
}

// Beast's message::keep_alive() reads only the first Connection field; this reads them all.
bool keep_alive(const std::vector<std::string_view>& tokens, unsigned version) {
  if (has_token(tokens, "close")) return false;
  return version >= 11 || has_token(tokens, "keep-alive");
}

}  // namespace

Result<std::size_t> find_head_end(std::string_view buffered, const HeadLimits& limits) {
  bool in_request_line = true;
  std::size_t line_start = 0;
  const auto bare = [&] {
    return err(in_request_line ? Errc::malformed_request : Errc::invalid_header);
  };
  for (std::size_t i = 0; i < buffered.size(); ++i) {
    if (i >= limits.max_header_bytes) return err(Errc::headers_too_large);
    const char c = buffered[i];
    if (c == '\n') return bare();
    if (c != '\r') {
      if (in_request_line && i - line_start >= limits.max_request_line) {
        return err(Errc::request_line_too_long);
      }
      continue;
    }
    if (i + 1 == buffered.size()) break;
    if (buffered[i + 1] != '\n') return bare();
    const bool empty_line = i == line_start;
    if (empty_line && !in_request_line) {
      if (i + 2 > limits.max_header_bytes) return err(Errc::headers_too_large);
      return i + 2;
    }
    in_request_line = false;
    line_start = i + 2;
    ++i;
  }
  if (buffered.size() >= limits.max_header_bytes) return err(Errc::headers_too_large);
  return 0;
}

Result<RequestHead> parse_request_head(std::string_view head, const HeadLimits& limits) {
  auto fields = scan_fields(head, limits);
  if (!fields) return fields.error();
  auto framing = check_framing(*fields);
  if (!framing) return framing.error();

  RequestHead out;
  out.parser = std::make_unique<RequestHead::Parser>();
  auto& parser = *out.parser;
  parser.eager(false);
  parser.body_limit(boost::none);  // the body is streamed by the caller, not parsed here
  parser.header_limit(static_cast<std::uint32_t>(
      std::min<std::size_t>(head.size(), std::numeric_limits<std::uint32_t>::max())));
  boost::system::error_code ec;
  const std::size_t used = parser.put(boost::asio::buffer(head.data(), head.size()), ec);
  if (ec) return err(from_beast(ec));
  // Our scan and Beast must agree on where the head ends and how the body is framed; a
  // disagreement is exactly the kind of differential a smuggling attack looks for.
  if (used != head.size() || !parser.is_header_done() || parser.chunked() != framing->chunked ||
      to_std(parser.content_length()) != framing->content_length) {
    return err(Errc::malformed_request);
  }

  const auto& msg = out.msg();
  const unsigned version = msg.version();
  if (version != 10 && version != 11) return err(Errc::malformed_request);
  if (framing->chunked && version == 10) return err(Errc::bad_transfer_encoding);
  out.chunked = framing->chunked;
  out.content_length = framing->content_length;
  out.has_body = out.chunked || out.content_length.value_or(0) > 0;
  const auto tokens = connection_tokens(msg);
  out.keep_alive = keep_alive(tokens, version);
  out.upgrade = msg.count(beast_http::field::upgrade) > 0 && has_token(tokens, "upgrade");

  const bool is_connect = msg.method() == beast_http::verb::connect;
  if (is_connect && out.has_body) return err(Errc::malformed_request);
  const auto target =
      parse_request_target(msg.target(), is_connect, msg.method() == beast_http::verb::options);
  if (!target) return target.error();

  std::optional<Authority> host_field;
  if (framing->host_fields == 0) {
    if (version == 11) return err(Errc::invalid_header);
  } else {
    host_field = parse_authority(msg[beast_http::field::host]);
    if (!host_field) return err(Errc::invalid_header);
  }

  out.form = target->form;
  Authority authority = target->authority;
  switch (target->form) {
    case TargetForm::absolute:
      if (host_field && !same_authority(*host_field, authority, 80)) {
        return err(Errc::host_mismatch);
      }
      out.scheme = "http";
      out.path_and_query = std::string(target->path_and_query);
      if (out.path_and_query.empty() || out.path_and_query.front() == '?') {
        out.path_and_query.insert(0, "/");
      }
      break;
    case TargetForm::authority:
      // Host is informational on CONNECT; a port-less Host may stand for the tunnel's port.
      if (host_field && (host_field->ip_literal != authority.ip_literal ||
                         !iequals_ascii(host_field->host, authority.host) ||
                         (host_field->port && host_field->port != authority.port))) {
        return err(Errc::host_mismatch);
      }
      break;
    case TargetForm::origin:
    case TargetForm::asterisk:
      out.path_and_query = std::string(target->path_and_query);
      if (host_field) authority = *host_field;
      break;
  }
  out.host = std::string(authority.host);
  out.port = authority.port.value_or(80);
  return out;
}

void strip_hop_by_hop(beast_http::fields& f) {
  std::vector<std::string> named;  // copies: erasing invalidates views into f
  for (const std::string_view token : connection_tokens(f)) named.emplace_back(token);
  for (const std::string& name : named) {
    if (iequals_ascii(name, "host") || iequals_ascii(name, "content-length") ||
        iequals_ascii(name, "transfer-encoding")) {
      continue;
    }
    f.erase(name);
  }
  using beast_http::field;
  for (const field name : {field::connection, field::proxy_connection, field::keep_alive, field::te,
                           field::upgrade, field::proxy_authorization, field::proxy_authenticate}) {
    f.erase(name);
  }
}

namespace {

void append_version(std::string& out, unsigned version) {
  out += "HTTP/";
  out += static_cast<char>('0' + version / 10 % 10);
  out += '.';
  out += static_cast<char>('0' + version % 10);
}

void append_fields(std::string& out, const beast_http::fields& f) {
  for (const auto& field : f) {
    out += field.name_string();
    out += ": ";
    out += field.value();
    out += "\r\n";
  }
  out += "\r\n";
}

}  // namespace

std::string head_text(const beast_http::request_header<>& h) {
  std::string out;
  out.reserve(256);
  out += h.method_string();
  out += ' ';
  out += h.target();
  out += ' ';
  append_version(out, h.version());
  out += "\r\n";
  append_fields(out, h);
  return out;
}

std::string head_text(const beast_http::response_header<>& h) {
  std::string out;
  out.reserve(256);
  append_version(out, h.version());
  const unsigned code = h.result_int();
  out += ' ';
  out += static_cast<char>('0' + code / 100 % 10);
  out += static_cast<char>('0' + code / 10 % 10);
  out += static_cast<char>('0' + code % 10);
  out += ' ';
  const boost::beast::string_view reason = h.reason();
  out += reason.empty() ? beast_http::obsolete_reason(h.result()) : reason;
  out += "\r\n";
  append_fields(out, h);
  return out;
}

}  // namespace sandgate::http
