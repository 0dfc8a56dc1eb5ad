#include "policy/suggestion.hpp"

#include <algorithm>
#include <cstdio>

#include "policy/address_class.hpp"
#include "policy/host_pattern.hpp"
#include "policy/path.hpp"
#include "policy/request_rules.hpp"

namespace sandgate::policy {

namespace {

bool covers(const SandboxHome& home, std::uint16_t port) {
  return std::find(home.ports.begin(), home.ports.end(), port) != home.ports.end();
}

// What would allow it, before it is placed: one `KEY = [ITEM]` line (ITEM a TOML string whose
// text is `pattern`), or an array-of-tables block of `key` whose body is `lines`.
struct Rule {
  std::string key;                 // "allow", "allow_cidrs", ..., or "http_rules", "git"
  std::string item;                // a line's one item, as written (the pattern)
  std::string opaque;              // a second line's item: `opaque` for the same host and port
  std::vector<std::string> lines;  // a block's body
  std::string why_none;            // neither: why
  bool is_block() const { return !lines.empty(); }
};

Rule none(std::string why) {
  Rule r;
  r.why_none = std::move(why);
  return r;
}

Rule line(std::string key, std::string item) {
  Rule r;
  r.key = std::move(key);
  r.item = std::move(item);
  return r;
}

// A name as a host pattern (with `suffix`, ":PORT" or ""), when the config can write it.
std::optional<std::string> pattern_of(const Host& host, std::string_view suffix) {
  std::string pattern = host.name + std::string(suffix);
  if (!host.is_name() || !parse_host_pattern(pattern)) return std::nullopt;
  return pattern;
}

// The address as allow_host_services and allow_cidrs write it: an IPv4 address translated to
// on the way (IPv4-mapped, NAT64) as the IPv4 address itself, which opens those forms too.
IpAddress spelled(const IpAddress& a) {
  const auto v4 = translated_ipv4(a);
  return v4 ? *v4 : a;
}

Rule host_service(const IpAddress& a, std::uint16_t port) {
  // A tunnelled form (6to4, Teredo, IPv4-compatible) names an IPv4 address no entry opens.
  if (embedded_ipv4(a) && !translated_ipv4(a)) {
    return none(
        "an IPv4 address tunnelled in IPv6 (6to4, Teredo, IPv4-compatible) cannot be "
        "opened; dial the IPv4 address");
  }
  return line("allow_host_services", endpoint_text({spelled(a), port}));
}

Rule http_rule(const SandboxHome& home, const Host& host, std::uint16_t port, const Decision& d) {
  std::string method = d.refused_method;  // as config writes it (a rule matches any case)
  for (char& c : method) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  const std::string& path = d.refused_path;
  if (method.empty() || !valid_rule_method(method)) {
    return none("no http rule can name the method " + method);
  }
  if (path.find('*') != std::string::npos || !PathGlob::parse(path)) {
    return none("no path glob names this path exactly");
  }
  const bool bare = port == 443 && covers(home, port);
  const auto pattern = pattern_of(host, bare ? "" : ":" + std::to_string(port));
  if (!pattern) return none("no host pattern names this host");
  Rule r;
  r.key = "http_rules";
  r.lines = {"hosts = [" + toml_string(*pattern) + "]", "methods = [" + toml_string(method) + "]",
             "paths = [" + toml_string(path) + "]", "action = \"allow\""};
  return r;
}

Rule git_rule(const SandboxHome& home, const Host& host, std::uint16_t port, const Decision& d) {
  // Only when no git rule matched the repository: a new rule after one that matched would
  // never be read.
  if (!d.rule.empty()) {
    return none("git rule " + d.rule +
                " matches the repository first and does not allow this operation; change it");
  }
  if (d.git.op == GitOperation::none) return none("not a git request");
  const bool bare = port == 443 && covers(home, port);
  const auto pattern = pattern_of(host, bare ? "" : ":" + std::to_string(port));
  const std::string repo = "/" + d.git.repo;
  if (!pattern || d.git.repo.empty() || repo.find('*') != std::string::npos ||
      !PathGlob::parse_repo(repo)) {
    return none("no repository pattern names this repository");
  }
  Rule r;
  r.key = "git";
  r.lines = {"repos = [" + toml_string(*pattern + repo) + "]",
             "allow = [" + toml_string(git_operation_name(d.git.op)) + "]"};
  return r;
}

// What would allow it, wherever the sandbox is defined.
Rule rule_for(const SandboxHome& home, const Host& host, std::optional<std::uint16_t> port,
              const Decision& d, EntryMode mode) {
  // A transparent stream on a web port whose bytes are neither HTTP nor TLS passes only to a
  // host an `opaque` entry names as well (Policy::decide), and never to an address.
  const bool raw_web = mode == EntryMode::tcp && port && (*port == 80 || *port == 443);
  switch (d.reason) {
    case Reason::no_matching_rule:
    case Reason::port_not_allowed:
    case Reason::ip_literal_not_allowed:
    case Reason::special_address:
      if (host.is_name()) {
        // A DNS question names no port: the name on the sandbox's ports, which is what
        // resolution asks for (a rule without :PORT needs a non-empty `ports`).
        const std::string suffix = port                 ? ":" + std::to_string(*port)
                                   : home.ports.empty() ? ":443"
                                                        : "";
        const auto pattern = pattern_of(host, suffix);
        if (!pattern) return none("no host pattern names this host");
        Rule r = line("allow", *pattern);
        if (raw_web) r.opaque = *pattern;
        return r;
      }
      if (!host.is_address()) break;
      if (!port) return none("an IP literal is never resolved: the client dials it directly");
      if (raw_web) {
        return none(
            "a stream to an address on port 80 or 443 must carry HTTP or TLS: `opaque` "
            "names hosts only");
      }
      // Its own range opens it on the sandbox's ports; only an exact allow_host_services entry
      // opens another port of it (or of a host name resolving to it).
      if (covers(home, *port)) {
        const IpAddress a = spelled(host.address);
        return line("allow_cidrs", a.to_string() + "/" + std::to_string(a.is_v4() ? 32 : 128));
      }
      return host_service(host.address, *port);
    case Reason::unrecognized_protocol:
      if (!port) break;
      if (const auto pattern = pattern_of(host, ":" + std::to_string(*port))) {
        return line("opaque", *pattern);
      }
      return none(
          "`opaque` names hosts only: a stream to an IP literal on port 80 or 443 must "
          "carry HTTP or TLS");
    case Reason::host_address:
      if (!host.is_address() || !port) break;
      if (raw_web) {
        return none(
            "a stream to an address on port 80 or 443 must carry HTTP or TLS: `opaque` "
            "names hosts only");
      }
      return host_service(host.address, *port);
    case Reason::no_matching_http_rule:
      if (!port || !host.is_name()) break;
      return http_rule(home, host, *port, d);
    case Reason::git_not_allowed:
      if (!port || !host.is_name()) break;
      return git_rule(home, host, *port, d);
    case Reason::denied_by_rule:
    case Reason::denied_by_http_rule:
      return none("rule " + d.rule +
                  " refuses it and comes first (deny beats allow); remove or narrow that rule");
    case Reason::always_denied_address:
      return none(std::string(class_name(d.address_class)) +
                  " addresses are refused whatever the config says");
    case Reason::proxy_loop:
      return none("it is one of sandgate's own listeners");
    case Reason::invalid_host:
      return none("not a valid host name or IP address");
    case Reason::unknown_sandbox:
      return none("no such sandbox");
    case Reason::unnamed_destination:
      return none(
          "no DNS answer of the sandbox names this address: resolve its name through "
          "sandgate's DNS listener, or open the address itself (decide it as an IP "
          "literal for the line)");
    case Reason::stale_dns_answer:
      return none("a reload allows the name now: resolve it again");
    case Reason::ambiguous_path:
      return none("the path holds an encoding servers read differently; no rule matches it");
    default:
      break;
  }
  return none("decided on what the connection carried (" + std::string(reason_name(d.reason)) +
              "), which no config line changes");
}

}  // namespace

std::string toml_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string toml_key(std::string_view key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return bare ? std::string(key) : toml_string(key);
}

Suggestion suggest(const SandboxHome& home, const Host& host, std::optional<std::uint16_t> port,
                   const Decision& d, EntryMode mode) {
  Suggestion s;
  if (d.allowed && !d.audit) return s;
  Rule rule = rule_for(home, host, port, d, mode);
  if (!rule.why_none.empty()) {
    s.why_none = std::move(rule.why_none);
    return s;
  }
  const bool launched =
      home.kind == SandboxHome::Kind::launched || home.kind == SandboxHome::Kind::unknown;
  const bool allow_line = !rule.is_block() && rule.key == "allow" && rule.opaque.empty();
  if (launched && allow_line)
    s.launcher_allow = "sandgate-launch --allow " + toml_string(rule.item);
  // The table the rule goes in, as a header names it.
  std::string table;
  switch (home.kind) {
    case SandboxHome::Kind::table:
      s.place = Suggestion::Place::table;
      table = "sandboxes." + toml_key(home.id);
      break;
    case SandboxHome::Kind::file:
      s.place = Suggestion::Place::file;
      s.target = home.file;
      break;
    case SandboxHome::Kind::launched:
    case SandboxHome::Kind::unknown:
      if (!home.profile.empty()) {
        s.place = Suggestion::Place::table;
        table = "profiles." + toml_key(home.profile);
      } else if (allow_line) {
        s.place = Suggestion::Place::launcher;
        s.target = "sandgate-launch";
        s.toml = "--allow " + toml_string(rule.item);
        return s;
      } else {
        s.place = Suggestion::Place::table;
        table = "profiles.NAME";
        s.profile_flag = "--profile NAME";
      }
      break;
  }
  if (s.place == Suggestion::Place::table) s.target = "[" + table + "]";
  if (!rule.is_block()) {
    s.toml = rule.key + " = [" + toml_string(rule.item) + "]";
    if (!rule.opaque.empty()) s.toml += "\nopaque = [" + toml_string(rule.opaque) + "]";
    return s;
  }
  s.block = true;
  s.toml = "[[" + (table.empty() ? rule.key : table + "." + rule.key) + "]]";
  for (const std::string& l : rule.lines) s.toml += "\n" + l;
  return s;
}

std::string Suggestion::text() const {
  switch (place) {
    case Place::none:
      return {};
    case Place::launcher:
      return "sandgate-launch " + toml;
    case Place::file:
      return target + ": " + toml;
    case Place::table:
      if (block) {
        return profile_flag.empty() ? toml
                                    : toml + "\n# then run sandgate-launch with " + profile_flag;
      }
      return profile_flag.empty() ? target + " " + toml
                                  : target + " " + toml + " (sandgate-launch " + profile_flag + ")";
  }
  return {};
}

}  // namespace sandgate::policy
