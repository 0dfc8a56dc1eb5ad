// make_snapshot after a reload that changed only drop-ins: the credential injection table and
// the placeholder index it builds from the previous snapshot are the ones a whole build gives,
// and they share what did not change with the previous snapshot.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "policy/host.hpp"
#include "proxy/runtime.hpp"
#include "secrets/placeholder.hpp"
#include "support/temp_dir.hpp"

namespace sandgate::proxy {
namespace {

namespace fs = std::filesystem;

std::string main_file(const test::TempDir& dir) {
  return "sandboxes_dir = \"sandboxes.d\"\n"
         "[launcher]\nstate_dir = \"" +
         dir.file("state") +
         "\"\n"
         "[interception]\nca_cert = \"" +
         dir.file("ca.pem") + "\"\nca_key = \"" + dir.file("ca.key") +
         "\"\n"
         "[credentials.gh]\nprovider = \"static\"\nfile = \"" +
         dir.file("gh-token") +
         "\"\nenv = [\"GH_TOKEN\"]\n"
         "[credentials.npm]\nprovider = \"static\"\nfile = \"" +
         dir.file("npm-token") +
         "\"\n"
         "[profiles.p]\nallow = [\"github.com\", \"registry.npmjs.org\"]\n"
         "[[profiles.p.inject]]\nhosts = [\"github.com\"]\ncredential = \"gh\"\nas = \"bearer\"\n"
         "[profiles.q]\nallow = [\"github.com\"]\n";
}

// A drop-in as sandgate-launch writes it; `own` adds a rule of the sandbox's own.
std::string drop_in(const std::string& id, const std::string& profile, int n, bool own = false) {
  std::string text = "id = \"" + id + "\"\nprofile = \"" + profile + "\"\nsources = [\"10.64.0." +
                     std::to_string(n) + "\"]\n";
  if (own) {
    text +=
        "[[inject]]\nhosts = [\"registry.npmjs.org\"]\ncredential = \"npm\"\nas = \"header\"\n"
        "header = \"X-Token\"\n";
  }
  return text;
}

// `a` and `b` inject alike and know the same placeholders, for every sandbox either has.
void expect_same_credentials(const Snapshot& a, const Snapshot& b, const config::Config& cfg) {
  ASSERT_TRUE(a.injection && b.injection);
  EXPECT_EQ(a.injection->distinct_rule_sets(), b.injection->distinct_rule_sets());
  ASSERT_EQ(a.placeholders == nullptr, b.placeholders == nullptr);
  if (a.placeholders) {
    EXPECT_EQ(a.placeholders->size(), b.placeholders->size());
  }
  const policy::Host github = policy::normalize_host("github.com");
  const policy::Host npm = policy::normalize_host("registry.npmjs.org");
  for (const config::Sandbox& sandbox : cfg.sandboxes) {
    const std::string& id = sandbox.spec.id;
    const secrets::InjectionRules* ra = a.injection->for_sandbox(id);
    const secrets::InjectionRules* rb = b.injection->for_sandbox(id);
    ASSERT_EQ(ra == nullptr, rb == nullptr) << id;
    if (ra != nullptr) {
      EXPECT_EQ(ra->rules(), rb->rules()) << id;
      for (const policy::Host* host : {&github, &npm}) {
        const auto* ma = ra->match(*host, 443, "/");
        const auto* mb = rb->match(*host, 443, "/");
        EXPECT_EQ(ma == nullptr ? "" : ma->credential, mb == nullptr ? "" : mb->credential) << id;
      }
    }
    if (a.placeholders == nullptr) continue;
    for (const std::string& name : cfg.credentials_of(sandbox)) {
      const std::string text = a.placeholders->key().placeholder_for(id, name);
      const auto ha = a.placeholders->find(text);
      const auto hb = b.placeholders->find(text);
      ASSERT_TRUE(ha && ha->known() && hb && hb->known()) << id << " " << name;
      EXPECT_EQ(*ha->sandbox, id);
      EXPECT_EQ(*hb->sandbox, id);
      EXPECT_EQ(*ha->credential, name);
      EXPECT_EQ(*hb->credential, name);
    }
  }
}

TEST(Snapshot, AReloadOfDropInsKeepsCredentialsAsAWholeBuild) {
  test::TempDir dir;
  // Neither the token files nor the CA are read to build a snapshot.
  fs::create_directories(dir.path() / "state");
  fs::create_directories(dir.path() / "sandboxes.d");
  const std::string main = dir.write("sandgate.toml", main_file(dir));
  for (int i = 0; i < 40; ++i) {
    dir.write("sandboxes.d/s" + std::to_string(i) + ".toml",
              drop_in("s" + std::to_string(i), i % 3 == 0 ? "q" : "p", 2 + 4 * i, i % 5 == 0));
  }
  config::Config current = config::load_config(main);
  auto snap = make_snapshot(std::make_shared<const config::Config>(current), {}, nullptr);
  ASSERT_TRUE(snap->placeholders);

  const auto step = [&](const std::vector<std::string>& names) {
    config::Config next = config::reload_config(current, names);
    ASSERT_TRUE(next.changes);
    auto incremental = make_snapshot(std::make_shared<const config::Config>(next), {}, snap.get());
    const auto whole = make_snapshot(
        std::make_shared<const config::Config>(config::load_config(main)), {}, nullptr);
    expect_same_credentials(*incremental, *whole, next);
    snap = std::move(incremental);
    current = std::move(next);
  };
  const fs::path d = dir.path() / "sandboxes.d";
  dir.write("sandboxes.d/new.toml", drop_in("new", "p", 250));
  step({"new.toml"});
  dir.write("sandboxes.d/own.toml", drop_in("own", "q", 246, true));
  step({"own.toml"});
  fs::remove(d / "s1.toml");  // profile p: its gh placeholder goes
  step({"s1.toml"});
  fs::remove(d / "s5.toml");  // its own npm rule and p's gh rule
  step({"s5.toml"});
  dir.write("sandboxes.d/s2.toml", drop_in("s2", "q", 10));  // p -> q: no credential left
  step({"s2.toml"});
  dir.write("sandboxes.d/s3.toml", drop_in("s3", "p", 14, true));  // q -> p, with its own rule
  step({"s3.toml"});

  // What did not change is shared: one compiled set for p's sandboxes without rules of their own.
  const auto whole = make_snapshot(std::make_shared<const config::Config>(current), {}, nullptr);
  EXPECT_EQ(snap->injection->for_sandbox("s4"), snap->injection->for_sandbox("new"));
  EXPECT_EQ(snap->injection->distinct_rule_sets(), whole->injection->distinct_rule_sets());
  EXPECT_EQ(snap->injection->for_sandbox("s1"), nullptr);
  EXPECT_EQ(snap->injection->for_sandbox("s2"), nullptr);
  const std::string gone = snap->placeholders->key().placeholder_for("s1", "gh");
  const auto hit = snap->placeholders->find(gone);
  ASSERT_TRUE(hit);
  EXPECT_FALSE(hit->known());  // a removed sandbox's placeholder is no longer anyone's
}

// The client's address in the audit line and the per-source limits: Asio's text, made
// without inet_ntop for IPv4.
TEST(AddressText, IsAsiosText) {
  for (const char* text : {"0.0.0.0", "127.0.0.1", "10.2.30.255", "255.255.255.255", "1.0.10.100",
                           "::1", "fe80::1", "2001:db8::8:800:200c:417a", "::ffff:192.0.2.1"}) {
    const auto address = boost::asio::ip::make_address(text);
    EXPECT_EQ(address_text(address), address.to_string()) << text;
    EXPECT_EQ(address_text(address), text);
  }
}

}  // namespace
}  // namespace sandgate::proxy
