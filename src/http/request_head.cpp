#include "http/request_head.hpp"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <cstring>
#include <limits>

#include "common/ascii.hpp"

namespace sandgate::http {

namespace beast_http = boost::beast::http;

namespace {

// RFC 9110 §5.6.2 tchar.
constexpr ByteSet kTchar([](char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  constexpr std::string_view kSymbols = "!#$%&'*+-.^_`|~";
  return kSymbols.find(c) != std::string_view::npos;
});

// RFC 9110 §5.5 field-value bytes: VCHAR, SP, HTAB and obs-text. No NUL, no other control.
constexpr ByteSet kFieldValueChar([](char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7f);
});

std::error_code err(Errc e) {
  return make_error_code(e);
}

std::optional<std::uint64_t> to_std(const boost::optional<std::uint64_t>& v) {
  return v ? std::optional<std::uint64_t>(*v) : std::nullopt;
}

// Message framing as sandgate reads it, decided before Beast sees the head so that the answer
// does not depend on field order (Beast reports CL+TE differently depending on which came first).
struct Framing {
  bool chunked = false;
  std::optional<std::uint64_t> content_length;
  std::size_t host_fields = 0;
};

// What one pass over the field lines finds about framing: how many Content-Length and
// Transfer-Encoding fields there are and the first value of each (views into the head).
struct FramingFields {
  std::size_t lengths = 0;
  std::size_t encodings = 0;
  std::string_view length;
  std::string_view encoding;
  std::size_t host_fields = 0;
};

// Splits a complete head into lines and checks the bytes Beast is lax about: obs-fold (Beast
// unfolds it), and the field-name and field-value character sets. Collects the framing fields
// on the way; nothing is allocated.
Result<FramingFields> scan_fields(std::string_view head, const HeadLimits& limits) {
  const auto end = find_head_end(head, limits);
  if (!end) return end.error();
  if (*end == 0 || *end != head.size()) return err(Errc::malformed_request);  // partial/extra
  // find_head_end guarantees every CR and LF in head is part of a CRLF.
  std::size_t pos = head.find("\r\n") + 2;
  if (pos == 2) return err(Errc::malformed_request);  // leading empty line
  FramingFields out;
  for (;;) {
    const std::size_t eol = head.find("\r\n", pos);
    const std::string_view line = head.substr(pos, eol - pos);
    pos = eol + 2;
    if (line.empty()) return out;
    if (line.front() == ' ' || line.front() == '\t') return err(Errc::obs_fold);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return err(Errc::invalid_header);
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim_ows(line.substr(colon + 1));
    if (!kTchar.all_of(name) || !kFieldValueChar.all_of(value)) {
      return err(Errc::invalid_header);
    }
    if (iequals_ascii(name, "content-length") && out.lengths++ == 0) out.length = value;
    if (iequals_ascii(name, "transfer-encoding") && out.encodings++ == 0) out.encoding = value;
    if (iequals_ascii(name, "host")) ++out.host_fields;
  }
}

Result<Framing> check_framing(const FramingFields& fields) {
  Framing out;
  out.host_fields = fields.host_fields;
  if (fields.lengths > 0 && fields.encodings > 0) return err(Errc::content_length_with_te);
  // Repeated Content-Length is refused even when the values agree: RFC 9110 §8.6 allows
  // collapsing them, but every intermediary that does so differently is a smuggling vector.
  if (fields.lengths > 1 ||
      (fields.lengths == 1 && fields.length.find(',') != std::string_view::npos)) {
    return err(Errc::conflicting_length);
  }
  if (fields.lengths == 1) {
    const std::string_view v = fields.length;
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
  if (fields.encodings > 1 ||
      (fields.encodings == 1 && !iequals_ascii(fields.encoding, "chunked"))) {
    return err(Errc::bad_transfer_encoding);
  }
  out.chunked = fields.encodings == 1;
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

// Whether any Connection field holds the token `want`.
template <class Fields>
bool has_connection_token(const Fields& f, std::string_view want) {
  for (const auto& field : f) {
    if (field.name() != beast_http::field::connection) continue;
    for (const auto& token : beast_http::token_list(field.value())) {
      if (iequals_ascii(token, want)) return true;
    }
  }
  return false;
}

// Beast's message::keep_alive() reads only the first Connection field; this reads them all.
bool keep_alive(const beast_http::fields& f, unsigned version) {
  if (has_connection_token(f, "close")) return false;
  return version >= 11 || has_connection_token(f, "keep-alive");
}

// The fields strip_proxy_only removes (strip_fields removes them too).
bool is_proxy_only(beast_http::field name) {
  using beast_http::field;
  switch (name) {
    case field::proxy_connection:
    case field::keep_alive:
    case field::proxy_authorization:
    case field::proxy_authenticate:
    case field::http2_settings:
      return true;
    default:
      return false;
  }
}

template <class Fields>
void strip_fields(Fields& f) {
  using beast_http::field;
  // Erasing the fields a Connection field names leaves that Connection field (and so the
  // token's view into its value) and the list order in place; "connection" itself goes with
  // the fixed names below.
  for (auto it = f.begin(); it != f.end(); ++it) {
    if (it->name() != field::connection) continue;
    for (const auto& token : beast_http::token_list(it->value())) {
      const std::string_view name(token.data(), token.size());
      if (iequals_ascii(name, "host") || iequals_ascii(name, "content-length") ||
          iequals_ascii(name, "transfer-encoding") || iequals_ascii(name, "connection")) {
        continue;
      }
      f.erase(name);
    }
  }
  // The fixed hop-by-hop names in one pass over the fields (Beast knows each field's name as
  // an enum: no lookup by name).
  for (auto it = f.begin(); it != f.end();) {
    const field name = it->name();
    if (name == field::connection || name == field::te || name == field::upgrade ||
        is_proxy_only(name)) {
      it = f.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace

Result<std::size_t> find_head_end(std::string_view buffered, const HeadLimits& limits) {
  bool in_request_line = true;
  std::size_t line_start = 0;
  const auto bare = [&] {
    return err(in_request_line ? Errc::malformed_request : Errc::invalid_header);
  };
  // Line by line: memchr finds the next CR or LF; the bytes before it can only break a size
  // limit, and the first one that does is computed, not searched for. The answer is the one a
  // byte-by-byte scan gives: at each offset the head limit is checked first, then a bare LF,
  // then the request line's limit (which a CR does not count against).
  const char* const data = buffered.data();
  const std::size_t size = buffered.size();
  for (std::size_t i = 0; i < size;) {
    std::size_t j = size;  // the next CR or LF
    if (const void* cr = std::memchr(data + i, '\r', size - i)) {
      j = static_cast<std::size_t>(static_cast<const char*>(cr) - data);
    }
    if (const void* lf = std::memchr(data + i, '\n', j - i)) {
      j = static_cast<std::size_t>(static_cast<const char*>(lf) - data);
    }
    std::size_t limit = limits.max_header_bytes;
    if (in_request_line) limit = std::min(limit, line_start + limits.max_request_line);
    if (const std::size_t first_over = std::max(i, limit); first_over < j) {
      return err(first_over >= limits.max_header_bytes ? Errc::headers_too_large
                                                       : Errc::request_line_too_long);
    }
    if (j == size) break;
    if (j >= limits.max_header_bytes) return err(Errc::headers_too_large);
    if (data[j] == '\n') return bare();
    if (j + 1 == size) break;
    if (data[j + 1] != '\n') return bare();
    const bool empty_line = j == line_start;
    if (empty_line && !in_request_line) {
      if (j + 2 > limits.max_header_bytes) return err(Errc::headers_too_large);
      return j + 2;
    }
    in_request_line = false;
    line_start = j + 2;
    i = j + 2;
  }
  if (size >= limits.max_header_bytes) return err(Errc::headers_too_large);
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
  out.keep_alive = keep_alive(msg, version);
  out.upgrade = first_field(msg, beast_http::field::upgrade) != msg.end() &&
                has_connection_token(msg, "upgrade");

  const bool is_connect = msg.method() == beast_http::verb::connect;
  if (is_connect && out.has_body) return err(Errc::malformed_request);
  const auto target =
      parse_request_target(msg.target(), is_connect, msg.method() == beast_http::verb::options);
  if (!target) return target.error();

  std::optional<Authority> host_field;
  if (framing->host_fields == 0) {
    if (version == 11) return err(Errc::invalid_header);
  } else {
    host_field = parse_authority(first_value(msg, beast_http::field::host));
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
  strip_fields(f);
}

void strip_hop_by_hop(ArenaFields& f) {
  strip_fields(f);
}

void strip_proxy_only(beast_http::fields& f) {
  for (auto it = f.begin(); it != f.end();) {
    it = is_proxy_only(it->name()) ? f.erase(it) : std::next(it);
  }
}

namespace {

void append_version(std::string& out, unsigned version) {
  out += "HTTP/";
  out += static_cast<char>('0' + version / 10 % 10);
  out += '.';
  out += static_cast<char>('0' + version % 10);
}

// The bytes append_fields adds.
template <class Fields>
std::size_t fields_size(const Fields& f) {
  std::size_t n = 2;
  for (const auto& field : f) n += field.name_string().size() + field.value().size() + 4;
  return n;
}

template <class Fields>
void append_fields(std::string& out, const Fields& f) {
  for (const auto& field : f) {
    out += field.name_string();
    out += ": ";
    out += field.value();
    out += "\r\n";
  }
  out += "\r\n";
}

template <class Fields>
std::string response_text(const beast_http::response_header<Fields>& h) {
  const boost::beast::string_view reason =
      h.reason().empty() ? beast_http::obsolete_reason(h.result()) : h.reason();
  std::string out;
  out.reserve(15 + reason.size() + fields_size(h));  // one allocation
  append_version(out, h.version());
  const unsigned code = h.result_int();
  out += ' ';
  out += static_cast<char>('0' + code / 100 % 10);
  out += static_cast<char>('0' + code / 10 % 10);
  out += static_cast<char>('0' + code % 10);
  out += ' ';
  out += reason;
  out += "\r\n";
  append_fields(out, h);
  return out;
}

}  // namespace

bool idempotent_method(std::string_view method) {
  for (const std::string_view m : {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"}) {
    if (method == m) return true;
  }
  return false;
}

Errc check_h2_request(std::string_view method, std::string_view target,
                      std::span<const std::string_view> field_values) {
  if (method.empty() || !kTchar.all_of(method)) return Errc::malformed_request;
  if (method == "CONNECT") return Errc::unsupported_target;
  const auto parsed = parse_request_target(target, false, method == "OPTIONS");
  if (!parsed) return static_cast<Errc>(parsed.error().value());
  if (parsed->form != TargetForm::origin && parsed->form != TargetForm::asterisk) {
    return Errc::unsupported_target;
  }
  for (const std::string_view v : field_values) {
    if (!kFieldValueChar.all_of(v)) return Errc::invalid_header;
  }
  return Errc::ok;
}

std::string head_text(const beast_http::request_header<>& h) {
  std::string out;
  out.reserve(h.method_string().size() + h.target().size() + 12 + fields_size(h));
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
  return response_text(h);
}

std::string head_text(const beast_http::response_header<ArenaFields>& h) {
  return response_text(h);
}

}  // namespace sandgate::http
