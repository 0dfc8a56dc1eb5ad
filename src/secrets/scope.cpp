#include "secrets/scope.hpp"

#include <algorithm>

namespace sandgate::secrets {

namespace {

void sort_unique(std::vector<std::string>& items) {
  std::sort(items.begin(), items.end());
  items.erase(std::unique(items.begin(), items.end()), items.end());
}

void append_item(std::string& out, std::string_view item) {
  out += std::to_string(item.size());
  out += ':';
  out += item;
}

}  // namespace

void Scope::normalize() {
  for (std::string& repository : repositories) {
    for (char& c : repository) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
  }
  sort_unique(repositories);
  sort_unique(oauth_scopes);
}

std::string Scope::key() const {
  std::string out = "r";
  for (const std::string& r : repositories) append_item(out, r);
  out += ";p";
  for (const auto& [name, level] : permissions) {
    append_item(out, name);
    append_item(out, level);
  }
  out += ";s";
  for (const std::string& s : oauth_scopes) append_item(out, s);
  if (!sandbox.empty()) {
    out += ";b";
    append_item(out, sandbox);
  }
  return out;
}

}  // namespace sandgate::secrets
