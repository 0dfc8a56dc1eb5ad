// authenticate(): Proxy-Authorization values against a snapshot's token digests, each classified
// (the 407's event.reason and sandgate_proxy_auth_total's outcome), with no
// sockets (the integration tests send the same values through the daemon).
#include "proxy/auth.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <string>

#include "secrets/encoding.hpp"

namespace sandgate::proxy {
namespace {

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()),
                                static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

Snapshot snapshot() {
  Snapshot s;
  s.token_digests.insert_or_assign("sb1", secrets::sha256("tok-1"));
  s.token_digests.insert_or_assign(
      "sb:2",
      secrets::sha256("tok-2"));  // an id cannot hold ':'; never matches
  return s;
}

using telemetry::AuthOutcome;

struct Row {
  std::string value;
  AuthOutcome outcome;
  std::string sandbox = {};  // what the verdict names
  std::string bound = {};    // the connection's identity so far
};

TEST(Authenticate, ClassifiesEveryProxyAuthorization) {
  const Snapshot snap = snapshot();
  const std::string good = base64("sb1:tok-1");
  const Row rows[] = {
      {"Basic " + good, AuthOutcome::ok, "sb1"},
      {"basic " + good, AuthOutcome::ok, "sb1"},            // the scheme is case-insensitive
      {"BASIC  " + good, AuthOutcome::ok, "sb1"},           // more than one space
      {"  Basic " + good + " \t", AuthOutcome::ok, "sb1"},  // surrounding whitespace
      {"Basic " + good, AuthOutcome::ok, "sb1", "sb1"},     // the same identity again
      // No field at all: the challenge a client like git (anyauth) or Java expects first.
      {"", AuthOutcome::no_credentials},
      {" \t ", AuthOutcome::no_credentials},
      {"", AuthOutcome::no_credentials, "", "sb1"},  // bound: still only asks for credentials
      // A known id with the wrong token is named (never the token).
      {"Basic " + base64("sb1:tok-1:x"), AuthOutcome::wrong_token, "sb1"},  // all after ':'
      {"Basic " + base64("sb1:tok-2"), AuthOutcome::wrong_token, "sb1"},    // another's token
      {"Basic " + base64("sb1:"), AuthOutcome::wrong_token, "sb1"},
      {"Basic " + base64("sb1:TOK-1"), AuthOutcome::wrong_token, "sb1"},
      // An id no sandbox has is never named: it may be a token typed in the wrong place.
      {"Basic " + base64("sb9:tok-1"), AuthOutcome::unknown_sandbox_id},
      {"Basic " + base64("tok-1:sb1"), AuthOutcome::unknown_sandbox_id},
      {"Basic " + base64("sb:2:tok-2"), AuthOutcome::unknown_sandbox_id},  // id ends at ':'
      {"Basic " + base64("SB1:tok-1"), AuthOutcome::unknown_sandbox_id},   // case-sensitive
      // Anything that is not Basic base64(ID:TOKEN).
      {"Basic " + base64("sb1"), AuthOutcome::malformed_credentials},     // no colon
      {"Basic " + base64(":tok-1"), AuthOutcome::malformed_credentials},  // no id
      {"Bearer " + good, AuthOutcome::malformed_credentials},
      {"Digest username=\"sb1\"", AuthOutcome::malformed_credentials},
      {"Basic", AuthOutcome::malformed_credentials},
      {"Basic ", AuthOutcome::malformed_credentials},
      {good, AuthOutcome::malformed_credentials},                       // no scheme
      {"Basic " + good.substr(1), AuthOutcome::malformed_credentials},  // not a multiple of 4
      {"Basic " + good + "=", AuthOutcome::malformed_credentials},      // bad padding
      {"Basic " + good.substr(0, 4) + "*" + good.substr(5), AuthOutcome::malformed_credentials},
      {"Basic " + base64("sb1:" + std::string(2000, 'x')), AuthOutcome::malformed_credentials},
      // A valid identity other than the one the connection is bound to.
      {"Basic " + good, AuthOutcome::identity_changed, "sb2", "sb2"},
  };
  for (const Row& row : rows) {
    const AuthResult r = authenticate(snap, row.value, row.bound);
    EXPECT_EQ(telemetry::name(r.outcome), telemetry::name(row.outcome))
        << row.value << " bound " << row.bound;
    EXPECT_EQ(r.sandbox, row.sandbox) << row.value;
    EXPECT_EQ(r.ok(), row.outcome == AuthOutcome::ok);
  }
}

// What the client is told: an unknown id and a wrong token alike (it must not learn which ids
// exist); the audit names (telemetry::name) keep them apart.
TEST(Authenticate, TheClientCannotTellAnUnknownIdFromAWrongToken) {
  using telemetry::AuthOutcome;
  const AuthRefusal unknown = auth_refusal(AuthOutcome::unknown_sandbox_id);
  const AuthRefusal wrong = auth_refusal(AuthOutcome::wrong_token);
  EXPECT_EQ(unknown.reason, "invalid_credentials");
  EXPECT_EQ(unknown.reason, wrong.reason);
  EXPECT_EQ(unknown.message, wrong.message);
  EXPECT_NE(telemetry::name(AuthOutcome::unknown_sandbox_id),
            telemetry::name(AuthOutcome::wrong_token));
  EXPECT_EQ(auth_refusal(AuthOutcome::no_credentials).reason, "no_credentials");
  EXPECT_EQ(auth_refusal(AuthOutcome::malformed_credentials).reason, "malformed_credentials");
  EXPECT_EQ(auth_refusal(AuthOutcome::identity_changed).reason, "identity_changed");
}

TEST(Authenticate, NoSandboxesMeansNoOneGetsIn) {
  EXPECT_EQ(authenticate(Snapshot{}, "Basic " + base64("sb1:tok-1")).outcome,
            AuthOutcome::unknown_sandbox_id);
}

TEST(Authenticate, AMemoAcceptsOnlyTheSameValueAgainstTheSameToken) {
  Snapshot snap = snapshot();
  const std::string good = "Basic " + base64("sb1:tok-1");
  AuthMemo memo;
  ASSERT_TRUE(authenticate(snap, good, "", &memo).ok());  // checked in full, then remembered
  EXPECT_TRUE(authenticate(snap, good, "sb1", &memo).ok());
  EXPECT_TRUE(authenticate(snap, " " + good + "\t", "sb1", &memo).ok());
  // Anything else is checked in full as without a memo.
  EXPECT_EQ(authenticate(snap, "Basic " + base64("sb1:tok-2"), "sb1", &memo).outcome,
            AuthOutcome::wrong_token);
  EXPECT_EQ(authenticate(snap, "", "sb1", &memo).outcome, AuthOutcome::no_credentials);
  EXPECT_EQ(authenticate(snap, good, "sb2", &memo).outcome, AuthOutcome::identity_changed);
  // A reload that changes the token: the remembered value no longer proves anything.
  snap.token_digests.insert_or_assign("sb1", secrets::sha256("tok-new"));
  EXPECT_EQ(authenticate(snap, good, "sb1", &memo).outcome, AuthOutcome::wrong_token);
  // ... nor once the sandbox is gone.
  snap.token_digests.erase("sb1");
  EXPECT_EQ(authenticate(snap, good, "sb1", &memo).outcome, AuthOutcome::unknown_sandbox_id);
}

}  // namespace
}  // namespace sandgate::proxy
