#pragma once

// Asks the daemon's admin listener whether it has activated a sandbox (GET /sandboxes/<id>).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace sandgate::launcher {

// What the admin listener said about one sandbox.
struct SandboxStatus {
  enum class Answer { active, inactive, unreachable };
  Answer answer = Answer::unreachable;
  std::string detail;  // unreachable: why (connection refused, timeout, bad answer)
};

// One request over plain HTTP/1.1 with a deadline for the whole exchange. `host` is an IP
// literal. 200 with "active":true is active; 404 is inactive; anything else is unreachable.
SandboxStatus query_sandbox(const std::string& host, std::uint16_t port, std::string_view id,
                            std::chrono::milliseconds timeout);

}  // namespace sandgate::launcher
