#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "policy/ip_address.hpp"
#include "policy/policy.hpp"

namespace sandgate::config {

// A listen address "127.0.0.1:3128" or "[::1]:3128". Port 0 asks the kernel for a free port.
struct ListenAddress {
  policy::IpAddress address;
  std::uint16_t port = 0;
  std::string text;  // as written, for messages
};

struct Listeners {
  std::vector<ListenAddress> explicit_proxy;  // HTTP forward + CONNECT
  // Connections redirected by the launcher's nftables rules (SO_ORIGINAL_DST). Sandboxes are
  // told apart by source address (Sandbox::sources).
  std::vector<ListenAddress> transparent;
  std::vector<ListenAddress> dns;      // sandbox DNS, UDP and TCP on each address
  std::optional<ListenAddress> admin;  // /metrics, /healthz, /readyz, /sandboxes
};

struct Limits {
  std::size_t max_request_line_bytes = 8 * 1024;
  std::size_t max_header_bytes = 64 * 1024;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds idle_timeout{300'000};
  std::size_t max_connections = 20'000;
  std::size_t max_connections_per_sandbox = 2'000;
  // Connections that have not named their sandbox yet (explicit proxy, before its first
  // authenticated request) count only here, never against the caps above: in total, per
  // source address, and for at most auth_timeout (or header_timeout, if shorter).
  std::size_t max_unauthenticated_connections = 1'024;
  std::size_t max_unauthenticated_per_source = 64;
  std::chrono::milliseconds auth_timeout{3'000};
  // A transparent connection that sends nothing for this long is taken to be a server-first
  // protocol and decided on the sandbox's own DNS answers for its destination.
  std::chrono::milliseconds peek_timeout{1'000};
  // Upstream DNS lookups one sandbox may have waiting at once on the DNS listener (UDP and
  // TCP, all workers together); queries beyond it are refused. Answers from the cache never
  // count. At most kMaxDnsQueriesPerSandbox, so that one sandbox alone never fills a
  // worker's own bound (twice that).
  std::size_t max_dns_queries_per_sandbox = 128;
  // Intercepted streams: how long sandgate keeps its own idle upstream TLS connection after
  // the client connection that opened it ended, for the same sandbox's next one to the same
  // destination (0: not kept); and how many each worker keeps at most.
  std::chrono::milliseconds upstream_keepalive{4'000};
  std::size_t max_idle_upstream_connections = 256;
};

inline constexpr std::size_t kMaxDnsQueriesPerSandbox = 512;

struct Dns {
  std::vector<std::string> servers;  // "ip" or "ip:port"; empty: /etc/resolv.conf
  std::chrono::milliseconds timeout{5'000};
  std::chrono::seconds max_ttl{300};
  // Static answers, consulted before any server: name -> addresses.
  std::map<std::string, std::vector<policy::IpAddress>> hosts;
};

// What sandgate-launch reads; the daemon only validates it.
struct Launcher {
  std::string state_dir = "/run/sandgate";  // launcher state, netns pins, CA bundle
  // IPv4 pool for sandbox links: each sandbox takes a /30 (host side .1, sandbox side .2).
  policy::Cidr pool{policy::IpAddress::v4(0x0AC90000), 16};  // 10.201.0.0/16
  std::string ca_file;  // sandgate's interception CA (PEM), added to the sandbox CA bundle
  std::chrono::milliseconds ready_timeout{10'000};  // wait for the daemon to activate a sandbox
};

// TLS interception: the local CA that signs a leaf per intercepted name, and what the
// upstream leg trusts. Off (every stream spliced) unless both CA files are set.
struct Interception {
  std::string ca_cert;  // PEM CA certificate (then any intermediates); `sandgate ca init`
  std::string ca_key;   // PEM private key: a regular file of this user, mode 0600 or stricter
  std::chrono::hours leaf_validity{24};
  std::chrono::hours leaf_renew_before{12};  // re-mint a cached leaf this long before notAfter
  std::size_t leaf_cache_size = 10'000;      // leaves kept (least recently used dropped)
  // Leaves each sandbox may make sandgate mint per minute (a burst of as many), THREATS 24.
  std::size_t max_leaf_mints_per_minute = 120;
  // Extra roots the upstream leg trusts besides the system's (a private registry, tests).
  std::string upstream_ca_file;

  bool enabled() const { return !ca_cert.empty(); }
  bool operator==(const Interception&) const = default;
};

struct Logging {
  std::string audit = "stdout";  // "stdout", "stderr", "off" or a file path
};

// One sandbox as the daemon knows it: identity plus its effective policy.
struct Sandbox {
  policy::SandboxSpec spec;
  std::string profile;
  std::string token;  // explicit-proxy credential (Proxy-Authorization Basic id:token); may be
                      // empty when `sources` identifies the sandbox
  // Source addresses that identify this sandbox on transparent and DNS listeners.
  std::vector<policy::IpAddress> sources;
  std::string file;            // where it was defined (main file or a drop-in)
  bool in_drop_in = false;     // `file` is a drop-in, not the main file
  bool launcher_made = false;  // a drop-in sandgate-launch wrote (kLauncherDropinMarker)
};

// The first line of every drop-in sandgate-launch writes (and removes at `down`).
inline constexpr std::string_view kLauncherDropinMarker = "# written by sandgate-launch";

// Where the operator adds `rule_line` (a policy::suggest_rule line such as
// `allow = ["x.org:443"]`) for this sandbox, as the denial's suggestion: "[sandboxes.ID] LINE"
// in the main file, "FILE: LINE" in a hand-written drop-in. A launcher-made drop-in is rewritten
// and removed by the launcher, so it names what outlives it: "[profiles.P] LINE" (the
// sandbox's profile, in the main config; the daemon reloads it), or without a profile the
// launcher's flag (`sandgate-launch --allow "x.org:443"`) for an allow line and
// "[profiles.NAME] LINE (sandgate-launch --profile NAME)" for the others.
std::string suggestion_for(const Sandbox& sandbox, std::string_view rule_line);

// The whole configuration, validated. Immutable once loaded.
struct Config {
  std::string path;
  unsigned workers = 0;  // 0: one per core
  Listeners listeners;
  Limits limits;
  Dns dns;
  Logging logging;
  Launcher launcher;
  Interception interception;
  std::string sandboxes_dir;       // resolved relative to the config file; empty: none
  std::vector<Sandbox> sandboxes;  // sorted by id (find_sandbox relies on it)

  const Sandbox* find_sandbox(std::string_view id) const;
  // The policy for these sandboxes (self endpoints are added by the daemon).
  std::shared_ptr<const policy::Policy> build_policy(
      std::vector<policy::Endpoint> self_endpoints = {}) const;
};

// One problem found in a config file, located as precisely as the parser can.
struct ConfigError {
  std::string file;
  std::uint32_t line = 0;    // 1-based; 0 when unknown
  std::uint32_t column = 0;  // 1-based; 0 when unknown
  std::string key;           // dotted key path, e.g. "profiles.default.allow[2]"
  std::string message;

  // "file:line:column: key: message"
  std::string to_string() const;
};

// Thrown by load_config when the file (or a drop-in) has any error; holds them all.
class ConfigErrors : public std::runtime_error {
 public:
  explicit ConfigErrors(std::vector<ConfigError> errors);
  const std::vector<ConfigError>& errors() const { return errors_; }

 private:
  std::vector<ConfigError> errors_;
};

// Loads and validates the file and every "*.toml" in its sandboxes_dir.
// Throws ConfigErrors listing every problem found (not only the first).
Config load_config(const std::string& path);

// Same, from text (tests); `name` stands in for the file name in messages.
Config load_config_from_string(std::string_view toml, const std::string& name);

}  // namespace sandgate::config
