#pragma once

#include <optional>
#include <string>
#include <vector>

#include "audit/report.hpp"

namespace sandgate::app {

// `sandgate audit [OPTIONS] [FILE...]`, as parsed (docs/cli.md, "sandgate audit").
struct AuditOptions {
  std::vector<std::string> inputs;  // paths; "-" or none: standard input
  audit::Filter filter;
  audit::Limits limits;
  std::string format = "table";  // table | json | html
  std::size_t top = 10;
  std::size_t max_line_bytes = 64 * 1024;
  std::string config_path;  // places derived suggestions; "" = none
};

// Parses the arguments after "audit"; nullopt with `error` set on a usage error. Relative
// --since/--until durations count back from now.
std::optional<AuditOptions> parse_audit_args(const std::vector<std::string>& args,
                                             std::string& error);

// Reads every input, prints the report on stdout. Returns the exit code: 0 report written,
// 1 an input could not be read whole (the report covers what was read; the reason is on
// stderr), 2 the --config has errors.
int run_audit(const AuditOptions& options);

// `sandgate audit verify [--public-key PEM] [--head FILE] FILE...` (the arguments after
// "verify"): follows the hash chain through the files in order and checks every checkpoint.
// Prints what vouches for what on stdout, the first bad line on stdout too. Returns 0 intact,
// 1 tampered (or a checkpoint that does not verify), 2 a usage error or an unreadable input.
int run_audit_verify(const std::vector<std::string>& args);

// `sandgate audit keygen PATH`: a new Ed25519 checkpoint signing key in PATH (mode 0600,
// never overwritten); its public key PEM on stdout. Returns 0, or 1 with the reason on stderr.
int run_audit_keygen(const std::vector<std::string>& args);

}  // namespace sandgate::app
