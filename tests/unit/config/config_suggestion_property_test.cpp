// Every suggestion policy::suggest makes, applied where it says, loads and allows what was
// refused (issue 37). Refusals of every kind are generated over a few base configs (sandboxes
// of the main file, a hand-written drop-in, launched sandboxes with and without a profile),
// each suggestion is applied to the TOML text as an operator would, the result is loaded by
// the real loader (as --check-config does), and the real policy decides again.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "policy/address_set.hpp"
#include "policy/host.hpp"
#include "policy/policy.hpp"
#include "policy/request.hpp"
#include "policy/suggestion.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::config {
namespace {

using policy::Suggestion;

// The files of one config: the main file and its drop-ins, by name relative to the directory.
using Files = std::map<std::string, std::string>;

constexpr std::string_view kMarker = "# written by sandgate-launch; removed at down\n";

// Sandboxes of every kind, over profiles with and without ports, request rules in both the
// profile and the sandbox, and keys both present and absent in the tables they go in.
Files rich_base() {
  Files f;
  f["sandgate.toml"] = R"([interception]
ca_cert = "ca.pem"
ca_key = "ca.key"

[launcher]
pool = "10.201.0.0/16"

[profiles.default]
allow = ["*.github.com", "github.com", "api.example.com", "registry.npmjs.org:443"]
deny = ["gist.github.com"]
allow_cidrs = ["10.0.0.0/8"]

[[profiles.default.http_rules]]
hosts = ["api.example.com"]
methods = ["GET"]
action = "allow"

[[profiles.default.git]]
repos = ["github.com/acme/*"]
allow = ["fetch"]

[profiles.narrow]
ports = [443]
allow = ["pkg.example.dev"]

[profiles.noports]
ports = []
allow = ["only.example:8443"]

[sandboxes.ci]
token = "t1"
profile = "default"
allow = ["uploads.example.com:8443"]

[[sandboxes.ci.http_rules]]
hosts = ["uploads.example.com:8443"]
methods = ["PUT"]
action = "allow"

[sandboxes."ci.dotted"]
token = "t2"
profile = "narrow"

[sandboxes.bare]
token = "t3"
allow = ["x.example"]
deny_cidrs = ["192.0.2.0/24"]

[sandboxes.wide]
token = "t4"
allow_all_hosts = true

[sandboxes.closed]
token = "t5"
profile = "noports"
)";
  f["sandboxes.d/hand.toml"] = R"(id = "hand"
token = "t6"
allow = ["a.example"]

[[http_rules]]
hosts = ["a.example"]
methods = ["GET"]
action = "allow"
)";
  f["sandboxes.d/l1.toml"] = std::string(kMarker) +
                             "id = \"l1\"\nprofile = \"default\"\nsources = [\"10.201.0.2\"]\n"
                             "allow = [\"extra.example\"]\n";
  f["sandboxes.d/l2.toml"] =
      std::string(kMarker) +
      "id = \"l2\"\nsources = [\"10.201.0.6\"]\nallow = [\"extra.example\"]\n";
  f["sandboxes.d/l3.toml"] =
      std::string(kMarker) +
      "id = \"l3\"\nprofile = \"narrow\"\nsources = [\"10.201.0.10\"]\nallow = []\n";
  return f;
}

// No interception, no rules at all in the tables suggestions go in: every key is new there.
Files sparse_base() {
  Files f;
  f["sandgate.toml"] = R"([profiles.empty]

[sandboxes.s1]
token = "t1"

[sandboxes.s2]
token = "t2"
profile = "empty"
ports = [8080]
)";
  f["sandboxes.d/hand.toml"] = "id = \"hand2\"\ntoken = \"t3\"\n";
  f["sandboxes.d/l4.toml"] =
      std::string(kMarker) +
      "id = \"l4\"\nprofile = \"empty\"\nsources = [\"10.201.0.14\"]\nallow = []\n";
  f["sandboxes.d/l5.toml"] =
      std::string(kMarker) + "id = \"l5\"\nsources = [\"10.201.0.18\"]\nallow = []\n";
  return f;
}

Config load(const Files& files) {
  test::TempDir dir;
  std::filesystem::create_directories(dir.path() / "sandboxes.d");
  for (const auto& [name, text] : files) dir.write(name, text);
  return load_config(dir.file("sandgate.toml"));
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// Puts `KEY = [ITEM]` into the lines [begin, end) of a table: into KEY's array when the table
// has that key (TOML allows a key once per table), else as a new line at `insert_at`.
void put_line(std::vector<std::string>& lines, std::size_t begin, std::size_t end,
              std::size_t insert_at, const std::string& toml) {
  const std::size_t eq = toml.find(" = [");
  ASSERT_NE(eq, std::string::npos) << toml;
  const std::string key = toml.substr(0, eq);
  const std::string item = toml.substr(eq + 4, toml.size() - eq - 5);
  for (std::size_t i = begin; i < end; ++i) {
    if (!lines[i].starts_with(key + " = [")) continue;
    const std::string rest = lines[i].substr(key.size() + 4);
    lines[i] = key + " = [" + item + (rest.starts_with(']') ? "" : ", ") + rest;
    return;
  }
  lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(insert_at), toml);
}

bool is_header(const std::string& line) {
  return line.starts_with('[');
}

// Applies `s` as an operator would, where it says. `launched`: the drop-in of the sandbox the
// suggestion is for when sandgate-launch made it (its next run takes the flag or profile).
void apply(Files& files, const Suggestion& s, const std::string& launched) {
  switch (s.place) {
    case Suggestion::Place::none:
      FAIL() << "nothing to apply";
    case Suggestion::Place::launcher: {
      ASSERT_TRUE(s.toml.starts_with("--allow ")) << s.toml;
      ASSERT_FALSE(launched.empty()) << s.text();
      std::vector<std::string> lines = split_lines(files[launched]);
      put_line(lines, 0, lines.size(), lines.size(), "allow = [" + s.toml.substr(8) + "]");
      files[launched] = join_lines(lines);
      return;
    }
    case Suggestion::Place::file: {
      std::string& text = files.at("sandboxes.d/" + s.target.substr(s.target.rfind('/') + 1));
      if (s.block) {
        text += "\n" + s.toml + "\n";
        return;
      }
      std::vector<std::string> lines = split_lines(text);
      for (const std::string& key_line : split_lines(s.toml)) {
        std::size_t top = 0;  // the top-level keys end at the first table header
        while (top < lines.size() && !is_header(lines[top])) ++top;
        put_line(lines, 0, top, top, key_line);
      }
      text = join_lines(lines);
      return;
    }
    case Suggestion::Place::table: {
      std::string& text = files["sandgate.toml"];
      if (s.block) {
        text += "\n" + s.toml + "\n";
      } else {
        std::vector<std::string> lines = split_lines(text);
        auto header = std::find(lines.begin(), lines.end(), s.target);
        if (header == lines.end()) {  // a profile to make
          lines.push_back("");
          lines.push_back(s.target);
          header = lines.end() - 1;
        }
        const std::size_t begin = static_cast<std::size_t>(header - lines.begin()) + 1;
        for (const std::string& key_line : split_lines(s.toml)) {
          std::size_t end = begin;
          while (end < lines.size() && !is_header(lines[end])) ++end;
          put_line(lines, begin, end, begin, key_line);
        }
        text = join_lines(lines);
      }
      if (!s.profile_flag.empty()) {  // the next run names the profile
        EXPECT_EQ(s.profile_flag, "--profile NAME");
        ASSERT_FALSE(launched.empty()) << s.text();
        std::vector<std::string> lines = split_lines(files[launched]);
        lines.insert(lines.begin() + 2, "profile = \"NAME\"");
        files[launched] = join_lines(lines);
      }
      return;
    }
  }
}

// One question and how the policy answers it.
struct Question {
  std::string sandbox;
  std::string host;
  std::optional<std::uint16_t> port;  // nullopt: a DNS question
  policy::EntryMode mode = policy::EntryMode::http;
  // Set: the address a name resolved to, checked as the dialler checks it (check_address).
  std::optional<policy::IpAddress> resolved;
  std::vector<policy::IpAddress> live;  // the host's own addresses for check_address
  std::string method;                   // set: one request (decide_request)
  std::string target;

  std::string show() const {
    std::string out = sandbox + " " + host + ":" + (port ? std::to_string(*port) : "dns");
    if (resolved) out += " -> " + resolved->to_string();
    if (!method.empty()) out += " " + method + " " + target;
    return out;
  }
};

Question question(const std::string& sandbox, const std::string& host,
                  std::optional<std::uint16_t> port,
                  policy::EntryMode mode = policy::EntryMode::http) {
  Question q;
  q.sandbox = sandbox;
  q.host = host;
  q.port = port;
  q.mode = mode;
  return q;
}

// The verdict, and the host the suggestion is for (the address, for a resolved one).
std::pair<policy::Decision, policy::Host> ask(const policy::Policy& p, const Question& q) {
  const policy::Host host = policy::normalize_host(q.host);
  if (!q.port) return {p.decide(q.sandbox, host, 0, policy::EntryMode::dns), host};
  if (q.resolved) {
    const policy::AddressSet live(q.live);
    return {p.check_address(q.sandbox, *q.resolved, *q.port, live),
            policy::Host{policy::Host::Kind::address, {}, *q.resolved, {}}};
  }
  if (!q.method.empty()) {
    policy::RequestFacts f;
    f.sandbox = q.sandbox;
    f.host = &host;
    f.port = *q.port;
    f.method = q.method;
    f.path = q.target;
    f.intercepted = &host;
    f.intercepted_port = *q.port;
    return {policy::decide_request(p, f), host};
  }
  return {p.decide(q.sandbox, host, *q.port, q.mode), host};
}

std::vector<Question> questions(const Config& c) {
  const std::vector<std::string> names = {
      "github.com",         "api.github.com",       "gist.github.com",
      "api.example.com",    "uploads.example.com",  "new.example.org",
      "pkg.example.dev",    "only.example",         "x.example",
      "a.example",          "extra.example",        "Deep.Sub.Example.NET.",
      "registry.npmjs.org", "xn--bcher-kva.example"};
  const std::vector<std::uint16_t> ports = {22, 53, 80, 443, 8080, 8443};
  const std::vector<std::string> literals = {
      "8.8.8.8",     "10.1.2.3",         "127.0.0.1",          "100.64.0.1",
      "192.168.1.1", "192.0.2.5",        "169.254.169.254",    "[2001:db8::1]",
      "[::1]",       "[::ffff:8.8.4.4]", "[64:ff9b::808:808]", "[2002:808:808::1]",
      "10.201.0.1",  "0.0.0.0",          "2130706433"};
  const std::vector<std::string> resolved = {"10.9.9.9", "127.0.0.2", "192.168.7.7", "192.168.50.1",
                                             "[fd00::7]"};
  std::vector<Question> out;
  for (const Sandbox& sb : c.sandboxes) {
    const std::string& id = sb.spec.id;
    for (const std::string& n : names) {
      out.push_back(question(id, n, std::nullopt));
      for (const std::uint16_t port : ports) {
        out.push_back(question(id, n, port));
        if (port == 80 || port == 443) out.push_back(question(id, n, port, policy::EntryMode::tcp));
        for (const std::string& r : resolved) {
          Question q = question(id, n, port);
          q.resolved = policy::normalize_host(r).address;
          q.live = {policy::normalize_host("192.168.50.1").address};
          out.push_back(q);
        }
      }
    }
    for (const std::string& l : literals) {
      for (const std::uint16_t port : ports) {
        out.push_back(question(id, l, port));
        if (port == 443) out.push_back(question(id, l, port, policy::EntryMode::tcp));
      }
    }
    struct Request {
      const char* host;
      std::uint16_t port;
      const char* method;
      const char* target;
    };
    const Request requests[] = {
        {"api.example.com", 443, "POST", "/repos/acme/widgets?x=1"},
        {"api.example.com", 443, "delete", "/a/./b/%7Euser"},
        {"api.example.com", 443, "GET", "/ok"},
        {"api.example.com", 443, "GET", "/repos/a%2Fb"},
        {"api.example.com", 443, "PUT", "/has*star"},
        {"uploads.example.com", 8443, "POST", "/upload"},
        {"a.example", 443, "POST", "/x"},
        {"a.example", 80, "PATCH", "/x"},
        {"github.com", 443, "GET", "/other/tool.git/info/refs?service=git-upload-pack"},
        {"github.com", 443, "POST", "/acme/widget.git/git-receive-pack"},
        {"github.com", 443, "POST", "/other/tool.git/git-receive-pack"},
        {"github.com", 443, "GET", "/other/tool/info/refs?service=git-receive-pack"},
    };
    for (const Request& r : requests) {
      Question q = question(id, r.host, r.port);
      q.method = r.method;
      q.target = r.target;
      out.push_back(q);
    }
  }
  return out;
}

// What a refusal that no config line can allow is refused for.
const std::set<policy::Reason> kNoLine = {
    policy::Reason::denied_by_rule,
    policy::Reason::always_denied_address,
    policy::Reason::proxy_loop,
    policy::Reason::invalid_host,
    policy::Reason::ambiguous_path,
    policy::Reason::denied_by_http_rule,
    policy::Reason::git_not_allowed,
    policy::Reason::no_matching_http_rule,
    policy::Reason::host_address,
    policy::Reason::unrecognized_protocol,
    policy::Reason::ip_literal_not_allowed,
    policy::Reason::special_address,
};

constexpr int kPerKind = 3;

struct Seen {
  std::map<std::string, int> per_kind;
  std::set<policy::Reason> applied;
  std::set<std::string> places;
  std::size_t dns = 0;
  std::size_t checked = 0;
};

void check_base(const Files& base, Seen& seen) {
  const Config config = load(base);
  const auto before = config.build_policy();
  for (const Question& q : questions(config)) {
    const auto [refused, host] = ask(*before, q);
    if (refused.allowed) continue;  // audit-mode refusals: allowed already
    const Sandbox* sb = config.find_sandbox(q.sandbox);
    ASSERT_NE(sb, nullptr);
    const Suggestion s = policy::suggest(home_of(*sb), host, q.port, refused, q.mode);
    // Kept: a few of each kind (sandbox, reason, host kind, mode, place), so that every kind is
    // applied without loading the config thousands of times.
    const std::string kind = q.sandbox + " " + std::string(policy::reason_name(refused.reason)) +
                             (q.port ? "" : " dns") + (host.is_name() ? " name" : " address") +
                             (q.resolved ? " resolved" : "") +
                             (q.method.empty() ? "" : " request") + " " +
                             std::string(policy::mode_name(q.mode)) + " " +
                             std::to_string(static_cast<int>(s.place)) + (s.block ? "b" : "");
    if (++seen.per_kind[kind] > kPerKind) continue;
    const std::string what =
        q.show() + " (" + std::string(policy::reason_name(refused.reason)) + "): " + s.text();
    if (!s) {
      EXPECT_FALSE(s.why_none.empty()) << what;
      EXPECT_TRUE(kNoLine.contains(refused.reason)) << what << " / " << s.why_none;
      continue;
    }
    // A launched sandbox's drop-in is the launcher's: never the target, nor its id.
    const std::string launched = sb->launcher_made ? "sandboxes.d/" + q.sandbox + ".toml" : "";
    if (sb->launcher_made) {
      EXPECT_EQ(s.text().find("sandboxes." + q.sandbox), std::string::npos) << what;
      EXPECT_NE(s.place, Suggestion::Place::file) << what;
    }
    EXPECT_EQ(s.text().find(":0\""), std::string::npos) << what;
    Files fixed = base;
    apply(fixed, s, launched);
    Config after;
    try {
      after = load(fixed);
    } catch (const ConfigErrors& e) {
      ADD_FAILURE() << what << "\ndoes not load:\n" << e.what() << "\n" << fixed["sandgate.toml"];
      continue;
    }
    const policy::Decision now = ask(*after.build_policy(), q).first;
    EXPECT_TRUE(now.allowed && !now.audit)
        << what << "\nstill refused: " << policy::reason_name(now.reason) << " " << now.rule;
    seen.applied.insert(refused.reason);
    seen.places.insert(std::to_string(static_cast<int>(s.place)) + (s.block ? "b" : "") +
                       (s.profile_flag.empty() ? "" : "p"));
    if (!q.port) ++seen.dns;
    ++seen.checked;
  }
}

TEST(SuggestionProperty, AppliedWhereItSaysItLoadsAndAllows) {
  Seen seen;
  check_base(rich_base(), seen);
  check_base(sparse_base(), seen);
  // Every kind of suggestion was made and applied, not only the easy ones.
  for (const policy::Reason r :
       {policy::Reason::no_matching_rule, policy::Reason::port_not_allowed,
        policy::Reason::ip_literal_not_allowed, policy::Reason::special_address,
        policy::Reason::host_address, policy::Reason::unrecognized_protocol,
        policy::Reason::no_matching_http_rule, policy::Reason::git_not_allowed}) {
    EXPECT_TRUE(seen.applied.contains(r)) << policy::reason_name(r);
  }
  const auto place = [](Suggestion::Place p, std::string_view suffix = "") {
    return std::to_string(static_cast<int>(p)) + std::string(suffix);
  };
  for (const std::string& p :
       {place(Suggestion::Place::table), place(Suggestion::Place::table, "b"),
        place(Suggestion::Place::table, "p"), place(Suggestion::Place::file),
        place(Suggestion::Place::file, "b"), place(Suggestion::Place::launcher)}) {
    EXPECT_TRUE(seen.places.contains(p)) << p;
  }
  EXPECT_GT(seen.dns, 0u);
  EXPECT_GT(seen.checked, 300u);
}

}  // namespace
}  // namespace sandgate::config
