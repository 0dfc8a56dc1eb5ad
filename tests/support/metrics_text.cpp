#include "support/metrics_text.hpp"

#include <cstdlib>

namespace sandgate::test {

namespace {

// Parses `a="x",b="y"` (no escapes needed for sandgate's bounded label values).
std::map<std::string, std::string> parse_labels(std::string_view s) {
  std::map<std::string, std::string> out;
  while (!s.empty()) {
    const auto eq = s.find('=');
    if (eq == std::string_view::npos || eq + 1 >= s.size() || s[eq + 1] != '"') break;
    const auto close = s.find('"', eq + 2);
    if (close == std::string_view::npos) break;
    out[std::string(s.substr(0, eq))] = std::string(s.substr(eq + 2, close - eq - 2));
    s.remove_prefix(close + 1);
    if (!s.empty() && s.front() == ',') s.remove_prefix(1);
  }
  return out;
}

}  // namespace

std::optional<double> metric_value(std::string_view text, std::string_view name,
                                   const std::map<std::string, std::string>& labels) {
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    const auto name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos || line.substr(0, name_end) != name) continue;
    std::map<std::string, std::string> have;
    std::string_view rest = line.substr(name_end);
    if (rest.front() == '{') {
      const auto close = rest.find('}');
      if (close == std::string_view::npos) continue;
      have = parse_labels(rest.substr(1, close - 1));
      rest.remove_prefix(close + 1);
    }
    bool match = true;
    for (const auto& [k, v] : labels) {
      const auto it = have.find(k);
      if (it == have.end() || it->second != v) match = false;
    }
    if (!match) continue;
    const std::string value(rest.substr(rest.find_first_not_of(' ')));
    return std::strtod(value.c_str(), nullptr);
  }
  return std::nullopt;
}

}  // namespace sandgate::test
