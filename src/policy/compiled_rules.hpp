#pragma once

// Internal to src/policy: one rule list set's inspect list and request rules (a profile's, or
// a sandbox's own), compiled for Policy (policy.cpp). Lookups go through NameIndex, so finding
// the rules that name a host costs one hash probe per label of the name, not a scan of every
// rule. A sandbox's decision reads its layers in order (profile first, then its own), which
// decides exactly as one merged list would.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "policy/name_index.hpp"
#include "policy/policy.hpp"

namespace sandgate::policy::detail {

class CompiledRequestRules {
 public:
  // `inspect` carries the list's inspect patterns (inject hosts included by config).
  explicit CompiledRequestRules(const RuleLists& lists);

  // An inspect pattern, or a host of an http or git rule, of some layer matches the name on
  // this port. `ports` sorted: the sandbox's ports, for patterns without one.
  static bool inspects(std::span<const CompiledRequestRules* const> layers,
                       const std::vector<std::uint16_t>& ports, std::string_view name,
                       std::uint16_t port);

  // The layers' decision over one request to `name`:`port` (already allowed by the host
  // rules); nullopt when no http rule and, for a git request, no git rule names the host.
  // `method_overrides`: the values of the request's kMethodOverrideFields.
  static std::optional<Decision> decide(std::span<const CompiledRequestRules* const> layers,
                                        const std::vector<std::uint16_t>& ports,
                                        std::string_view name, std::uint16_t port,
                                        std::string_view method, std::string_view target,
                                        std::span<const std::string_view> method_overrides);

 private:
  struct Entry {
    std::uint16_t port = 0;   // 0: the sandbox's ports
    std::size_t rule = 0;     // index into http_ or git_
    std::size_t pattern = 0;  // git: index into the rule's repos
  };
  // Rules of every layer naming one host, in list order (layer by layer).
  struct HttpMatch {
    const HttpRule* rule;
  };
  struct GitMatch {
    const GitRule* rule;
    const RepoPattern* pattern;
  };

  // This layer's entries naming name:port, in rule order.
  std::vector<Entry> named(const NameIndex<Entry>& index, const std::vector<std::uint16_t>& ports,
                           std::string_view name, std::uint16_t port) const;
  static Decision decide_git(const std::vector<GitMatch>& rules, GitRequest git);
  // The http rules over the request as one method (uppercase).
  static Decision decide_http(const std::vector<HttpMatch>& rules, std::string_view name,
                              std::string_view method, std::string_view path);

  NameIndex<Entry> inspect_;
  NameIndex<Entry> http_hosts_;
  NameIndex<Entry> git_hosts_;
  std::vector<HttpRule> http_;
  std::vector<GitRule> git_;
};

}  // namespace sandgate::policy::detail
