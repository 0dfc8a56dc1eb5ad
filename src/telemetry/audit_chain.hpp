#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

// The audit log's hash chain and signed checkpoints (docs/operations.md, "A log that cannot be
// edited unseen"), in the manner of CloudTrail's log-file validation.
//
// Every line written to a file ends with `"chain":{"seq":N,"prev":"HEX"}`: N counts lines
// from the start of the chain (1, 2, ...; across rotations and restarts) and HEX is the
// SHA-256 of the previous line's bytes (its '\n' excluded, its own chain field included), so
// each line vouches for every line before it. The first line of a new chain has prev = 64
// zeros and says why it starts one: `"chain":{"seq":1,"prev":"000…","start":"REASON"}`.
// With a signing key, a checkpoint line (event.code "audit_chain_checkpoint") every so many
// lines or seconds, at rotation and at shutdown signs, with Ed25519, the head: the hash of the
// line before it.
namespace sandgate::telemetry {

using ChainDigest = std::array<unsigned char, 32>;

// SHA-256 of one line's bytes: the algorithm fetched once, a context per thread.
ChainDigest chain_hash(std::string_view bytes);
std::string to_hex(std::string_view bytes);
inline std::string to_hex(const ChainDigest& d) {
  return to_hex(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}
// Lowercase or uppercase hex of exactly out.size() bytes.
bool from_hex(std::string_view hex, unsigned char* out, std::size_t size);

inline constexpr std::string_view kCheckpointCode = "audit_chain_checkpoint";
// The event.code prefix of the chain's own records, which the review commands skip.
inline constexpr std::string_view kChainCodePrefix = "audit_chain";

// Where a chain has got to: the last line's seq and hash (seq 0: no line yet).
struct ChainHead {
  std::uint64_t seq = 0;
  ChainDigest hash{};
  bool operator==(const ChainHead&) const = default;
};

// What a line says about itself, read back (verify, and resuming at start).
struct ChainedLine {
  std::uint64_t seq = 0;
  ChainDigest prev{};
  std::string start;  // chain.start: why a new chain starts here; empty when it continues
  std::string code;   // event.code
  // A checkpoint's fields (code == kCheckpointCode).
  std::uint64_t first_seq = 0;
  std::uint64_t last_seq = 0;
  ChainDigest head{};
  std::string key_id;
  std::string signature;  // raw bytes
};
// Nullopt when the line is not a JSON object with a well-formed chain field (and, for a
// checkpoint, well-formed checkpoint fields).
std::optional<ChainedLine> parse_chained_line(std::string_view line);

// LOG.head as AuditChain saves it ({"seq":N,"hash":"HEX"}); nullopt if unreadable or not that.
std::optional<ChainHead> read_chain_head(const std::string& path);

// The bytes a checkpoint's signature covers.
std::string checkpoint_message(std::uint64_t first_seq, std::uint64_t last_seq,
                               const ChainDigest& head);

// An Ed25519 public key: verifies checkpoints. From PEM text.
class ChainPublicKey {
 public:
  // Throws std::runtime_error when the text holds no Ed25519 public key.
  explicit ChainPublicKey(std::string_view pem);
  ~ChainPublicKey();
  ChainPublicKey(ChainPublicKey&&) noexcept;
  ChainPublicKey& operator=(ChainPublicKey&&) noexcept;
  bool verify(std::string_view message, std::string_view signature) const;
  // The first 16 hex digits of the SHA-256 of the raw 32-byte key: names it in checkpoints.
  const std::string& key_id() const { return key_id_; }

 private:
  struct Key;
  std::unique_ptr<Key> key_;
  std::string key_id_;
};

// Writes a new Ed25519 private key to `path` (created, mode 0600; an existing file is
// refused) and returns its public key as PEM. Throws std::runtime_error.
std::string generate_signing_key(const std::string& path);

// Why the signing key at `path` would be refused at start, read as `owner` (the checks of
// AuditChain: a regular file of that user, mode 0600 or stricter, an unencrypted Ed25519 key);
// empty when it would not. For --check-config.
std::string signing_key_problem(const std::string& path, uid_t owner);

struct AuditChainOptions {
  bool enabled = false;     // chain the lines of a regular file target
  std::string signing_key;  // Ed25519 private key PEM file (0600); empty: no checkpoints
  std::uint64_t checkpoint_lines = 1000;
  std::chrono::seconds checkpoint_interval{60};
};

// The audit writer's side of the chain. Owned and used by the AuditLog's writer thread only.
// Next to the log it keeps LOG.head (the chain's head, {"seq":N,"hash":"HEX"}, replaced
// atomically at every rotation, checkpoint and shutdown) and, with a key, LOG.pub (the public
// key, PEM, written at start).
class AuditChain {
 public:
  // Resumes from the log's last complete line or LOG.head, whichever is further on (a log
  // truncated while sandgate was stopped then shows a gap); else starts a new chain. Throws
  // std::runtime_error on a bad key file or an unwritable LOG.pub (startup).
  AuditChain(std::string log_path, const AuditChainOptions& options);
  ~AuditChain();
  AuditChain(const AuditChain&) = delete;
  AuditChain& operator=(const AuditChain&) = delete;

  // Appends one whole line (ending in "}\n") to `out` with its chain field, then a checkpoint
  // when checkpoint_lines lines have passed since the last one.
  void append(std::string_view line, std::string& out);
  // Appends a checkpoint over the lines since the last one, if there are any and a key.
  void checkpoint(std::string& out);
  // When the next timed checkpoint is due; nullopt when none is (no key, nothing to vouch for).
  std::optional<std::chrono::steady_clock::time_point> checkpoint_due() const;
  // Replaces LOG.head with the current head (write a temporary, rename). Failures are ignored:
  // the log itself still carries the chain.
  void save_head() const noexcept;
  const ChainHead& head() const { return head_; }

 private:
  struct Signer;
  void seal(std::string_view body, std::string& out);

  std::string log_path_;
  AuditChainOptions options_;
  std::unique_ptr<Signer> signer_;
  ChainHead head_;
  std::string start_reason_;       // non-empty until the first line of a new chain is written
  std::uint64_t vouched_seq_ = 0;  // the last seq a checkpoint covers
  std::chrono::steady_clock::time_point first_unvouched_{};
};

}  // namespace sandgate::telemetry
