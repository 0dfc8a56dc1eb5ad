#include "audit/verify.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "telemetry/audit_chain.hpp"
#include "telemetry/audit_log.hpp"

namespace sandgate::audit {
namespace {

namespace fs = std::filesystem;
namespace tel = sandgate::telemetry;

using sandgate::test::TempDir;

// Two files of a chain as a daemon writes them: `a` (rotated away) with lines 1-6 and its
// closing checkpoint, `b` with lines 7-12, then, at shutdown, its checkpoint. A checkpoint
// every 4 lines, signed with a fresh key.
struct Chain {
  std::vector<std::string> a;
  std::vector<std::string> b;
  std::string public_pem;
  tel::ChainHead head;  // what LOG.head says at the end
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const Chain& chain() {
  static const Chain made = [] {
    const TempDir dir;
    Chain c;
    const std::string key = (dir.path() / "audit.key").string();
    c.public_pem = tel::generate_signing_key(key);
    const std::string log = (dir.path() / "audit.log").string();
    tel::AuditChain writer(log, tel::AuditChainOptions{true, key, 4, std::chrono::seconds(60)});
    tel::AuditRecord r;
    r.event = "SANDBOX_NETWORK_DENIED";
    r.outcome = "failure";
    r.host = "evil.example";
    std::string out;
    for (int i = 0; i < 6; ++i) writer.append(tel::format_audit_line(r), out);
    writer.checkpoint(out);
    c.a = split(out);
    out.clear();
    for (int i = 0; i < 6; ++i) writer.append(tel::format_audit_line(r), out);
    writer.checkpoint(out);
    c.b = split(out);
    c.head = writer.head();
    return c;
  }();
  return made;
}

struct Input {
  std::vector<std::string> a;
  std::vector<std::string> b;
  bool with_key = true;
  bool with_head = true;
};

VerifyResult verify(const Input& in) {
  const tel::ChainPublicKey key(chain().public_pem);
  ChainVerifier v(in.with_key ? &key : nullptr,
                  in.with_head ? std::optional(chain().head) : std::nullopt);
  v.begin_file("a");
  for (const auto& l : in.a) v.line(l);
  v.begin_file("b");
  for (const auto& l : in.b) v.line(l);
  return v.finish();
}

TEST(ChainVerifier, TheWriterLaysOutTheChainAsTheTestsExpect) {
  // a: seq 1-4, checkpoint 5, seq 6-7, checkpoint 8; b: seq 9-12, checkpoint 13, 14-15, 16.
  ASSERT_EQ(chain().a.size(), 8U);
  ASSERT_EQ(chain().b.size(), 8U);
  EXPECT_EQ(chain().head.seq, 16U);
  EXPECT_NE(chain().a[0].find(R"("start":"no earlier chain found")"), std::string::npos);
  EXPECT_NE(chain().a[4].find(R"("code":"audit_chain_checkpoint")"), std::string::npos);
}

TEST(ChainVerifier, IntactChainVerifiesWithEveryCheckpoint) {
  const VerifyResult r = verify({chain().a, chain().b});
  EXPECT_EQ(r.tamper, Tamper::none) << r.where.text() << " " << r.detail;
  EXPECT_EQ(r.first_seq, 1U);
  EXPECT_EQ(r.last_seq, 16U);
  ASSERT_EQ(r.checkpoints.size(), 4U);
  EXPECT_EQ(r.checkpoints[0].where.text(), "a:5");
  EXPECT_EQ(r.checkpoints[0].first_seq, 1U);
  EXPECT_EQ(r.checkpoints[0].last_seq, 4U);
  EXPECT_EQ(r.checkpoints[1].first_seq, 6U);  // the checkpoint line 5 needs none of its own
  EXPECT_TRUE(r.checkpoints[3].signature_checked);
  EXPECT_EQ(r.unvouched_from, 0U);
}

TEST(ChainVerifier, LinesAfterTheLastCheckpointAreNotYetVouchedFor) {
  Input in{chain().a, chain().b, true, false};
  in.b.pop_back();  // a running daemon's log: its closing checkpoint is not written yet
  const VerifyResult r = verify(in);
  EXPECT_EQ(r.tamper, Tamper::none) << r.detail;
  EXPECT_EQ(r.unvouched_from, 14U);
  EXPECT_EQ(r.last_seq, 15U);
}

TEST(ChainVerifier, WithoutAKeyCheckpointsAreReportedUnchecked) {
  const VerifyResult r = verify({chain().a, chain().b, false, true});
  EXPECT_EQ(r.tamper, Tamper::none);
  ASSERT_FALSE(r.checkpoints.empty());
  EXPECT_FALSE(r.checkpoints[0].signature_checked);
}

struct TamperCase {
  std::string name;
  std::function<void(Input&)> tamper;
  Tamper expected;
  std::string where;
};

std::string flip_one_byte(std::string line) {
  const std::size_t at = line.find("evil.example");
  if (at != std::string::npos) line[at] = 'E';
  return line;
}

class ChainTampering : public ::testing::TestWithParam<TamperCase> {};

TEST_P(ChainTampering, NamesTheFirstBadLineAndWhatHappened) {
  Input in{chain().a, chain().b};
  GetParam().tamper(in);
  const VerifyResult r = verify(in);
  EXPECT_EQ(r.tamper, GetParam().expected) << r.where.text() << " " << r.detail;
  EXPECT_EQ(r.where.text(), GetParam().where) << r.detail;
}

INSTANTIATE_TEST_SUITE_P(
    Rows, ChainTampering,
    ::testing::Values(
        TamperCase{"EditedLine", [](Input& in) { in.a[2] = flip_one_byte(in.a[2]); },
                   Tamper::edited, "a:3"},
        TamperCase{"EditedLastLineOfAFile", [](Input& in) { in.a[7] = in.a[7] + " "; },
                   Tamper::edited, "a:8"},
        TamperCase{"EditedLastLineOfAll", [](Input& in) { in.b[7] = in.b[7] + " "; },
                   Tamper::edited, "b:8"},
        TamperCase{"NotJson", [](Input& in) { in.b[1] = "garbage"; }, Tamper::edited, "b:2"},
        TamperCase{"DroppedLine", [](Input& in) { in.a.erase(in.a.begin() + 2); }, Tamper::dropped,
                   "a:3"},
        TamperCase{"InsertedCopy", [](Input& in) { in.b.insert(in.b.begin() + 3, in.a[1]); },
                   Tamper::inserted, "b:4"},
        TamperCase{"Reordered", [](Input& in) { std::swap(in.b[1], in.b[2]); }, Tamper::reordered,
                   "b:2"},
        TamperCase{"TruncatedRotatedFile", [](Input& in) { in.a.resize(6); }, Tamper::truncated,
                   "a:6"},
        TamperCase{"TruncatedCurrentFile", [](Input& in) { in.b.resize(5); }, Tamper::truncated,
                   "b:5"},
        TamperCase{"CutMidLine", [](Input& in) { in.b[7].resize(in.b[7].size() / 2); },
                   Tamper::edited, "b:8"},
        TamperCase{"ForgedSignature",
                   [](Input& in) {
                     // A checkpoint's signature altered: it no longer verifies.
                     const std::size_t at = in.a[4].find(R"("signature":")") + 13;
                     in.a[4][at] = in.a[4][at] == '0' ? '1' : '0';
                   },
                   Tamper::edited, "a:5"},
        TamperCase{"NewChainInTheMiddle",
                   [](Input& in) { in.b.insert(in.b.begin(), chain().a[0]); }, Tamper::restarted,
                   "b:1"}),
    [](const auto& row) { return row.param.name; });

}  // namespace
}  // namespace sandgate::audit
