#pragma once

// Internal to src/config: typed reads from a parsed toml++ tree that report every problem
// into an ErrorSink instead of stopping at the first. Nothing outside src/config includes
// this header, so TOML stays an implementation detail of the loader.

#include <toml++/toml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace sandgate::config::detail {

// Collects the errors of one file. `order` ranks the file among all files loaded so the
// final list can be sorted by file, then line and column.
class ErrorSink {
 public:
  struct Entry {
    std::size_t order = 0;
    ConfigError error;
  };

  ErrorSink(std::vector<Entry>& out, std::string file, std::size_t order)
      : out_(&out), file_(std::move(file)), order_(order) {}

  const std::string& file() const { return file_; }
  // Whether any file has an error so far (cross-checks wait until each file reads cleanly).
  bool any() const { return !out_->empty(); }

  void add(const toml::source_region& where, std::string key, std::string_view message);
  // An error with no position inside the file (missing file, missing top-level key).
  void add_unlocated(std::string key, std::string_view message);

 private:
  std::vector<Entry>* out_;
  std::string file_;
  std::size_t order_;
};

// `"text"` for a message, with '"', '\\' and control characters escaped so that one error
// stays one line.
std::string in_quotes(std::string_view text);

// "file:line:column" of a node, for messages that point at a second place.
std::string describe_location(const std::string& file, const toml::source_region& where);

// Dotted key paths as TOML would spell them: keys that are not bare are quoted
// (dns.hosts."origin.test"). Array indexes are 0-based: allow[2].
std::string join_key(std::string_view parent, std::string_view key);
std::string join_index(std::string_view parent, std::size_t index);

// Reports every key of `table` that is not in `known` as `unknown key "x"`, adding
// `; did you mean "y"?` when a known key is within edit distance 2.
void check_known_keys(const toml::table& table, std::string_view path,
                      std::initializer_list<std::string_view> known, ErrorSink& sink);

// The known name closest to `name` within edit distance 2 and fewer edits than `name` has
// characters, if any (first one on ties).
std::optional<std::string_view> closest_name(std::string_view name,
                                             const std::vector<std::string_view>& known);

// A table's entries in the order they were written (toml++ iterates in key order), for
// checks where "first" must mean first in the file.
std::vector<std::pair<const toml::key*, const toml::node*>> in_document_order(
    const toml::table& table);

// "string", "integer", "float", "boolean", "table", "array", "date", "time", "date-time".
std::string_view type_name(const toml::node& node);

// Typed reads. Each returns nullopt (or nullptr) after reporting a type or range error at
// the node, with `path` as the error's key.
std::optional<std::string> read_string(const toml::node& node, const std::string& path,
                                       ErrorSink& sink);
std::optional<bool> read_bool(const toml::node& node, const std::string& path, ErrorSink& sink);
// An integer within [min, max]; outside it: "must be between MIN and MAX, got V".
std::optional<std::int64_t> read_int(const toml::node& node, const std::string& path,
                                     std::int64_t min, std::int64_t max, ErrorSink& sink);
const toml::table* read_table(const toml::node& node, const std::string& path, ErrorSink& sink);

// One element of an array of strings, with what is needed to report an error about it.
struct StringItem {
  std::string value;
  std::string path;  // e.g. "profiles.default.allow[2]"
  toml::source_region where;
};

// An array whose elements must all be strings. A non-array is one error; each non-string
// element is its own error and is left out of the result.
std::optional<std::vector<StringItem>> read_string_array(const toml::node& node,
                                                         const std::string& path, ErrorSink& sink);

}  // namespace sandgate::config::detail
