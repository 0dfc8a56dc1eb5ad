#include "config/request_rules.hpp"

#include <optional>

namespace sandgate::config::detail {

namespace {

// The tables of an array of tables (`[[x.http_rules]]` or `http_rules = [{...}]`), each with
// its error path; a non-table element is reported and left out.
std::vector<std::pair<const toml::table*, std::string>> read_rule_tables(const toml::node& node,
                                                                         const std::string& path,
                                                                         ErrorSink& sink) {
  std::vector<std::pair<const toml::table*, std::string>> out;
  const auto* array = node.as_array();
  if (array == nullptr) {
    sink.add(node.source(), path,
             "expected an array of tables, got " + std::string(type_name(node)));
    return out;
  }
  for (std::size_t i = 0; i < array->size(); ++i) {
    std::string item_path = join_index(path, i);
    if (const toml::table* t = read_table(*array->get(i), item_path, sink)) {
      out.emplace_back(t, std::move(item_path));
    }
  }
  return out;
}

// A list key of a rule table, every element parsed by `parse` (a bad one is reported as an
// invalid `what` with the parser's reason). `required`: a missing key is an error. An empty
// list is always one: omitting the key says "any" where that is meant.
template <class T, class Parse>
std::vector<T> read_list(const toml::table& rule, std::string_view key, const std::string& path,
                         bool required, std::string_view empty_hint, std::string_view what,
                         Parse parse, ErrorSink& sink) {
  std::vector<T> out;
  const std::string key_path = join_key(path, key);
  const toml::node* node = rule.get(key);
  if (node == nullptr) {
    if (required) sink.add(rule.source(), key_path, "missing required key");
    return out;
  }
  const auto items = read_string_array(*node, key_path, sink);
  if (!items) return out;
  if (items->empty() && node->as_array()->empty()) {
    sink.add(node->source(), key_path, "must not be empty" + std::string(empty_hint));
    return out;
  }
  for (const StringItem& item : *items) {
    std::string reason;
    if (std::optional<T> parsed = parse(item.value, &reason)) {
      out.push_back(std::move(*parsed));
    } else {
      sink.add(item.where, item.path,
               "invalid " + std::string(what) + " " + in_quotes(item.value) +
                   (reason.empty() ? "" : ": ") + reason);
    }
  }
  return out;
}

// A string key with a few allowed values; nullopt when absent (or reported).
std::optional<std::string> read_choice(const toml::table& rule, std::string_view key,
                                       const std::string& path, bool required,
                                       std::initializer_list<std::string_view> choices,
                                       ErrorSink& sink) {
  const std::string key_path = join_key(path, key);
  const toml::node* node = rule.get(key);
  if (node == nullptr) {
    if (required) sink.add(rule.source(), key_path, "missing required key");
    return std::nullopt;
  }
  auto value = read_string(*node, key_path, sink);
  if (!value) return std::nullopt;
  for (const std::string_view c : choices) {
    if (*value == c) return value;
  }
  std::string expected;
  std::size_t n = 0;
  for (const std::string_view c : choices) {
    if (n > 0) expected += ++n == choices.size() ? " or " : ", ";
    if (n == 0) n = 1;
    expected += in_quotes(c);
  }
  sink.add(node->source(), key_path, "expected " + expected + ", got " + in_quotes(*value));
  return std::nullopt;
}

policy::RuleMode read_mode(const toml::table& rule, const std::string& path, ErrorSink& sink) {
  const auto mode = read_choice(rule, "mode", path, false, {"enforce", "audit"}, sink);
  return mode == "audit" ? policy::RuleMode::audit : policy::RuleMode::enforce;
}

}  // namespace

void read_http_rules(const toml::table& table, const std::string& path,
                     const std::string& origin_prefix, std::vector<policy::HttpRule>& out,
                     ErrorSink& sink) {
  const toml::node* node = table.get("http_rules");
  if (node == nullptr) return;
  const auto tables = read_rule_tables(*node, join_key(path, "http_rules"), sink);
  const std::string origin = join_key(origin_prefix, "http_rules");
  std::size_t index = 0;
  for (const auto& [rule, rule_path] : tables) {
    check_known_keys(*rule, rule_path, {"hosts", "methods", "paths", "path_case", "action", "mode"},
                     sink);
    policy::HttpRule r;
    r.hosts = read_list<policy::HostPattern>(
        *rule, "hosts", rule_path, true, "", "host pattern",
        [](std::string_view text, std::string* error) {
          return policy::parse_host_pattern(text, error);
        },
        sink);
    r.methods = read_list<std::string>(
        *rule, "methods", rule_path, false, "; leave it out to match any method", "method",
        [](std::string_view text, std::string* error) -> std::optional<std::string> {
          if (!policy::valid_rule_method(text, error)) return std::nullopt;
          return std::string(text);
        },
        sink);
    r.paths = read_list<policy::PathGlob>(
        *rule, "paths", rule_path, false, "; leave it out to match any path", "path glob",
        [](std::string_view text, std::string* error) {
          return policy::PathGlob::parse(text, error);
        },
        sink);
    if (const auto path_case =
            read_choice(*rule, "path_case", rule_path, false, {"sensitive", "insensitive"}, sink)) {
      r.path_case =
          *path_case == "insensitive" ? policy::PathCase::insensitive : policy::PathCase::sensitive;
    }
    r.allow = read_choice(*rule, "action", rule_path, true, {"allow", "deny"}, sink) == "allow";
    r.mode = read_mode(*rule, rule_path, sink);
    // The index the operator sees in their file, also for a rule left out after an error.
    r.origin = join_index(origin, index++);
    out.push_back(std::move(r));
  }
}

void read_git_rules(const toml::table& table, const std::string& path,
                    const std::string& origin_prefix, std::vector<policy::GitRule>& out,
                    ErrorSink& sink) {
  const toml::node* node = table.get("git");
  if (node == nullptr) return;
  const auto tables = read_rule_tables(*node, join_key(path, "git"), sink);
  const std::string origin = join_key(origin_prefix, "git");
  std::size_t index = 0;
  for (const auto& [rule, rule_path] : tables) {
    check_known_keys(*rule, rule_path, {"repos", "allow", "mode"}, sink);
    policy::GitRule r;
    r.repos = read_list<policy::RepoPattern>(
        *rule, "repos", rule_path, true, "", "repository pattern",
        [](std::string_view text, std::string* error) {
          return policy::parse_repo_pattern(text, error);
        },
        sink);
    const std::string allow_path = join_key(rule_path, "allow");
    if (const toml::node* allow = rule->get("allow")) {
      if (const auto items = read_string_array(*allow, allow_path, sink)) {
        for (const StringItem& item : *items) {
          if (item.value == "fetch") {
            r.fetch = true;
          } else if (item.value == "push") {
            r.push = true;
          } else {
            sink.add(item.where, item.path,
                     "invalid git operation " + in_quotes(item.value) +
                         ": expected \"fetch\" or \"push\"");
          }
        }
      }
    } else {
      sink.add(rule->source(), allow_path,
               "missing required key (allow = [] refuses both fetch and push)");
    }
    r.mode = read_mode(*rule, rule_path, sink);
    r.origin = join_index(origin, index++);
    out.push_back(std::move(r));
  }
}

}  // namespace sandgate::config::detail
