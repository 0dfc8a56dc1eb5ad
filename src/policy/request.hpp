#pragma once

#include <cstdint>
#include <string_view>

#include "policy/host.hpp"
#include "policy/policy.hpp"

namespace sandgate::policy {

// One HTTP request as policy sees it, whatever codec and entry mode it came through.
struct RequestFacts {
  std::string_view sandbox;
  const Host* host = nullptr;  // the request's authority, normalised
  std::uint16_t port = 0;      // its port (the transparent listener: the port the sandbox dialled)
  std::string_view method;
  std::string_view path;  // path and query, as sent
  // A CONNECT sent where requests are meant for origins (a transparent connection): asking
  // whatever listens there to relay.
  bool connect_to_origin = false;
  // Inside a stream whose TLS sandgate terminated: the name it was intercepted for. Every
  // request must address it (and its port), else misdirected_request.
  const Host* intercepted = nullptr;
  std::uint16_t intercepted_port = 0;
};

// The decision over one request. Today: its host and port (every request on a connection is
// decided on its own, so a second one cannot ride on the first's name); method and path
// rules come with interception.
Decision decide_request(const Policy& policy, const RequestFacts& facts);

}  // namespace sandgate::policy
