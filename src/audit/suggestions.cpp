// merge_suggestions: the placed suggestions (policy::Suggestion::text) turned into one
// paste-ready block per place.
#include <algorithm>
#include <map>
#include <set>

#include "audit/report.hpp"

namespace sandgate::audit {

namespace {

constexpr std::string_view kLauncher = "sandgate-launch ";

// What one placed line says: where it goes and what goes there.
struct Placed {
  std::string target;
  std::string kind;
  std::string line;
  std::string note;    // a trailing "(sandgate-launch --profile NAME)"
  bool block = false;  // `line` is a whole `[[...]]` block
};

// "[[sandboxes.ci.http_rules]]\n..." -> "[sandboxes.ci]": the table the block's array is in.
std::string table_of_block(std::string_view s) {
  const std::size_t close = s.find("]]");
  const std::string_view header = s.substr(2, close == std::string_view::npos ? 0 : close - 2);
  const std::size_t dot = header.rfind('.');
  return dot == std::string_view::npos ? std::string()
                                       : "[" + std::string(header.substr(0, dot)) + "]";
}

Placed split(std::string_view s) {
  Placed p;
  if (s.starts_with(kLauncher)) {
    p.target = "sandgate-launch";
    p.kind = "launcher";
    p.line = s.substr(kLauncher.size());
    return p;
  }
  if (s.starts_with("[[")) {
    p.target = table_of_block(s);
    p.kind = p.target.empty() ? "other" : "table";
    p.line = s;
    p.block = true;
    return p;
  }
  if (s.starts_with('[')) {
    if (const std::size_t close = s.find("] "); close != std::string_view::npos) {
      p.target = s.substr(0, close + 1);
      p.kind = "table";
      std::string_view rest = s.substr(close + 2);
      if (const std::size_t note = rest.rfind(" ("); note != std::string_view::npos &&
                                                     rest.ends_with(')') &&
                                                     rest.substr(note + 2).starts_with(kLauncher)) {
        p.note = rest.substr(note + 1);
        rest = rest.substr(0, note);
      }
      p.line = rest;
      return p;
    }
  }
  // "FILE: LINE": a hand-written drop-in; the line starts with a key.
  if (const std::size_t colon = s.find(": ");
      colon != std::string_view::npos && s.substr(0, colon).ends_with(".toml")) {
    p.target = s.substr(0, colon);
    p.kind = "file";
    p.line = s.substr(colon + 2);
    p.block = p.line.starts_with("[[");
    return p;
  }
  p.kind = "other";
  p.line = s;
  return p;
}

// `KEY = [A, B]` -> KEY and its top-level items ("A", "B"); false for another shape.
bool split_array_line(std::string_view line, std::string& key, std::vector<std::string>& items) {
  const std::size_t eq = line.find(" = [");
  if (eq == std::string_view::npos || eq == 0 || !line.ends_with(']')) return false;
  key = line.substr(0, eq);
  const std::string_view body = line.substr(eq + 4, line.size() - eq - 5);
  int depth = 0;
  bool quoted = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= body.size(); ++i) {
    const char c = i < body.size() ? body[i] : ',';
    if (quoted) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        quoted = false;
      }
      continue;
    }
    if (c == '"') quoted = true;
    if (c == '[' || c == '{') ++depth;
    if (c == ']' || c == '}') --depth;
    if (c == ',' && depth == 0) {
      std::string_view item = body.substr(start, i - start);
      while (item.starts_with(' ')) item.remove_prefix(1);
      while (item.ends_with(' ')) item.remove_suffix(1);
      if (!item.empty()) items.emplace_back(item);
      start = i + 1;
    }
  }
  return depth == 0 && !quoted && !items.empty();
}

struct Building {
  SuggestionBlock block;
  std::vector<std::string> keys;  // in order of first appearance
  std::map<std::string, std::vector<std::string>> items;
  std::set<std::string> seen_items;
  std::vector<std::string> verbatim;
  std::vector<std::string> blocks;
  std::set<std::string> sandboxes;
};

}  // namespace

std::vector<SuggestionBlock> merge_suggestions(const std::vector<DenialGroup>& denials) {
  std::map<std::pair<std::string, std::string>, Building> blocks;  // (kind, target)
  for (const DenialGroup& g : denials) {
    if (g.suggestion.empty()) continue;
    const Placed p = split(g.suggestion);
    Building& b = blocks[{p.kind, p.target}];
    b.block.target = p.target;
    b.block.kind = p.kind;
    b.block.denials += g.count;
    b.sandboxes.insert(g.sandbox);
    std::string key;
    std::vector<std::string> items;
    if (p.block) {
      if (b.seen_items.insert(p.line).second) b.blocks.push_back(p.line);
    } else if (p.kind == "launcher") {
      if (b.seen_items.insert(p.line).second) b.verbatim.push_back(p.line);
    } else {
      // One key line, or two (`allow` then `opaque` for a raw stream on a web port).
      std::string_view rest = p.line;
      while (!rest.empty()) {
        const std::size_t nl = std::min(rest.find('\n'), rest.size());
        const std::string one(rest.substr(0, nl));
        rest.remove_prefix(std::min(nl + 1, rest.size()));
        key.clear();
        items.clear();
        if (split_array_line(one, key, items)) {
          if (!b.items.contains(key)) b.keys.push_back(key);
          auto& list = b.items[key];
          for (std::string& item : items) {
            if (b.seen_items.insert(key + "\n" + item).second) list.push_back(std::move(item));
          }
        } else if (b.seen_items.insert(one).second) {
          b.verbatim.push_back(one);
        }
      }
    }
    if (!p.note.empty() && b.seen_items.insert("note\n" + p.note).second) {
      b.verbatim.push_back("# then run with " + p.note.substr(1, p.note.size() - 2));
    }
  }
  std::vector<SuggestionBlock> out;
  for (auto& [id, b] : blocks) {
    if (b.block.kind == "launcher") {
      std::string command = "sandgate-launch";
      for (const std::string& flag : b.verbatim) command += " " + flag;
      b.block.lines.push_back(std::move(command));
    } else {
      for (const std::string& key : b.keys) {
        std::string line = key + " = [";
        const auto& list = b.items[key];
        for (std::size_t i = 0; i < list.size(); ++i) line += (i == 0 ? "" : ", ") + list[i];
        b.block.lines.push_back(line + "]");
      }
      for (std::string& v : b.verbatim) b.block.lines.push_back(std::move(v));
      b.block.blocks = std::move(b.blocks);
    }
    b.block.sandboxes.assign(b.sandboxes.begin(), b.sandboxes.end());
    out.push_back(std::move(b.block));
  }
  return out;
}

}  // namespace sandgate::audit
