#include "config/toml_reader.hpp"

#include <algorithm>
#include <utility>

namespace sandgate::config::detail {

namespace {

bool is_bare_key(std::string_view key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

// Levenshtein distance; names are short, so the O(n*m) table is fine.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + cost});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string type_error(std::string_view expected, const toml::node& got) {
  return "expected " + std::string(expected) + ", got " + std::string(type_name(got));
}

// Appends `text` with control characters as \xNN (and '"', '\\' backslashed when `quotes`),
// so that one error stays one line whatever a value or a policy reason contains.
void append_escaped(std::string& out, std::string_view text, bool quotes) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (quotes && (c == '"' || c == '\\')) {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
}

std::string escape_controls(std::string_view text) {
  std::string out;
  append_escaped(out, text, false);
  return out;
}

}  // namespace

std::string in_quotes(std::string_view text) {
  std::string out = "\"";
  append_escaped(out, text, true);
  out += '"';
  return out;
}

void ErrorSink::add(const toml::source_region& where, std::string key, std::string_view message) {
  out_->push_back({order_, ConfigError{file_, where.begin.line, where.begin.column, std::move(key),
                                       escape_controls(message)}});
}

void ErrorSink::add_unlocated(std::string key, std::string_view message) {
  out_->push_back({order_, ConfigError{file_, 0, 0, std::move(key), escape_controls(message)}});
}

std::string describe_location(const std::string& file, const toml::source_region& where) {
  return file + ":" + std::to_string(where.begin.line) + ":" + std::to_string(where.begin.column);
}

std::string join_key(std::string_view parent, std::string_view key) {
  std::string out(parent);
  if (!out.empty()) out += '.';
  out += is_bare_key(key) ? std::string(key) : in_quotes(key);
  return out;
}

std::string join_index(std::string_view parent, std::size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

std::optional<std::string_view> closest_name(std::string_view name,
                                             const std::vector<std::string_view>& known) {
  constexpr std::size_t kMaxDistance = 2;
  std::optional<std::string_view> best;
  std::size_t best_distance = kMaxDistance + 1;
  for (std::string_view candidate : known) {
    const std::size_t d = edit_distance(name, candidate);
    // Rewriting every character of a short name ("id" -> "git") is no hint.
    if (d < best_distance && d < name.size()) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

void check_known_keys(const toml::table& table, std::string_view path,
                      std::initializer_list<std::string_view> known, ErrorSink& sink) {
  const std::vector<std::string_view> names(known);
  for (auto&& [key, value] : table) {
    const std::string_view name = key.str();
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    std::string message = "unknown key " + in_quotes(name);
    if (const auto suggestion = closest_name(name, names)) {
      message += "; did you mean " + in_quotes(*suggestion) + "?";
    }
    sink.add(key.source(), join_key(path, name), std::move(message));
  }
}

std::vector<std::pair<const toml::key*, const toml::node*>> in_document_order(
    const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (auto&& [key, value] : table) entries.emplace_back(&key, &value);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    const auto& x = a.first->source().begin;
    const auto& y = b.first->source().begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  return entries;
}

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table:
      return "table";
    case toml::node_type::array:
      return "array";
    case toml::node_type::string:
      return "string";
    case toml::node_type::integer:
      return "integer";
    case toml::node_type::floating_point:
      return "float";
    case toml::node_type::boolean:
      return "boolean";
    case toml::node_type::date:
      return "date";
    case toml::node_type::time:
      return "time";
    case toml::node_type::date_time:
      return "date-time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::optional<std::string> read_string(const toml::node& node, const std::string& path,
                                       ErrorSink& sink) {
  if (const auto* s = node.as_string()) return s->get();
  sink.add(node.source(), path, type_error("a string", node));
  return std::nullopt;
}

std::optional<bool> read_bool(const toml::node& node, const std::string& path, ErrorSink& sink) {
  if (const auto* b = node.as_boolean()) return b->get();
  sink.add(node.source(), path, type_error("a boolean", node));
  return std::nullopt;
}

std::optional<std::int64_t> read_int(const toml::node& node, const std::string& path,
                                     std::int64_t min, std::int64_t max, ErrorSink& sink) {
  const auto* i = node.as_integer();
  if (i == nullptr) {
    sink.add(node.source(), path, type_error("an integer", node));
    return std::nullopt;
  }
  const std::int64_t value = i->get();
  if (value < min || value > max) {
    sink.add(node.source(), path,
             "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " +
                 std::to_string(value));
    return std::nullopt;
  }
  return value;
}

const toml::table* read_table(const toml::node& node, const std::string& path, ErrorSink& sink) {
  if (const auto* t = node.as_table()) return t;
  sink.add(node.source(), path, type_error("a table", node));
  return nullptr;
}

std::optional<std::vector<StringItem>> read_string_array(const toml::node& node,
                                                         const std::string& path, ErrorSink& sink) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    sink.add(node.source(), path, type_error("an array of strings", node));
    return std::nullopt;
  }
  std::vector<StringItem> items;
  items.reserve(array->size());
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    std::string element_path = join_index(path, i);
    if (const auto* s = element.as_string()) {
      items.push_back({s->get(), std::move(element_path), element.source()});
    } else {
      sink.add(element.source(), std::move(element_path), type_error("a string", element));
    }
  }
  return items;
}

}  // namespace sandgate::config::detail
