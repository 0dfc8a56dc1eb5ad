#include "audit/event.hpp"

#include <boost/json/value.hpp>

#include "audit/time.hpp"

namespace sandgate::audit {

namespace json = boost::json;

namespace {

const json::object* object_at(const json::object& o, std::string_view key) {
  const auto it = o.find(key);
  return it == o.end() ? nullptr : it->value().if_object();
}

std::string_view string_at(const json::object* o, std::string_view key) {
  if (o == nullptr) return {};
  const auto it = o->find(key);
  if (it == o->end()) return {};
  const json::string* s = it->value().if_string();
  return s == nullptr ? std::string_view() : std::string_view(*s);
}

std::uint64_t number_at(const json::object* o, std::string_view key) {
  if (o == nullptr) return 0;
  const auto it = o->find(key);
  if (it == o->end()) return 0;
  const json::value& v = it->value();
  if (const std::int64_t* i = v.if_int64()) return *i > 0 ? static_cast<std::uint64_t>(*i) : 0;
  if (const std::uint64_t* u = v.if_uint64()) return *u;
  return 0;
}

}  // namespace

// The parser's own stack lives on the default heap (it grows once, then is reused): never in
// storage_, which is released under it before each line.
LineParser::LineParser() : storage_(initial_, sizeof initial_) {}

std::optional<AuditEvent> LineParser::parse(std::string_view line, LineError& error) {
  // The previous line's tree goes first, then its storage is handed back in one step.
  value_ = nullptr;
  storage_.release();
  parser_.reset(json::storage_ptr(&storage_));
  boost::system::error_code ec;
  parser_.write(line.data(), line.size(), ec);
  if (ec) {
    error = LineError::not_json;
    return std::nullopt;
  }
  value_ = parser_.release();
  const json::object* root = value_.if_object();
  if (root == nullptr) {
    error = LineError::not_an_object;
    return std::nullopt;
  }
  AuditEvent e;
  const json::object* event = object_at(*root, "event");
  e.code = string_at(event, "code");
  const auto time = parse_rfc3339_ms(string_at(root, "@timestamp"));
  if (!time || e.code.empty()) {
    error = LineError::missing_fields;
    return std::nullopt;
  }
  e.time_ms = *time;
  e.outcome = string_at(event, "outcome");
  e.reason = string_at(event, "reason");
  if (const json::object* labels = object_at(*root, "labels")) {
    e.sandbox = string_at(labels, "sandbox_id");
    e.suggestion = string_at(labels, "suggestion");
    e.suppressed = number_at(labels, "suppressed_lines");
  }
  const json::object* destination = object_at(*root, "destination");
  e.host = string_at(destination, "address");
  e.destination_ip = string_at(destination, "ip");
  const std::uint64_t port = number_at(destination, "port");
  e.port = port <= 65535 ? static_cast<std::uint16_t>(port) : 0;
  e.bytes_down = number_at(destination, "bytes");
  e.bytes_up = number_at(object_at(*root, "source"), "bytes");
  e.rule = string_at(object_at(*root, "rule"), "name");
  e.protocol = string_at(object_at(*root, "network"), "protocol");
  if (const json::object* credential = object_at(*root, "credential")) {
    e.credential_name = string_at(credential, "name");
    e.credential_fingerprint = string_at(credential, "fingerprint");
  }
  return e;
}

}  // namespace sandgate::audit
