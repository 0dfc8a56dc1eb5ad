#pragma once

#include <optional>
#include <string>

#include "config/config.hpp"

namespace sandgate::app {

// `sandgate decide --method M --path P`: one request rather than a destination. Either may be
// absent (the method is then GET; the path the TARGET URL's, else "/").
struct DecideRequest {
  std::optional<std::string> method;
  std::optional<std::string> path;
  bool given() const { return method || path; }
};

// `sandgate decide`: one decision as one JSON line on stdout. Returns the process exit code:
// 0 allow, 3 deny or hold, 2 usage error (message on stderr). A held destination (`unlisted =
// "hold"`) is looked up among the sandbox's grants in the running daemon (its admin listener,
// or `admin` ADDRESS:PORT): allowed_by_operator when one covers it, else "decision":"hold". With
// `request` given, the decision is policy::decide_request's over that request, as the proxy makes
// it inside an intercepted stream to the TARGET's host and port (plain HTTP for an http:// TARGET).
int run_decide(const config::Config& cfg, const std::string& sandbox, const std::string& target,
               const DecideRequest& request = {}, const std::string& admin = {});

}  // namespace sandgate::app
