#include "telemetry/audit_chain.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "audit/input.hpp"
#include "audit/verify.hpp"
#include "support/temp_dir.hpp"
#include "telemetry/audit_log.hpp"

namespace sandgate::telemetry {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using sandgate::test::TempDir;

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

AuditRecord record(std::string_view sandbox) {
  AuditRecord r;
  r.event = "SANDBOX_NETWORK_DENIED";
  r.outcome = "failure";
  r.sandbox_id = sandbox;
  r.host = "evil.example";
  return r;
}

AuditChainOptions chained(std::string key = {}) {
  return AuditChainOptions{true, std::move(key), 1000, std::chrono::seconds(60)};
}

class Sink final : public audit::LineSink {
 public:
  explicit Sink(audit::ChainVerifier& v) : v_(v) {}
  void line(std::string_view text) override { v_.line(text); }
  void too_long() override { v_.line("too long"); }

 private:
  audit::ChainVerifier& v_;
};

audit::VerifyResult verify(const std::vector<fs::path>& files,
                           const ChainPublicKey* key = nullptr) {
  audit::ChainVerifier v(key, read_chain_head(files.back().string() + ".head"));
  Sink sink(v);
  for (const fs::path& f : files) {
    v.begin_file(f.filename().string());
    audit::read_lines(f.string(), 1 << 20, sink);
  }
  return v.finish();
}

TEST(AuditChain, ContinuesAcrossRotationAndRestart) {
  const TempDir dir;
  const fs::path log = dir.path() / "audit.log";
  const fs::path rotated = dir.path() / "audit.log.1";
  {
    AuditLog audit(log.string(), AuditLog::kDefaultMaxQueuedLines, chained());
    audit.write(record("a"));
    audit.write(record("a"));
    audit.flush();
    fs::rename(log, rotated);
    audit.write(record("b"));  // queued before reopen(): the old file
    audit.reopen();
    audit.write(record("c"));
  }
  {
    AuditLog audit(log.string(), AuditLog::kDefaultMaxQueuedLines, chained());
    audit.write(record("d"));
  }
  const auto old_lines = lines_of(rotated);
  const auto new_lines = lines_of(log);
  ASSERT_EQ(old_lines.size(), 3U);
  ASSERT_EQ(new_lines.size(), 2U);
  EXPECT_NE(old_lines[0].find(R"("chain":{"seq":1,"prev":"0000)"), std::string::npos);
  EXPECT_NE(old_lines[0].find(R"("start":"no earlier chain found"})"), std::string::npos);
  EXPECT_NE(new_lines[0].find(R"("chain":{"seq":4,"prev":")" + to_hex(chain_hash(old_lines[2]))),
            std::string::npos);
  EXPECT_EQ(new_lines[1].find(R"("start")"), std::string::npos) << "a restart continues";
  const audit::VerifyResult r = verify({rotated, log});
  EXPECT_EQ(r.tamper, audit::Tamper::none) << r.where.text() << " " << r.detail;
  EXPECT_EQ(r.last_seq, 5U);
  EXPECT_EQ(read_chain_head(log.string() + ".head")->seq, 5U);
}

TEST(AuditChain, RestartAfterTheLogWasRotatedAwayContinuesFromTheSavedHead) {
  const TempDir dir;
  const fs::path log = dir.path() / "audit.log";
  const fs::path rotated = dir.path() / "audit.log.1";
  { AuditLog(log.string(), AuditLog::kDefaultMaxQueuedLines, chained()).write(record("a")); }
  fs::rename(log, rotated);
  { AuditLog(log.string(), AuditLog::kDefaultMaxQueuedLines, chained()).write(record("b")); }
  const audit::VerifyResult r = verify({rotated, log});
  EXPECT_EQ(r.tamper, audit::Tamper::none) << r.where.text() << " " << r.detail;
  EXPECT_EQ(r.last_seq, 2U);
}

TEST(AuditChain, LogTruncatedWhileStoppedShowsAGapOnceWritingResumes) {
  const TempDir dir;
  const fs::path log = dir.path() / "audit.log";
  {
    AuditLog audit(log.string(), AuditLog::kDefaultMaxQueuedLines, chained());
    audit.write(record("a"));
    audit.write(record("a"));
  }
  const auto lines = lines_of(log);
  { std::ofstream(log, std::ios::trunc) << lines[0] << "\n"; }
  { AuditLog(log.string(), AuditLog::kDefaultMaxQueuedLines, chained()).write(record("b")); }
  const audit::VerifyResult r = verify({log});
  EXPECT_EQ(r.tamper, audit::Tamper::dropped) << r.detail;
  EXPECT_EQ(r.where.text(), "audit.log:2");
}

TEST(AuditChain, AnUnchainedLogGetsANewChainThatSaysWhy) {
  const TempDir dir;
  const fs::path log = dir.path() / "audit.log";
  { std::ofstream(log) << format_audit_line(record("old")); }
  { AuditLog(log.string(), AuditLog::kDefaultMaxQueuedLines, chained()).write(record("new")); }
  const audit::VerifyResult r = verify({log});
  EXPECT_EQ(r.tamper, audit::Tamper::none) << r.detail;
  EXPECT_EQ(r.unchained_lines, 1U);
  EXPECT_EQ(r.start, "audit.log:2 (the log's last line is not chained)");
}

TEST(AuditChain, SignedCheckpointsEveryNLinesAtRotationAndAtShutdown) {
  const TempDir dir;
  const fs::path key = dir.path() / "audit.key";
  const std::string pem = generate_signing_key(key.string());
  const fs::path log = dir.path() / "audit.log";
  const fs::path rotated = dir.path() / "audit.log.1";
  {
    AuditChainOptions options = chained(key.string());
    options.checkpoint_lines = 2;
    AuditLog audit(log.string(), AuditLog::kDefaultMaxQueuedLines, options);
    for (int i = 0; i < 3; ++i) audit.write(record("a"));
    audit.flush();
    fs::rename(log, rotated);
    audit.reopen();
    audit.write(record("b"));
  }
  const ChainPublicKey public_key(pem);
  std::ifstream published(log.string() + ".pub");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(published), {}), pem);
  // rotated: 1, 2, checkpoint 3 (1-2), 4, checkpoint 5 (4, at rotation); log: 6, checkpoint 7.
  const audit::VerifyResult r = verify({rotated, log}, &public_key);
  EXPECT_EQ(r.tamper, audit::Tamper::none) << r.where.text() << " " << r.detail;
  ASSERT_EQ(r.checkpoints.size(), 3U);
  EXPECT_EQ(r.checkpoints[1].where.text(), "audit.log.1:5");
  EXPECT_EQ(r.checkpoints[1].first_seq, 4U);
  EXPECT_EQ(r.checkpoints[2].where.text(), "audit.log:2");
  EXPECT_TRUE(r.checkpoints[2].signature_checked);
  EXPECT_EQ(r.unvouched_from, 0U);
}

TEST(AuditChain, CheckpointWhenTheIntervalPassesWithoutNewLines) {
  const TempDir dir;
  const fs::path key = dir.path() / "audit.key";
  generate_signing_key(key.string());
  const fs::path log = dir.path() / "audit.log";
  AuditChainOptions options = chained(key.string());
  options.checkpoint_interval = 1s;
  AuditLog audit(log.string(), AuditLog::kDefaultMaxQueuedLines, options);
  audit.write(record("a"));
  audit.flush();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (lines_of(log).size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  const auto lines = lines_of(log);
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_NE(lines[1].find(R"("code":"audit_chain_checkpoint")"), std::string::npos);
}

TEST(AuditChain, SigningKeyOthersCanReadIsRefused) {
  const TempDir dir;
  const fs::path key = dir.path() / "audit.key";
  generate_signing_key(key.string());
  EXPECT_EQ(fs::status(key).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  ::chmod(key.c_str(), 0644);
  const std::string log = (dir.path() / "audit.log").string();
  try {
    AuditLog audit(log, AuditLog::kDefaultMaxQueuedLines, chained(key.string()));
    ADD_FAILURE() << "a key group and others can read was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
  }
  ::chmod(key.c_str(), 0600);  // the control: the same key, private again
  EXPECT_NO_THROW(AuditLog(log, AuditLog::kDefaultMaxQueuedLines, chained(key.string())));
}

TEST(AuditChain, KeygenNeverOverwritesAKey) {
  const TempDir dir;
  const fs::path key = dir.path() / "audit.key";
  const std::string first = generate_signing_key(key.string());
  EXPECT_NE(first.find("BEGIN PUBLIC KEY"), std::string::npos);
  EXPECT_THROW(generate_signing_key(key.string()), std::runtime_error);
  EXPECT_EQ(ChainPublicKey(first).key_id().size(), 16U);
}

TEST(AuditChain, StreamsAndUnchainedFilesAreWrittenAsBefore) {
  const TempDir dir;
  const fs::path log = dir.path() / "audit.log";
  { AuditLog(log.string()).write(record("a")); }  // chain not enabled: the default
  const auto lines = lines_of(log);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_EQ(lines[0].find("\"chain\""), std::string::npos);
  EXPECT_FALSE(fs::exists(log.string() + ".head"));
}

}  // namespace
}  // namespace sandgate::telemetry
