#include "secrets/placeholder.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "secrets/secret_bytes.hpp"
#include "secrets/secret_file.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::secrets {
namespace {

const PlaceholderKey& key() {
  static const PlaceholderKey k = PlaceholderKey::from_bytes(std::string(32, '\x42'));
  return k;
}

TEST(Placeholder, ShapedLikeATokenAndDistinctPerSandboxAndCredential) {
  const std::string p = key().placeholder_for("ci", "github");
  ASSERT_EQ(p.size(), kPlaceholderLength);
  EXPECT_TRUE(p.starts_with("sgph_"));
  EXPECT_EQ(p.find_first_not_of("0123456789abcdef", 5), std::string::npos);
  EXPECT_EQ(p, key().placeholder_for("ci", "github"));  // stable
  EXPECT_NE(p, key().placeholder_for("ci2", "github"));
  EXPECT_NE(p, key().placeholder_for("ci", "npm"));
  // The separator keeps ("a", "bc") and ("ab", "c") apart.
  EXPECT_NE(key().placeholder_for("a", "bc"), key().placeholder_for("ab", "c"));
  const auto other = PlaceholderKey::from_bytes(std::string(32, '\x43'));
  EXPECT_NE(p, other.placeholder_for("ci", "github"));
}

TEST(Placeholder, IndexFindsKnownAndUnknownPlaceholders) {
  const PlaceholderIndex index(key(), {{"ci", "github"}, {"ci", "npm"}, {"dev", "github"}});
  EXPECT_EQ(index.size(), 3u);
  const std::string ci_github = key().placeholder_for("ci", "github");
  const std::string dev_github = key().placeholder_for("dev", "github");

  const std::string header = "Bearer " + ci_github;  // hits are views into the text
  auto hit = index.find(header);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->offset, 7u);
  EXPECT_EQ(hit->text, ci_github);
  ASSERT_TRUE(hit->known());
  EXPECT_EQ(*hit->sandbox, "ci");
  EXPECT_EQ(*hit->credential, "github");

  const std::string forged = "sgph_" + std::string(40, 'a');
  const std::string forged_text = "x=" + forged;
  hit = index.find(forged_text);
  ASSERT_TRUE(hit);
  EXPECT_FALSE(hit->known());

  EXPECT_FALSE(index.find("no placeholder here"));
  EXPECT_FALSE(index.find("sgph_tooshort"));
  EXPECT_FALSE(index.find("sgph_" + std::string(41, 'a')));  // longer: not one of ours
  EXPECT_FALSE(index.find("sgph_" + std::string(39, 'a') + "G"));

  const std::string both = "a:" + dev_github + "," + ci_github;
  const auto all = index.find_all(both);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(*all[0].sandbox, "dev");
  EXPECT_EQ(*all[1].sandbox, "ci");
  EXPECT_TRUE(may_contain_placeholder("..sgph_"));
  EXPECT_FALSE(may_contain_placeholder("sgph"));
}

TEST(PlaceholderKey, CreatedOnceWithMode0600ThenReadBack) {
  test::TempDir dir;
  const std::string path = dir.file("placeholder.key");
  const PlaceholderKey created = PlaceholderKey::load_or_create(path);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  const PlaceholderKey again = PlaceholderKey::load_or_create(path);
  EXPECT_EQ(created.placeholder_for("s", "c"), again.placeholder_for("s", "c"));
  EXPECT_NE(created.placeholder_for("s", "c"),
            PlaceholderKey::generate().placeholder_for("s", "c"));
}

TEST(PlaceholderKey, RefusesOpenOrMisshapenFiles) {
  test::TempDir dir;
  const std::string open = dir.write("open.key", std::string(32, 'k'));
  ::chmod(open.c_str(), 0644);
  EXPECT_THROW(PlaceholderKey::load_or_create(open), std::runtime_error);
  const std::string short_key = dir.write("short.key", "abc");
  ::chmod(short_key.c_str(), 0600);
  try {
    PlaceholderKey::load_or_create(short_key);
    FAIL() << "a 3-byte key was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("expected exactly 32 bytes"), std::string::npos);
    EXPECT_EQ(std::string(e.what()).find("abc"), std::string::npos);
  }
  EXPECT_THROW(PlaceholderKey::load_or_create(dir.file("no/such/dir/key")), std::runtime_error);
}

TEST(SecretBytes, ExcludedFromCoreDumpsAndMovable) {
  SecretBytes a("ghs_secret");
  EXPECT_EQ(a.view(), "ghs_secret");
  EXPECT_TRUE(a.excluded_from_dumps());
  SecretBytes b = std::move(a);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.view(), "ghs_secret");
  SecretBytes c;
  c = std::move(b);
  EXPECT_EQ(c.view(), "ghs_secret");
  EXPECT_TRUE(SecretBytes("").empty());
}

TEST(SecretFile, ReadsTrimsOneNewlineAndChecksMode) {
  test::TempDir dir;
  const std::string path = dir.write("token", "npm_abc\n");
  ::chmod(path.c_str(), 0600);
  SecretFile f = read_secret_file(path, "token file");
  ASSERT_TRUE(f.ok()) << f.error;
  EXPECT_EQ(f.content.view(), "npm_abc");
  EXPECT_FALSE(f.identity.empty());

  ::chmod(path.c_str(), 0640);
  f = read_secret_file(path, "token file");
  EXPECT_FALSE(f.ok());
  EXPECT_NE(f.error.find("accessible by group or others (mode 0640)"), std::string::npos);
  EXPECT_EQ(f.error.find("npm_abc"), std::string::npos);

  const std::string empty = dir.write("empty", "\n");
  ::chmod(empty.c_str(), 0600);
  EXPECT_NE(read_secret_file(empty, "token file").error.find("is empty"), std::string::npos);
  EXPECT_NE(read_secret_file(dir.file("missing"), "token file").error.find("cannot read"),
            std::string::npos);
}

}  // namespace
}  // namespace sandgate::secrets
