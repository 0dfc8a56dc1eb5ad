#pragma once

// Asks the daemon's admin listener whether it has activated a sandbox (GET /sandboxes/<id>),
// and for the refusals it counted for one (GET /sandboxes/<id>/denials).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::launcher {

// What the admin listener said about one sandbox.
struct SandboxStatus {
  enum class Answer { active, inactive, unreachable };
  Answer answer = Answer::unreachable;
  std::string detail;  // unreachable: why (connection refused, timeout, bad answer)
  // The daemon's config reloads (its `reload`; absent from a daemon older than it: known
  // false): how many it began, the number of the last that finished, and whether that one
  // failed, with its error lines (the daemon's stderr, bounded).
  bool reload_known = false;
  std::uint64_t reloads_started = 0;
  std::uint64_t reload_finished = 0;
  bool reload_failed = false;
  std::vector<std::string> reload_errors;
  std::uint64_t reload_more_errors = 0;
};

// One request over plain HTTP/1.1 with a deadline for the whole exchange. `host` is an IP
// literal. 200 with "active":true is active; 404 is inactive; anything else is unreachable.
SandboxStatus query_sandbox(const std::string& host, std::uint16_t port, std::string_view id,
                            std::chrono::milliseconds timeout);

// One refusal key of a sandbox and how often it was met.
struct DenialCount {
  std::string protocol;
  std::string host;
  std::uint16_t port = 0;  // 0: none (DNS)
  std::string reason;
  std::uint64_t count = 0;
  std::string suggestion{};  // the line that would allow it, as the daemon reported it; "" none
  bool operator==(const DenialCount&) const = default;
};

// The daemon's counts for one sandbox since they began (`epoch`, docs/launcher.md).
struct DenialSnapshot {
  std::uint64_t epoch = 0;
  std::uint64_t total = 0;
  std::uint64_t overflow = 0;
  std::vector<DenialCount> denials;
};

// Parses the body of GET /sandboxes/<id>/denials; nullopt with *error when it is not one.
std::optional<DenialSnapshot> parse_denials(std::string_view body, std::string* error);

// What happened between two snapshots of the same sandbox: `end` minus `start` when both have
// the same epoch, else `end` as it is (the counts began again in between). Keys that did not
// grow are left out.
DenialSnapshot denials_between(const DenialSnapshot& start, const DenialSnapshot& end);

// GET /sandboxes/<id>/denials. nullopt with *error when the daemon cannot be asked or says
// something else.
std::optional<DenialSnapshot> query_denials(const std::string& host, std::uint16_t port,
                                            std::string_view id, std::chrono::milliseconds timeout,
                                            std::string* error);

}  // namespace sandgate::launcher
