#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace sandgate::test {

// The value at a dotted path ("event.code", "labels.sandbox_id"), or nullptr.
const boost::json::value* json_at(const boost::json::object& o, std::string_view path);
// The string at a dotted path, or nullopt when absent or not a string.
std::optional<std::string> json_string(const boost::json::object& o, std::string_view path);
// The integer at a dotted path, or nullopt.
std::optional<std::int64_t> json_int(const boost::json::object& o, std::string_view path);
// Parses text as one JSON object; nullopt when it is not one.
std::optional<boost::json::object> parse_object(std::string_view text);

}  // namespace sandgate::test
