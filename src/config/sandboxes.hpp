#pragma once

// Internal to src/config: [profiles], [sandboxes] and drop-in sandbox files, read into merged
// policy::SandboxSpec values. Errors go to an ErrorSink; reading never stops early.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/credentials.hpp"
#include "config/toml_reader.hpp"
#include "policy/policy.hpp"

namespace sandgate::config::detail {

// The rules one profile or one sandbox wrote itself, before merging.
struct RuleSet {
  std::optional<std::vector<std::uint16_t>> ports;  // absent: not written
  std::vector<policy::RuleSource> allow;
  std::vector<policy::RuleSource> deny;
  std::vector<policy::CidrSource> allow_cidrs;
  std::vector<policy::CidrSource> deny_cidrs;
  std::vector<policy::RuleSource> opaque;
  std::vector<policy::HostServiceSource> allow_host_services;
  std::vector<policy::RuleSource> inspect;
  std::vector<policy::HostServiceSource> inspect_addresses;
  std::vector<policy::HttpRule> http_rules;
  std::vector<policy::GitRule> git_rules;
  std::vector<secrets::InjectRule> inject;
  // `unlisted`: "hold" (true) or "deny" (false); absent: not written (a sandbox's falls back to
  // its profile's, then "deny").
  std::optional<bool> hold_unlisted;
  // A profile's lists as every sandbox of the profile shares them (its inject rules' hosts
  // among `inspect`); set by read_profiles only.
  std::shared_ptr<const policy::RuleLists> shared;
};

using Profiles = std::map<std::string, RuleSet, std::less<>>;

// Reads the [profiles] table (profile name -> rules); inject rules may name `credentials`.
Profiles read_profiles(const toml::node& node, const Credentials& credentials, ErrorSink& sink);

// True for 1-64 characters of [A-Za-z0-9_.-]: the syntax of sandbox ids and profile names.
bool valid_id(std::string_view id);

// Gathers sandboxes from the main file and from drop-ins, checking that ids are unique across
// all of them. Holds a reference to the profiles; they must outlive it.
class SandboxCollector {
 public:
  // `launcher_pool`: [launcher] pool; a source inside it is an error except in a drop-in the
  // launcher made (the launcher gives those addresses to its own sandboxes).
  SandboxCollector(const Profiles& profiles, const Credentials& credentials,
                   const policy::Cidr& launcher_pool)
      : profiles_(profiles), credentials_(credentials), launcher_pool_(launcher_pool) {}

  // The main file's [sandboxes] table: one sub-table per id.
  void read_main_table(const toml::node& node, ErrorSink& sink);
  // One drop-in file: `id` plus the sandbox keys at top level.
  // `launcher_made`: the file starts with kLauncherDropinMarker.
  void read_drop_in(const toml::table& root, ErrorSink& sink, bool launcher_made = false);

  // The sandboxes read so far, sorted by id.
  std::vector<Sandbox> take();

 private:
  struct Site {
    std::string file;
    toml::source_region where;
  };

  // Reads one sandbox's keys (not `id`); an absent id (already reported) still has its keys
  // checked but is not kept. `path` prefixes error keys ("sandboxes.ci" in the
  // main file, "" in a drop-in); `id_key` and `id_where` name and locate the id for invalid
  // and duplicate reports; `table_where` locates the table for a missing token (nullptr: the
  // file's top level).
  void read_sandbox(const std::optional<std::string>& id, const toml::table& body,
                    const std::string& path, const std::string& id_key,
                    const toml::source_region& id_where, const toml::source_region* table_where,
                    ErrorSink& sink);

  // Checks the id's syntax and that no other sandbox has it, then records where it is.
  bool claim_id(const std::string& id, const std::string& id_key,
                const toml::source_region& id_where, ErrorSink& sink);

  // `sources`: strict IP addresses, each identifying at most one sandbox.
  void read_sources(const toml::node& node, const std::string& path, const std::string& id,
                    std::vector<policy::IpAddress>& out, ErrorSink& sink);

  const Profiles& profiles_;
  const Credentials& credentials_;
  // Set while a drop-in is read (read_sandbox copies them into the Sandbox).
  bool in_drop_in_ = false;
  bool launcher_made_ = false;
  policy::Cidr launcher_pool_;
  std::map<policy::IpAddress, Site> sources_;
  std::vector<Sandbox> sandboxes_;
  std::map<std::string, Site, std::less<>> seen_;
};

}  // namespace sandgate::config::detail
