#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/chunked_map.hpp"
#include "policy/ip_address.hpp"
#include "policy/policy.hpp"
#include "policy/suggestion.hpp"
#include "secrets/injection.hpp"
#include "secrets/placeholder.hpp"
#include "secrets/spec.hpp"

namespace sandgate::config {

// A listen address "127.0.0.1:3128" or "[::1]:3128". Port 0 asks the kernel for a free port.
struct ListenAddress {
  policy::IpAddress address;
  std::uint16_t port = 0;
  std::string text;  // as written, for messages
  // What a client on this host dials to reach the listener: its address, or loopback (of the
  // same family) for a wildcard one.
  std::string dial_host() const;
};

struct Listeners {
  std::vector<ListenAddress> explicit_proxy;  // HTTP forward + CONNECT
  // Connections redirected by the launcher's nftables rules (SO_ORIGINAL_DST). Sandboxes are
  // told apart by source address (Sandbox::sources).
  std::vector<ListenAddress> transparent;
  std::vector<ListenAddress> dns;      // sandbox DNS, UDP and TCP on each address
  std::optional<ListenAddress> admin;  // /metrics, /healthz, /readyz, /sandboxes
  // The bearer token the admin API's write calls (answering a hold) must carry, read from this
  // file (absolute) at each call; empty: write calls are refused.
  std::string admin_token_file;
};

struct Limits {
  std::size_t max_request_line_bytes = 8 * 1024;
  std::size_t max_header_bytes = 64 * 1024;
  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds idle_timeout{300'000};
  // How long a held destination waits for an operator's answer (unlisted = "hold").
  std::chrono::milliseconds hold_timeout{10'000};
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
  // What the sandbox DNS listener answers for a name the policy refuses (docs/dns.md):
  // `sink`: an A record of sink_address (AAAA: none), so the connection comes to the
  // transparent listener and is refused there in its own protocol; `refused`: REFUSED.
  enum class DeniedNames { sink, refused };
  DeniedNames denied_names = DeniedNames::sink;
  policy::IpAddress sink_address = policy::IpAddress::v4(0xC00002FE);  // 192.0.2.254
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
  // The hash chain of a file `audit` (docs/operations.md): every line chained to the one
  // before it; with a signing key, Ed25519-signed checkpoints every so many lines or seconds.
  bool audit_chain = true;
  std::string audit_signing_key;  // Ed25519 private key PEM (`sandgate audit keygen`); "" none
  std::uint64_t audit_checkpoint_lines = 1000;
  std::chrono::seconds audit_checkpoint_interval{60};
  bool operator==(const Logging&) const = default;
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
  // The sandbox's own [[sandboxes.ID.inject]] rules; its profile's are Config::profile_inject.
  std::vector<secrets::InjectRule> inject;
};

// Every sandbox of a config, sorted by id. Copies share the sandboxes (immutable once listed)
// and the index over them, so that a reload that keeps 10,000 sandboxes and changes one copies
// only a chunk of the index.
class SandboxList {
 public:
  using Index = common::ChunkedMap<std::string, std::shared_ptr<const Sandbox>>;

  // Walks the sandboxes in id order.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Sandbox;
    using difference_type = std::ptrdiff_t;
    using pointer = const Sandbox*;
    using reference = const Sandbox&;

    const_iterator() = default;
    explicit const_iterator(Index::const_iterator at) : at_(at) {}
    reference operator*() const { return *at_->second; }
    pointer operator->() const { return at_->second.get(); }
    const_iterator& operator++() {
      ++at_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++at_;
      return old;
    }
    bool operator==(const const_iterator&) const = default;

   private:
    Index::const_iterator at_;
  };

  SandboxList() = default;
  // From sandboxes sorted by id, ids unique.
  static SandboxList from_sorted(std::vector<Sandbox> sandboxes);

  std::size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }
  const_iterator begin() const { return const_iterator(index_.begin()); }
  const_iterator end() const { return const_iterator(index_.end()); }
  // Null when there is no such sandbox.
  const Sandbox* find(std::string_view id) const;
  // The sandbox itself, to share it; null when there is none.
  std::shared_ptr<const Sandbox> share(std::string_view id) const;

  // Adds `sandbox`, replacing the one of the same id.
  void insert(std::shared_ptr<const Sandbox> sandbox);
  void erase(std::string_view id);

  const Index& index() const { return index_; }

 private:
  Index index_;
};

// One environment variable sandgate-launch sets in a sandbox: a credential's placeholder.
struct PlaceholderEnv {
  std::string name;        // e.g. "GH_TOKEN"
  std::string value;       // the placeholder (secrets/placeholder.hpp)
  std::string credential;  // whose it is
};

// The first line of every drop-in sandgate-launch writes (and removes at `down`).
inline constexpr std::string_view kLauncherDropinMarker = "# written by sandgate-launch";

// Where the operator adds a rule for this sandbox, for policy::suggest: its [sandboxes.ID]
// table in the main file, its hand-written drop-in, or, for a drop-in sandgate-launch wrote (it
// rewrites and removes it), what outlives it: the sandbox's profile, else the launcher's flag.
policy::SandboxHome home_of(const Sandbox& sandbox);
struct Config;
// The same for sandbox `id` of `config`; a sandbox it does not have (a log read after the
// launcher removed its drop-in) is placed as a launched one without a profile (Kind::unknown).
policy::SandboxHome home_of(const Config& config, std::string_view id);

namespace detail {
struct LoadState;
}

// What reload_config changed, when it reused the config it was given: the ids of the
// sandboxes it no longer has or has replaced (`removed`), and of those it read anew (`added`;
// a replaced one is in both), each sorted. Every other sandbox is unchanged.
struct SandboxChanges {
  std::vector<std::string> removed;
  std::vector<std::string> added;
};

// The whole configuration, validated. Immutable once loaded. (reload_config starts from a
// copy of the whole config it reuses, so a field added here is kept by it as it is.)
struct Config {
  std::string path;
  unsigned workers = 0;  // 0: one per core
  Listeners listeners;
  Limits limits;
  Dns dns;
  Logging logging;
  Launcher launcher;
  Interception interception;
  std::string sandboxes_dir;  // resolved relative to the config file; empty: none
  // The file set sandboxes_dir (the default is used only when present); a named one that is
  // missing is made at start.
  bool sandboxes_dir_named = false;
  SandboxList sandboxes;  // sorted by id
  // [credentials.NAME] tables, sorted by name (docs/credentials.md).
  std::vector<secrets::CredentialSpec> credentials;
  // Each profile's own inject rules (profile name -> rules), for build_injection.
  std::map<std::string, std::vector<secrets::InjectRule>, std::less<>> profile_inject;
  // The placeholders' HMAC key (credentials.placeholder_key_file; default
  // "<launcher.state_dir>/placeholder.key"), created on first use.
  std::string placeholder_key_file;
  // What the load read (internal to src/config), for reload_config; null when it cannot help.
  std::shared_ptr<const detail::LoadState> load_state;
  // Set by reload_config when only drop-ins changed: relative to the config it was given.
  std::optional<SandboxChanges> changes;

  const Sandbox* find_sandbox(std::string_view id) const;
  const secrets::CredentialSpec* find_credential(std::string_view name) const;
  // The policy for these sandboxes (self endpoints are added by the daemon).
  std::shared_ptr<const policy::Policy> build_policy(
      std::vector<policy::Endpoint> self_endpoints = {}) const;
  // Every sandbox's inject rules, compiled: its own first, then its profile's. Sandboxes with
  // no rules of their own share their profile's compiled rules (one per profile and ports).
  // With `previous` (the table of the config `changes` is relative to), only the changed
  // sandboxes are compiled; the rest is shared with it.
  std::shared_ptr<const secrets::InjectionTable> build_injection(
      const secrets::InjectionTable* previous = nullptr) const;
  // The (sandbox, credential) pairs that have a placeholder: each sandbox with each credential
  // its rules name. For secrets::PlaceholderIndex.
  std::vector<std::pair<std::string, std::string>> placeholder_pairs() const;
  // The credentials one sandbox's rules name (its own and its profile's), sorted, unique.
  std::vector<std::string> credentials_of(const Sandbox& sandbox) const;
  // The variables sandgate-launch sets in sandbox `id`: each `env` name of each credential its
  // rules name, set to that credential's placeholder. Empty for an unknown sandbox.
  std::vector<PlaceholderEnv> placeholder_env(std::string_view id,
                                              const secrets::PlaceholderKey& key) const;
  // The profiles' names, sorted.
  std::vector<std::string> profile_names() const;
  // The sandbox `sandgate-launch run --profile NAME` (no --allow) would make: the profile's
  // rules alone, with the profile's name for id; nullopt for an unknown profile (for
  // --check-config).
  std::optional<Sandbox> launched_with(std::string_view profile) const;
  // Every variable any credential's `env` lists, sorted, unique: what sandgate-launch never
  // passes from its own environment into a sandbox (each is that sandbox's placeholder, or
  // unset).
  std::vector<std::string> credential_env_names() const;
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

// Loads `previous.path` again, as load_config would, but cheaply when only drop-ins changed:
// when the main file reads exactly as `previous` read it, only the drop-ins whose stamp
// (device, inode, size, modification time) changed are read again, every other sandbox is
// kept as `previous` holds it, and Config::changes says which ones changed.
// `changed_drop_ins`: the names in sandboxes_dir known to have changed (the daemon's inotify
// watch); only they are stat'ed when all are drop-in names. With another name among them
// (a temp file, a swapped link) the directory is listed and links, new inodes and the names
// given are stat'ed; nullopt (unknown): every drop-in is stat'ed. Anything else (the main
// file changed, an error in a drop-in read again, a clash with a kept sandbox) falls back to
// load_config, so the result and the errors reported are load_config's.
Config reload_config(
    const Config& previous,
    const std::optional<std::vector<std::string>>& changed_drop_ins = std::nullopt);

// The keys a reload cannot apply, because the daemon sets them up once at start (sockets,
// resolvers, threads, the audit sink, the watched directory): those among "listeners",
// "dns", "workers", "log.audit", "log.audit_chain" (its four keys) and "sandboxes_dir" that
// differ between the two configs. Listen addresses compare as written.
std::vector<std::string> restart_only_changes(const Config& running, const Config& loaded);

// Same, from text (tests); `name` stands in for the file name in messages.
Config load_config_from_string(std::string_view toml, const std::string& name);

}  // namespace sandgate::config
