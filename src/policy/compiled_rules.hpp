#pragma once

// Internal to src/policy: one sandbox's inspect list and request rules, compiled for
// Policy (policy.cpp). Lookups go through NameIndex, so finding the rules that name a host
// costs one hash probe per label of the name, not a scan of every rule.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "policy/name_index.hpp"
#include "policy/policy.hpp"

namespace sandgate::policy::detail {

class CompiledRequestRules {
 public:
  // `ports` sorted: the sandbox's ports, for patterns without one.
  CompiledRequestRules(const SandboxSpec& spec, std::vector<std::uint16_t> ports);

  // An inspect pattern, or a host of an http or git rule, matches the name on this port.
  bool inspects(std::string_view name, std::uint16_t port) const;

  // The rules' decision over one request to `name`:`port` (already allowed by the host
  // rules); nullopt when no http rule and, for a git request, no git rule names the host.
  std::optional<Decision> decide(std::string_view name, std::uint16_t port, std::string_view method,
                                 std::string_view target) const;

 private:
  struct Entry {
    std::uint16_t port = 0;   // 0: the sandbox's ports
    std::size_t rule = 0;     // index into http_ or git_
    std::size_t pattern = 0;  // git: index into the rule's repos
  };
  bool port_ok(std::uint16_t rule_port, std::uint16_t port) const;
  // The entries naming name:port, in rule order.
  std::vector<Entry> named(const NameIndex<Entry>& index, std::string_view name,
                           std::uint16_t port) const;
  Decision decide_git(const std::vector<Entry>& rules, GitRequest git) const;
  Decision decide_http(const std::vector<Entry>& rules, std::string_view name, std::uint16_t port,
                       std::string_view method, std::string_view path) const;

  std::vector<std::uint16_t> ports_;
  NameIndex<Entry> inspect_;
  NameIndex<Entry> http_hosts_;
  NameIndex<Entry> git_hosts_;
  std::vector<HttpRule> http_;
  std::vector<GitRule> git_;
};

}  // namespace sandgate::policy::detail
