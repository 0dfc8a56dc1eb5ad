// `sandgate audit verify` and `sandgate audit keygen`: the audit log's hash chain, checked
// and keyed from the command line (docs/cli.md).

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "app/audit_command.hpp"
#include "audit/input.hpp"
#include "audit/verify.hpp"
#include "telemetry/audit_chain.hpp"

namespace sandgate::app {

namespace {

constexpr std::size_t kMaxVerifiedLineBytes = 1024 * 1024;

class VerifyFeed final : public audit::LineSink {
 public:
  explicit VerifyFeed(audit::ChainVerifier& verifier) : verifier_(verifier) {}
  void line(std::string_view text) override { verifier_.line(text); }
  // A line this long was never written by sandgate: hand on something that is no chained line.
  void too_long() override { verifier_.line("(a line too long to be an audit line)"); }

 private:
  audit::ChainVerifier& verifier_;
};

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string seq_range(std::uint64_t first, std::uint64_t last) {
  return "seq " + std::to_string(first) + (first == last ? "" : "-" + std::to_string(last));
}

void print_result(const audit::VerifyResult& r, bool key_given) {
  if (r.unchained_lines > 0) {
    std::cout << r.unchained_lines << " line(s) before the chain's first line are not chained\n";
  }
  if (!r.start.empty()) std::cout << "the chain starts at " << r.start << "\n";
  for (const audit::CheckpointSeen& c : r.checkpoints) {
    std::cout << "checkpoint " << c.where.text() << " (key " << c.key_id << "): "
              << (c.signature_checked ? "signature valid" : "signature not checked (no key)")
              << ", vouches for " << seq_range(c.first_seq, c.last_seq)
              << " and every line they chain back to\n";
  }
  if (r.unvouched_from != 0 && r.tamper == audit::Tamper::none) {
    std::cout << seq_range(r.unvouched_from, r.last_seq)
              << " not yet vouched for by a checkpoint\n";
  }
  if (r.tamper != audit::Tamper::none) {
    std::cout << r.where.text() << ": " << audit::tamper_name(r.tamper) << ": line " << r.where.line
              << " " << r.detail << "\n";
    return;
  }
  if (r.last_seq == 0) {
    std::cout << "no chained lines\n";
    return;
  }
  std::cout << "intact: seq " << r.first_seq << "-" << r.last_seq
            << (key_given ? "" : " (no public key: checkpoints not checked)") << "\n";
}

}  // namespace

int run_audit_verify(const std::vector<std::string>& args) {
  std::string key_path;
  std::string head_path;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "--public-key" || args[i] == "--head") && i + 1 < args.size()) {
      (args[i] == "--head" ? head_path : key_path) = args[++i];
    } else if (args[i].starts_with("--")) {
      std::cerr << "sandgate audit verify: unknown option or missing value \"" << args[i] << "\"\n";
      return 2;
    } else {
      files.push_back(args[i]);
    }
  }
  if (files.empty()) {
    std::cerr << "sandgate audit verify: no FILE given\n";
    return 2;
  }
  // By default, the key and head sandgate keeps next to the current log (the last FILE).
  const bool key_beside_log = key_path.empty() && std::filesystem::exists(files.back() + ".pub");
  if (key_beside_log) key_path = files.back() + ".pub";
  if (head_path.empty() && std::filesystem::exists(files.back() + ".head")) {
    head_path = files.back() + ".head";
  }
  std::optional<telemetry::ChainPublicKey> key;
  if (!key_path.empty()) {
    const auto pem = read_text(key_path);
    try {
      if (!pem) throw std::runtime_error("cannot be read");
      key.emplace(*pem);
    } catch (const std::exception& e) {
      std::cerr << "sandgate audit verify: " << key_path << ": " << e.what() << "\n";
      return 2;
    }
    std::cout << "public key " << key_path << " (key " << key->key_id() << ")"
              << (key_beside_log ? ", found next to the log: it proves no more than that "
                                   "directory's writers allow; give a copy kept elsewhere with "
                                   "--public-key"
                                 : "")
              << "\n";
  }
  std::optional<telemetry::ChainHead> head;
  if (!head_path.empty()) {
    head = telemetry::read_chain_head(head_path);
    if (!head) {
      std::cerr << "sandgate audit verify: " << head_path
                << ": unreadable, or not a chain head ({\"seq\":N,\"hash\":\"HEX\"})\n";
      return 2;
    }
  }
  audit::ChainVerifier verifier(key ? &*key : nullptr, head);
  VerifyFeed feed(verifier);
  for (const std::string& file : files) {
    verifier.begin_file(file);
    const audit::InputSummary summary = audit::read_lines(file, kMaxVerifiedLineBytes, feed);
    if (!summary.error.empty()) {
      std::cerr << "sandgate audit verify: " << file << ": " << summary.error << "\n";
      return 2;
    }
  }
  const audit::VerifyResult result = verifier.finish();
  print_result(result, key.has_value());
  return result.tamper == audit::Tamper::none ? 0 : 1;
}

int run_audit_keygen(const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0].starts_with("--")) {
    std::cerr << "sandgate audit keygen: expected one PATH\n";
    return 2;
  }
  try {
    std::cout << telemetry::generate_signing_key(args[0]);
  } catch (const std::exception& e) {
    std::cerr << "sandgate audit keygen: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace sandgate::app
