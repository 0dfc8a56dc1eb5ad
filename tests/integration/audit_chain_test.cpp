// The audit log's hash chain end to end: a real daemon writes a signed, chained log across a
// rotation (rename + SIGUSR1) and a restart; then each way of tampering with it (edit a byte,
// drop, insert, reorder, truncate a line) is done to a copy, and the real `sandgate audit
// verify` must name the line and the kind. The untampered copy is the control.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/json_helpers.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kToken = "tok-chain-5c4b3a";

std::vector<std::string> lines_of(const fs::path& p) {
  std::vector<std::string> lines;
  std::istringstream in(read_file(p.string()));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void write_lines(const fs::path& p, const std::vector<std::string>& lines) {
  std::ofstream out(p, std::ios::trunc);
  for (const std::string& l : lines) out << l << "\n";
}

bool wait_lines(const fs::path& p, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (lines_of(p).size() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

CommandResult sandgate(const std::vector<std::string>& args) {
  std::vector<std::string> argv{sandgate_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, std::chrono::seconds(20));
}

class AuditChainE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const CommandResult keygen = sandgate({"audit", "keygen", key()});
    ASSERT_EQ(keygen.exit_code, 0) << keygen.err;
    ASSERT_NE(keygen.out.find("BEGIN PUBLIC KEY"), std::string::npos);
    // First run: 4 denials, the rotation, 2 more; second run: 2 more.
    run_daemon([] {
      deny(4);
      ASSERT_TRUE(wait_lines(log(), 5));  // 3 denials, a checkpoint, the fourth
      fs::rename(log(), rotated());
    });
    ASSERT_TRUE(wait_lines(log(), 3)) << "2 denials after the rotation, then the checkpoint";
    run_daemon([] {});
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string key() { return dir_->file("audit.key"); }
  static fs::path log() { return dir_->path() / "logs" / "audit.log"; }
  static fs::path rotated() { return dir_->path() / "logs" / "audit.log.1"; }

  static void deny(int n) {
    for (int i = 0; i < n; ++i) {
      const CurlResult r =
          run_curl({"-x", daemon_->proxy_url("sb", kToken), "http://denied.test/"});
      ASSERT_EQ(r.http_code, 403);
    }
  }

  // Starts the daemon on the shared log, runs `before_rotation` (the first run only rotates
  // after it), denies 2 more requests and stops it.
  static void run_daemon(const std::function<void()>& before_rotation) {
    fs::create_directories(log().parent_path());
    SandgateOptions options;
    options.audit_path = log().string();
    options.log = "audit_signing_key = \"" + key() + "\"\naudit_checkpoint_lines = 3\n";
    options.tables = R"(
[dns.hosts]
"denied.test" = ["127.0.0.1"]

[sandboxes.sb]
token = ")" + kToken +
                     R"("
allow = []
)";
    daemon_ = new SandgateProcess(options);
    const bool rotates = !fs::exists(rotated());
    before_rotation();
    if (rotates && fs::exists(rotated())) {
      ::kill(daemon_->pid(), SIGUSR1);
      // The new file exists once the writer has reopened: later lines go there.
      const auto deadline = std::chrono::steady_clock::now() + 5s;
      while (!fs::exists(log()) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
      }
    }
    deny(2);
    EXPECT_EQ(daemon_->stop(), 0);
    delete daemon_;
    daemon_ = nullptr;
  }

  // A copy of the logs (and LOG.pub, LOG.head) to tamper with.
  struct Copy {
    TempDir dir;
    fs::path rotated = dir.path() / "audit.log.1";
    fs::path log = dir.path() / "audit.log";
  };
  static std::unique_ptr<Copy> copy() {
    auto c = std::make_unique<Copy>();
    for (const auto& name : {"audit.log.1", "audit.log", "audit.log.pub", "audit.log.head"}) {
      fs::copy_file(log().parent_path() / name, c->dir.path() / name);
    }
    return c;
  }
  static CommandResult verify(const Copy& c) {
    return sandgate({"audit", "verify", c.rotated.string(), c.log.string()});
  }

  static TempDir* dir_;
  static SandgateProcess* daemon_;
};

TempDir* AuditChainE2e::dir_ = nullptr;
SandgateProcess* AuditChainE2e::daemon_ = nullptr;

TEST_F(AuditChainE2e, TheUntamperedLogVerifiesAcrossRotationAndRestart) {
  // rotated: 1-3, checkpoint 4, 5, checkpoint 6 (rotation); log: 7-8, checkpoint 9
  // (shutdown), then the second run: 10-11, checkpoint 12.
  const auto old_lines = lines_of(rotated());
  const auto new_lines = lines_of(log());
  ASSERT_EQ(old_lines.size(), 6U) << read_file(rotated().string());
  ASSERT_EQ(new_lines.size(), 6U) << read_file(log().string());
  EXPECT_NE(old_lines[0].find(R"("start":")"), std::string::npos);
  EXPECT_EQ(new_lines[3].find(R"("start":")"), std::string::npos) << "the restart continues";
  EXPECT_NE(new_lines[3].find(R"("chain":{"seq":10,)"), std::string::npos) << new_lines[3];

  const auto c = copy();
  const CommandResult r = verify(*c);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("intact: seq 1-12"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("audit.log:6 (key "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("signature valid, vouches for seq 10-11"), std::string::npos) << r.out;
}

TEST_F(AuditChainE2e, TheReviewCommandsReadTheChainedLog) {
  const CommandResult r =
      sandgate({"audit", "--format", "json", rotated().string(), log().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = parse_object(r.out);
  ASSERT_TRUE(report) << r.out;
  EXPECT_EQ(report->at("malformed").to_number<int>(), 0) << r.out;
  EXPECT_EQ(report->at("matched").to_number<int>(), 8) << "checkpoints are no events\n" << r.out;
  const auto& sandboxes = report->at("sandboxes").as_array();
  ASSERT_EQ(sandboxes.size(), 1U) << r.out;
  EXPECT_EQ(sandboxes[0].at("denied").to_number<int>(), 8) << r.out;
}

struct Tampering {
  std::string name;
  std::function<void(std::vector<std::string>& rotated, std::vector<std::string>& log)> apply;
  std::string expected;  // "FILE:LINE: KIND"
};

TEST_F(AuditChainE2e, VerifyNamesEachTampering) {
  const std::vector<Tampering> rows{
      {"edit one byte", [](auto& rot, auto&) { rot[1][rot[1].find("denied.test")] = 'D'; },
       "audit.log.1:2: edited"},
      {"drop a line", [](auto&, auto& log) { log.erase(log.begin() + 1); }, "audit.log:2: dropped"},
      {"insert a copied line", [](auto& rot, auto& log) { log.insert(log.begin() + 2, rot[1]); },
       "audit.log:3: inserted"},
      {"swap two lines", [](auto& rot, auto&) { std::swap(rot[1], rot[2]); },
       "audit.log.1:2: reordered"},
      {"truncate the current file", [](auto&, auto& log) { log.resize(4); },
       "audit.log:4: truncated"},
      {"truncate the rotated file", [](auto& rot, auto&) { rot.pop_back(); },
       "audit.log.1:5: truncated"},
  };
  for (const Tampering& row : rows) {
    const auto c = copy();
    auto rot = lines_of(c->rotated);
    auto log = lines_of(c->log);
    row.apply(rot, log);
    write_lines(c->rotated, rot);
    write_lines(c->log, log);
    const CommandResult r = verify(*c);
    EXPECT_EQ(r.exit_code, 1) << row.name << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find(c->dir.path().string() + "/" + row.expected), std::string::npos)
        << row.name << "\n"
        << r.out;
  }
}

TEST_F(AuditChainE2e, ACheckpointFromAnotherKeyIsRefused) {
  const auto c = copy();
  TempDir other;
  const CommandResult keygen = sandgate({"audit", "keygen", other.file("other.key")});
  ASSERT_EQ(keygen.exit_code, 0);
  const std::string pem = other.write("other.pub", keygen.out);
  const CommandResult r =
      sandgate({"audit", "verify", "--public-key", pem, c->rotated.string(), c->log.string()});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("audit.log.1:4: edited"), std::string::npos) << r.out;
  // The control: the key published next to the log.
  EXPECT_EQ(sandgate({"audit", "verify", "--public-key", c->log.string() + ".pub",
                      c->rotated.string(), c->log.string()})
                .exit_code,
            0);
}

}  // namespace
}  // namespace sandgate::test
