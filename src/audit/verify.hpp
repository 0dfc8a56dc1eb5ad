#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/audit_chain.hpp"

namespace sandgate::audit {

// What is wrong with a chained audit log (`sandgate audit verify`), at the first bad line.
enum class Tamper {
  none,
  edited,     // a line's bytes changed (or a line is not a whole chained line)
  dropped,    // lines are missing inside a file
  inserted,   // a line repeats a seq already seen (a copy, or a forged line before it)
  reordered,  // the missing seq turns up later
  truncated,  // a file ends short of where the next file or LOG.head says the chain went on
  restarted,  // a new chain starts after chained lines: what came before is not linked to it
};
std::string_view tamper_name(Tamper t);

struct Location {
  std::string file;
  std::uint64_t line = 0;  // 1-based
  std::string text() const { return file + ":" + std::to_string(line); }
};

// A checkpoint line seen on an intact chain.
struct CheckpointSeen {
  Location where;
  std::uint64_t first_seq = 0;  // the lines it adds to what earlier checkpoints vouch for
  std::uint64_t last_seq = 0;
  std::string key_id;
  bool signature_checked = false;  // false: no public key was given
};

struct VerifyResult {
  Tamper tamper = Tamper::none;
  Location where;                     // the first bad line (tamper != none)
  std::string detail;                 // one sentence on what was found there
  std::uint64_t unchained_lines = 0;  // lines before the chain's first line (older logs)
  std::uint64_t first_seq = 0;        // the chain's range as read (0: no chained line)
  std::uint64_t last_seq = 0;
  std::string start;  // where and why the chain started, when the input holds its start
  std::vector<CheckpointSeen> checkpoints;
  // Lines after the last checkpoint: nothing signed vouches for them yet (0: none such).
  std::uint64_t unvouched_from = 0;
};

// Follows a chain line by line over one or more files in order (rotated ones first); stops
// looking at the first bad line. With `key`, every checkpoint's signature must verify; with
// `head` (LOG.head), the chain must reach it and the line it names must hash to it. Pure:
// bytes in, a verdict out.
class ChainVerifier {
 public:
  ChainVerifier(const telemetry::ChainPublicKey* key, std::optional<telemetry::ChainHead> head);
  void begin_file(std::string name);
  void line(std::string_view text);  // without its '\n'
  VerifyResult finish();

 private:
  void accept(const telemetry::ChainedLine& line, const telemetry::ChainDigest& hash,
              const Location& here);
  void check_checkpoint(const telemetry::ChainedLine& line, const Location& here);
  void fail(Tamper t, Location where, std::string detail);
  bool failed() const { return result_.tamper != Tamper::none; }

  const telemetry::ChainPublicKey* key_;
  std::optional<telemetry::ChainHead> head_;
  std::optional<Location> head_line_;  // where the head's seq was seen
  bool head_matches_ = false;
  std::string file_;
  std::uint64_t line_no_ = 0;
  bool have_prev_ = false;
  telemetry::ChainHead prev_;
  Location prev_at_;
  std::uint64_t vouched_seq_ = 0;
  // A seq gap waiting to be told apart: reordered if the missing seq turns up later.
  std::optional<std::uint64_t> gap_expected_;
  std::uint64_t gap_seq_ = 0;
  Location gap_at_;
  bool gap_at_file_start_ = false;
  VerifyResult result_;
};

}  // namespace sandgate::audit
