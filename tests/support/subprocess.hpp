#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace sandgate::test {

// What a finished child process left behind.
struct CommandResult {
  int exit_code = -1;  // exit status, or 128 + signal number when killed by a signal
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up in PATH) with the given stdin, collecting stdout and stderr. The child
// is killed (SIGKILL) and reaped when it outlives `timeout`, and dies with the calling thread's
// process (PR_SET_PDEATHSIG), so a test never leaks one.
CommandResult run_command(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(20),
                          const std::string& stdin_data = {});

// One curl transfer: the response head(s) as curl saw them (-D), the body (-o) and the
// status (%{http_code}; for a CONNECT the proxy's answer is %{http_connect}).
struct CurlResult {
  int exit_code = -1;
  int http_code = 0;
  int connect_code = 0;
  double seconds = 0;   // curl's own %{time_total}: the transfer, without starting curl
  std::string headers;  // every head curl received, the proxy's CONNECT answer included
  std::string body;
  std::string err;  // curl's stderr (-sS: only errors)
};

// Runs `curl -q -sS --noproxy '' <args...> URL` (environment proxies and ~/.curlrc ignored).
CurlResult run_curl(const std::vector<std::string>& args,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace sandgate::test
