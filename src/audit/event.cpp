#include "audit/event.hpp"

#include <array>
#include <boost/json/basic_parser_impl.hpp>
#include <cstring>
#include <string>

#include "audit/time.hpp"

namespace sandgate::audit {

namespace json = boost::json;

namespace {

// The fields read, by where they sit: a top-level key, then a key of the object under it.
enum class Field {
  none,
  timestamp,  // @timestamp (top level)
  code,
  outcome,
  reason,
  sandbox,
  suggestion,
  suppressed,
  host,
  destination_ip,
  port,
  bytes_down,
  bytes_up,
  rule,
  protocol,
  credential_name,
  credential_fingerprint,
  count_,  // number of fields
};

enum class Top { other, timestamp, event, labels, destination, source, rule, network, credential };

// key == literal, with the length known at compile time so no memcmp call is made.
template <std::size_t N>
bool is(std::string_view key, const char (&literal)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), literal, N - 1) == 0;
}

Top top_of(std::string_view key) {
  if (is(key, "@timestamp")) return Top::timestamp;
  if (is(key, "event")) return Top::event;
  if (is(key, "labels")) return Top::labels;
  if (is(key, "destination")) return Top::destination;
  if (is(key, "source")) return Top::source;
  if (is(key, "rule")) return Top::rule;
  if (is(key, "network")) return Top::network;
  if (is(key, "credential")) return Top::credential;
  return Top::other;
}

Field field_of(Top top, std::string_view key) {
  switch (top) {
    case Top::event:
      if (is(key, "code")) return Field::code;
      if (is(key, "outcome")) return Field::outcome;
      if (is(key, "reason")) return Field::reason;
      break;
    case Top::labels:
      if (is(key, "sandbox_id")) return Field::sandbox;
      if (is(key, "suggestion")) return Field::suggestion;
      if (is(key, "suppressed_lines")) return Field::suppressed;
      break;
    case Top::destination:
      if (is(key, "address")) return Field::host;
      if (is(key, "ip")) return Field::destination_ip;
      if (is(key, "port")) return Field::port;
      if (is(key, "bytes")) return Field::bytes_down;
      break;
    case Top::source:
      if (is(key, "bytes")) return Field::bytes_up;
      break;
    case Top::rule:
      if (is(key, "name")) return Field::rule;
      break;
    case Top::network:
      if (is(key, "protocol")) return Field::protocol;
      break;
    case Top::credential:
      if (is(key, "name")) return Field::credential_name;
      if (is(key, "fingerprint")) return Field::credential_fingerprint;
      break;
    default:
      break;
  }
  return Field::none;
}

constexpr auto kFields = static_cast<std::size_t>(Field::count_);

// What one line left: a string or a number per field, and whether the root was an object.
struct Values {
  std::array<std::string_view, kFields> view;  // into the line, or into text
  std::array<std::string, kFields> text;       // an escaped value, unescaped
  std::array<std::uint64_t, kFields> number{};
  std::array<bool, kFields> is_text{};
  bool root_object = false;

  void clear() {
    view.fill({});
    number.fill(0);
    is_text.fill(false);
    root_object = false;
  }
};

// The SAX handler: tracks how deep it is (objects and arrays), the top-level key it is under
// and the key of the value about to come, and keeps the values at the two paths it knows.
// Nothing inside an array is kept.
struct Handler {
  static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

  Values values;
  std::uintptr_t line_begin = 0, line_end = 0;  // the line being parsed
  int depth = 0;                                // open containers
  int arrays = 0;                               // of which arrays
  Top top = Top::other;
  Field field = Field::none;  // where the next value at depth 1 or 2 goes
  std::string key_part;
  std::string string_part;

  void reset() {
    values.clear();
    depth = arrays = 0;
    top = Top::other;
    field = Field::none;
    key_part.clear();
    string_part.clear();
  }
  // The value about to be read lands in a field when it is outside any array, at depth 1
  // (@timestamp) or 2.
  Field target() const {
    if (arrays > 0) return Field::none;
    if (depth == 1) return top == Top::timestamp ? Field::timestamp : Field::none;
    if (depth == 2) return field;
    return Field::none;
  }
  void scalar_at_root() {
    if (depth == 0) values.root_object = false;
  }
  void number(std::uint64_t n) {
    scalar_at_root();
    const Field f = target();
    if (f == Field::none) return;
    values.number[static_cast<std::size_t>(f)] = n;
    values.is_text[static_cast<std::size_t>(f)] = false;
  }

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_array_begin(json::error_code&) {
    ++depth;
    ++arrays;
    return true;
  }
  bool on_array_end(std::size_t, json::error_code&) {
    --depth;
    --arrays;
    return true;
  }
  bool on_object_begin(json::error_code&) {
    if (depth == 0) values.root_object = true;
    ++depth;
    return true;
  }
  bool on_object_end(std::size_t, json::error_code&) {
    --depth;
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t, json::error_code&) {
    string_part.append(s.data(), s.size());
    return true;
  }
  bool on_string(json::string_view s, std::size_t, json::error_code&) {
    scalar_at_root();
    const Field f = target();
    if (f != Field::none) {
      const auto i = static_cast<std::size_t>(f);
      const auto at = reinterpret_cast<std::uintptr_t>(s.data());
      if (string_part.empty() && at >= line_begin && at + s.size() <= line_end) {
        // Unescaped and whole in the line: a view into it, no copy.
        values.view[i] = std::string_view(s.data(), s.size());
      } else {
        std::string& out = values.text[i];
        out.assign(string_part);
        out.append(s.data(), s.size());
        values.view[i] = out;
      }
      values.is_text[i] = true;
    }
    string_part.clear();
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    key_part.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code&) {
    std::string_view key(s.data(), s.size());
    if (!key_part.empty()) {
      key_part.append(s.data(), s.size());
      key = key_part;
    }
    if (arrays == 0) {
      if (depth == 1) {
        top = top_of(key);
        field = Field::none;
      } else if (depth == 2) {
        field = field_of(top, key);
      }
    }
    key_part.clear();
    return true;
  }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(std::int64_t i, json::string_view, json::error_code&) {
    number(i > 0 ? static_cast<std::uint64_t>(i) : 0);
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view, json::error_code&) {
    number(u);
    return true;
  }
  bool on_double(double, json::string_view, json::error_code&) {
    number(0);
    return true;
  }
  bool on_bool(bool, json::error_code&) {
    number(0);
    return true;
  }
  bool on_null(json::error_code&) {
    number(0);
    return true;
  }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }
};

// Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF). The parser skips this check for the whole line; the fields kept get it here.
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    if (*p < 0x80U) {
      ++p;
      continue;
    }
    const auto cont = [&](std::ptrdiff_t i) { return p + i < end && (p[i] & 0xC0U) == 0x80U; };
    if (*p >= 0xC2U && *p <= 0xDFU && cont(1)) {
      p += 2;
    } else if (*p >= 0xE0U && *p <= 0xEFU && cont(1) && cont(2) && !(*p == 0xE0U && p[1] < 0xA0U) &&
               !(*p == 0xEDU && p[1] >= 0xA0U)) {
      p += 3;
    } else if (*p >= 0xF0U && *p <= 0xF4U && cont(1) && cont(2) && cont(3) &&
               !(*p == 0xF0U && p[1] < 0x90U) && !(*p == 0xF4U && p[1] >= 0x90U)) {
      p += 4;
    } else {
      return false;
    }
  }
  return true;
}

json::parse_options parse_options() {
  json::parse_options o;
  o.allow_invalid_utf8 = true;  // checked per kept field (valid_utf8), which costs less
  return o;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

}  // namespace

struct LineParser::Impl {
  json::basic_parser<Handler> parser{parse_options()};
};

LineParser::LineParser() : impl_(std::make_unique<Impl>()) {}
LineParser::~LineParser() = default;

std::optional<AuditEvent> LineParser::parse(std::string_view line, LineError& error) {
  json::basic_parser<Handler>& p = impl_->parser;
  p.reset();
  p.handler().reset();
  p.handler().line_begin = reinterpret_cast<std::uintptr_t>(line.data());
  p.handler().line_end = p.handler().line_begin + line.size();
  json::error_code ec;
  const std::size_t used = p.write_some(false, line.data(), line.size(), ec);
  bool whole = !ec && p.done();
  for (std::size_t i = used; whole && i < line.size(); ++i) whole = is_space(line[i]);
  if (!whole) {
    error = LineError::not_json;
    return std::nullopt;
  }
  const Values& v = p.handler().values;
  if (!v.root_object) {
    error = LineError::not_an_object;
    return std::nullopt;
  }
  for (std::size_t i = 0; i < kFields; ++i) {
    if (v.is_text[i] && !valid_utf8(v.view[i])) {
      error = LineError::not_json;  // JSON text is UTF-8 (RFC 8259)
      return std::nullopt;
    }
  }
  const auto text = [&](Field f) -> std::string_view {
    const auto i = static_cast<std::size_t>(f);
    return v.is_text[i] ? v.view[i] : std::string_view();
  };
  const auto number = [&](Field f) -> std::uint64_t {
    const auto i = static_cast<std::size_t>(f);
    return v.is_text[i] ? 0 : v.number[i];
  };
  AuditEvent e;
  e.code = text(Field::code);
  const auto time = parse_rfc3339_ms(text(Field::timestamp));
  if (!time || e.code.empty()) {
    error = LineError::missing_fields;
    return std::nullopt;
  }
  e.time_ms = *time;
  e.outcome = text(Field::outcome);
  e.reason = text(Field::reason);
  e.sandbox = text(Field::sandbox);
  e.suggestion = text(Field::suggestion);
  e.suppressed = number(Field::suppressed);
  e.host = text(Field::host);
  e.destination_ip = text(Field::destination_ip);
  const std::uint64_t port = number(Field::port);
  e.port = port <= 65535 ? static_cast<std::uint16_t>(port) : 0;
  e.bytes_down = number(Field::bytes_down);
  e.bytes_up = number(Field::bytes_up);
  e.rule = text(Field::rule);
  e.protocol = text(Field::protocol);
  e.credential_name = text(Field::credential_name);
  e.credential_fingerprint = text(Field::credential_fingerprint);
  return e;
}

}  // namespace sandgate::audit
