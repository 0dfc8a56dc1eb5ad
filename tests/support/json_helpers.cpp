#include "support/json_helpers.hpp"

#include <boost/json/parse.hpp>

namespace sandgate::test {

const boost::json::value* json_at(const boost::json::object& o, std::string_view path) {
  const boost::json::object* current = &o;
  for (;;) {
    const auto dot = path.find('.');
    const std::string_view key = path.substr(0, dot);
    const boost::json::value* v = current->if_contains(key);
    if (!v) return nullptr;
    if (dot == std::string_view::npos) return v;
    current = v->if_object();
    if (!current) return nullptr;
    path.remove_prefix(dot + 1);
  }
}

std::optional<std::string> json_string(const boost::json::object& o, std::string_view path) {
  const auto* v = json_at(o, path);
  if (!v || !v->is_string()) return std::nullopt;
  return std::string(v->as_string());
}

std::optional<std::int64_t> json_int(const boost::json::object& o, std::string_view path) {
  const auto* v = json_at(o, path);
  if (!v) return std::nullopt;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  return std::nullopt;
}

std::optional<boost::json::object> parse_object(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return std::move(v.as_object());
}

}  // namespace sandgate::test
