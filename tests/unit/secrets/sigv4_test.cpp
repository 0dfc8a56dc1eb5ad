// SigV4 against AWS's published test suite (testdata/sigv4, from aws-c-auth's copy of the
// suite; see its README): for every request, the canonical request, the string to sign and
// the signature, byte for byte. Then what the suite does not cover: parsing the Authorization
// field strictly, and the aws-chunked chain.
#include "secrets/sigv4.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "secrets/encoding.hpp"

namespace sandgate::secrets::sigv4 {
namespace {

namespace fs = std::filesystem;

fs::path suite_dir() {
  return fs::path(SANDGATE_SIGV4_SUITE_DIR);
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One case of the suite: request.txt parsed (its lines end in "\n"; a line that starts with
// white space continues the field before it), context.json's credentials, scope and time.
struct Case {
  std::string name;
  std::string method;
  std::string target;
  std::vector<std::pair<std::string, std::string>> fields;
  std::string body;
  std::string access_key_id;
  std::string secret;
  std::string token;
  bool sign_token = false;
  bool normalize = true;
  bool sign_body = false;  // the signer also sends (and signs) x-amz-content-sha256
  Scope scope;
  std::string amz_date;  // 20150830T123600Z
};

Case load(const std::string& name) {
  Case c;
  c.name = name;
  std::istringstream in(read(suite_dir() / name / "request.txt"));
  std::string line;
  std::getline(in, line);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = line.rfind(' ');
  c.method = line.substr(0, sp1);
  c.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  while (std::getline(in, line) && !line.empty()) {
    if (line[0] == ' ' || line[0] == '\t') {
      c.fields.back().second += " " + line;
      continue;
    }
    const std::size_t colon = line.find(':');
    c.fields.emplace_back(line.substr(0, colon), line.substr(colon + 1));
  }
  c.body = std::string(std::istreambuf_iterator<char>(in), {});
  const auto ctx = boost::json::parse(read(suite_dir() / name / "context.json")).as_object();
  const auto& creds = ctx.at("credentials").as_object();
  c.access_key_id = creds.at("access_key_id").as_string();
  c.secret = creds.at("secret_access_key").as_string();
  if (creds.contains("token")) {
    c.token = creds.at("token").as_string();
    c.sign_token = !(ctx.contains("omit_session_token") && ctx.at("omit_session_token").as_bool());
  }
  c.normalize = ctx.at("normalize").as_bool();
  c.sign_body = ctx.at("sign_body").as_bool();
  const std::string ts(ctx.at("timestamp").as_string());  // 2015-08-30T12:36:00Z
  c.amz_date = ts.substr(0, 4) + ts.substr(5, 2) + ts.substr(8, 2) + "T" + ts.substr(11, 2) +
               ts.substr(14, 2) + ts.substr(17, 2) + "Z";
  c.scope = {c.amz_date.substr(0, 8), std::string(ctx.at("region").as_string()),
             std::string(ctx.at("service").as_string())};
  return c;
}

std::vector<std::string> case_names() {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(suite_dir())) {
    if (entry.is_directory()) out.push_back(entry.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class SigV4Suite : public ::testing::TestWithParam<std::string> {};

TEST_P(SigV4Suite, CanonicalRequestStringToSignAndSignature) {
  const Case c = load(GetParam());
  // What a signer adds: X-Amz-Date, the payload hash where asked, and the session token
  // unless the case leaves it unsigned.
  std::vector<std::pair<std::string, std::string>> fields = c.fields;
  fields.emplace_back("X-Amz-Date", c.amz_date);
  if (c.sign_body) fields.emplace_back("X-Amz-Content-Sha256", sha256_hex(c.body));
  if (c.sign_token) fields.emplace_back("X-Amz-Security-Token", c.token);
  std::vector<Field> view;
  std::vector<std::string> signed_headers;
  for (const auto& [name, value] : fields) {
    view.push_back({name, value});
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (std::find(signed_headers.begin(), signed_headers.end(), lower) == signed_headers.end()) {
      signed_headers.push_back(lower);
    }
  }
  std::sort(signed_headers.begin(), signed_headers.end());
  const Request request{c.method, c.target, view};
  const auto canonical = canonical_request(request, signed_headers, sha256_hex(c.body),
                                           c.normalize ? PathRule::standard : PathRule::s3);
  ASSERT_TRUE(canonical.has_value());
  EXPECT_EQ(*canonical, read(suite_dir() / c.name / "header-canonical-request.txt"));
  const std::string to_sign = string_to_sign(c.amz_date, c.scope, *canonical);
  EXPECT_EQ(to_sign, read(suite_dir() / c.name / "header-string-to-sign.txt"));
  const std::string signature = SigningKey(c.secret, c.scope).sign(to_sign);
  EXPECT_EQ(signature, read(suite_dir() / c.name / "header-signature.txt"));
  // The Authorization field a client sends parses back into what was signed.
  const auto parsed = parse_authorization(
      format_authorization(c.access_key_id, c.scope, signed_headers, signature));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->access_key_id, c.access_key_id);
  EXPECT_EQ(parsed->scope, c.scope);
  EXPECT_EQ(parsed->signed_headers, signed_headers);
  EXPECT_EQ(parsed->signature, signature);
}

INSTANTIATE_TEST_SUITE_P(Aws, SigV4Suite, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(SigV4Suite, HasEveryCase) {
  EXPECT_EQ(case_names().size(), 38u);
}

constexpr std::string_view kSignature =
    "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7";

TEST(SigV4Authorization, ParsesWhatClientsSend) {
  const auto a = parse_authorization(
      "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
      "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=" +
      std::string(kSignature));
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->access_key_id, "AKIAIOSFODNN7EXAMPLE");
  EXPECT_EQ(a->scope, (Scope{"20130524", "us-east-1", "s3"}));
  EXPECT_EQ(a->signed_headers.size(), 4u);
  // The order of the three parts is free; spaces after the commas are optional.
  EXPECT_TRUE(parse_authorization("AWS4-HMAC-SHA256 Signature=" + std::string(kSignature) +
                                  ", SignedHeaders=host, Credential=A/20130524/r/s/aws4_request"));
}

TEST(SigV4Authorization, RefusesEverythingElse) {
  const std::string sig(kSignature);
  const std::string cred = "Credential=A/20130524/us-east-1/s3/aws4_request";
  for (const std::string& bad : std::vector<std::string>{
           "",
           "AWS4-HMAC-SHA256",
           "AWS4-HMAC-SHA1 " + cred + ", SignedHeaders=host, Signature=" + sig,
           "AWS4-HMAC-SHA256X " + cred + ", SignedHeaders=host, Signature=" + sig,
           "AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=host",
           "AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=host, Signature=" + sig + ", X=1",
           "AWS4-HMAC-SHA256 " + cred + ", " + cred + ", SignedHeaders=host, Signature=" + sig,
           "AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=Host, Signature=" + sig,
           "AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=x-amz-date;host, Signature=" + sig,
           "AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=host;host, Signature=" + sig,
           "AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=host;;x, Signature=" + sig,
           "AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=host, Signature=" + sig.substr(1),
           "AWS4-HMAC-SHA256 " + cred + ", SignedHeaders=host, Signature=" + sig.substr(1) + "G",
           "AWS4-HMAC-SHA256 Credential=A/2013052/us-east-1/s3/aws4_request, SignedHeaders=host, "
           "Signature=" +
               sig,
           "AWS4-HMAC-SHA256 Credential=A/20130524/us-east-1/s3/aws5_request, SignedHeaders=host, "
           "Signature=" +
               sig,
           "AWS4-HMAC-SHA256 Credential=A/B/20130524/us-east-1/s3/aws4_request, "
           "SignedHeaders=host, Signature=" +
               sig,
           "AWS4-HMAC-SHA256 Credential=/20130524/us-east-1/s3/aws4_request, SignedHeaders=host, "
           "Signature=" +
               sig,
       }) {
    EXPECT_FALSE(parse_authorization(bad).has_value()) << bad;
  }
}

TEST(SigV4Canonical, AMissingSignedFieldIsNoCanonicalRequest) {
  const std::vector<Field> fields{{"Host", "example.amazonaws.com"}};
  const std::vector<std::string> signed_headers{"host", "x-amz-date"};
  EXPECT_FALSE(
      canonical_request({"GET", "/", fields}, signed_headers, sha256_hex(""), PathRule::standard)
          .has_value());
}

// A path sent encoded: S3 signs it as sent, every other service encodes it again (as
// botocore's S3SigV4Auth and SigV4Auth do). The query is decoded and encoded again either way,
// so a client's own spelling of it does not matter.
TEST(SigV4Canonical, PathAndQueryAsEachServiceSignsThem) {
  const std::vector<Field> fields{{"host", "h"}};
  const std::vector<std::string> signed_headers{"host"};
  const auto first_lines = [&](std::string_view target, PathRule rule) {
    const std::string c = *canonical_request({"GET", target, fields}, signed_headers, "x", rule);
    return c.substr(0, c.find("\nhost:"));
  };
  EXPECT_EQ(first_lines("/a%20b/./c//d?x=1", PathRule::s3), "GET\n/a%20b/./c//d\nx=1");
  EXPECT_EQ(first_lines("/a%20b/./c//d?x=1", PathRule::standard), "GET\n/a%2520b/c/d\nx=1");
  EXPECT_EQ(first_lines("/?b=%7e&a=x+y&c=%2F&d", PathRule::s3), "GET\n/\na=x%2By&b=~&c=%2F&d=");
  EXPECT_EQ(first_lines("", PathRule::standard), "GET\n/\n");
  EXPECT_EQ(first_lines("/..", PathRule::standard), "GET\n/\n");
}

// aws-chunked, from the example in the S3 documentation ("Signature Calculations for the
// Authorization Header: Transferring Payload in Multiple Chunks"): 64 KiB of 'a' in chunks of
// 65536 and 1024 bytes after a seed signature; each chunk's signature chains from the one
// before.
TEST(SigV4Chunked, ChainsAsTheS3ExampleDoes) {
  const Scope scope{"20130524", "us-east-1", "s3"};
  const SigningKey key("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", scope);
  const std::string seed = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
  const std::string first =
      key.sign(chunk_string_to_sign("20130524T000000Z", scope, seed, std::string(65536, 'a')));
  EXPECT_EQ(first, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648");
  const std::string second =
      key.sign(chunk_string_to_sign("20130524T000000Z", scope, first, std::string(1024, 'a')));
  EXPECT_EQ(second, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497");
  const std::string last = key.sign(chunk_string_to_sign("20130524T000000Z", scope, second, ""));
  EXPECT_EQ(last, "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9");
}

// Re-signing. The client signs with its placeholder key; sandgate signs the same request
// again with the real one. The oracle is the S3 documentation's GET example (Authorization
// Header, "GET Object"): re-signed with the example key, the request must carry exactly the
// signature the documentation prints.
constexpr std::string_view kPlaceholderKeyId = "AKIASGPHEXAMPLE00001";
constexpr std::string_view kPlaceholderSecret = "sgph_aws_secret_placeholder_0000000000000";
constexpr std::string_view kEmptyHash =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// The fields of `fields` plus an Authorization signed over `signed_headers` with the
// placeholder key, as an SDK in the sandbox would send them.
std::vector<std::pair<std::string, std::string>> signed_by_client(
    std::vector<std::pair<std::string, std::string>> fields, std::string_view method,
    std::string_view target, const std::vector<std::string>& signed_headers,
    std::string_view payload_hash, const Scope& scope) {
  std::vector<Field> view;
  std::string amz_date;
  for (const auto& [name, value] : fields) {
    view.push_back({name, value});
    if (name == "x-amz-date") amz_date = value;
  }
  const auto canonical = canonical_request({method, target, view}, signed_headers, payload_hash,
                                           path_rule_for(scope.service));
  const std::string signature =
      SigningKey(kPlaceholderSecret, scope).sign(string_to_sign(amz_date, scope, *canonical));
  fields.emplace_back("Authorization",
                      format_authorization(kPlaceholderKeyId, scope, signed_headers, signature));
  return fields;
}

ResignResult resign_fields(const std::vector<std::pair<std::string, std::string>>& fields,
                           std::string_view method, std::string_view target,
                           std::string_view payload_hash, const Credentials& real) {
  std::vector<Field> view;
  for (const auto& [name, value] : fields) view.push_back({name, value});
  return resign({method, target, view}, payload_hash, kPlaceholderKeyId, real);
}

const Scope kS3Scope{"20130524", "us-east-1", "s3"};
const std::vector<std::pair<std::string, std::string>> kS3Get = {
    {"host", "examplebucket.s3.amazonaws.com"},
    {"range", "bytes=0-9"},
    {"x-amz-content-sha256", std::string(kEmptyHash)},
    {"x-amz-date", "20130524T000000Z"}};
const std::vector<std::string> kS3Signed = {"host", "range", "x-amz-content-sha256", "x-amz-date"};
const Credentials kExampleKey{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                              ""};

TEST(SigV4Resign, GivesTheSignatureTheS3DocumentationPrints) {
  const auto sent = signed_by_client(kS3Get, "GET", "/test.txt", kS3Signed, kEmptyHash, kS3Scope);
  const ResignResult r = resign_fields(sent, "GET", "/test.txt", kEmptyHash, kExampleKey);
  ASSERT_TRUE(r.resigned) << refusal_name(r.refusal);
  EXPECT_EQ(r.resigned->authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(r.resigned->security_token, "");
  EXPECT_EQ(r.resigned->amz_date, "20130524T000000Z");
  EXPECT_EQ(r.resigned->scope, kS3Scope);
}

// curl signs every field it is given, Expect and Transfer-Encoding among them; sandgate
// answers the one and re-frames the body of the other, so neither leaves as it came: the
// request is signed again without them, and the signature is the documentation's.
TEST(SigV4Resign, FieldsAProxyDoesNotPassOnAreNotSignedAgain) {
  auto with = kS3Get;
  with.emplace_back("expect", "100-continue");
  with.emplace_back("transfer-encoding", "chunked");
  const std::vector<std::string> client_signed = {
      "expect", "host", "range", "transfer-encoding", "x-amz-content-sha256", "x-amz-date"};
  auto sent = signed_by_client(with, "GET", "/test.txt", client_signed, kEmptyHash, kS3Scope);
  // As the proxy sends it: neither field.
  std::erase_if(
      sent, [](const auto& f) { return f.first == "expect" || f.first == "transfer-encoding"; });
  const ResignResult r = resign_fields(sent, "GET", "/test.txt", kEmptyHash, kExampleKey);
  ASSERT_TRUE(r.resigned) << refusal_name(r.refusal);
  EXPECT_EQ(r.resigned->authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

// A session token: the client's placeholder token is replaced by the real one, which is
// signed; a client that had none gets it added to what is signed; real credentials without one
// drop the client's.
TEST(SigV4Resign, TheSessionTokenIsTheRealOneOrNone) {
  const Credentials with_token{"ASIAREALKEY000000001", "real/secret", "real-session-token"};
  const auto expect_signed_over =
      [](const ResignResult& r, std::vector<std::pair<std::string, std::string>> fields,
         std::vector<std::string> signed_headers, const Credentials& real) {
        ASSERT_TRUE(r.resigned) << refusal_name(r.refusal);
        std::vector<Field> view;
        for (const auto& [name, value] : fields) view.push_back({name, value});
        const auto canonical =
            canonical_request({"GET", "/test.txt", view}, signed_headers, kEmptyHash, PathRule::s3);
        ASSERT_TRUE(canonical);
        const std::string expected =
            SigningKey(real.secret_access_key, kS3Scope)
                .sign(string_to_sign("20130524T000000Z", kS3Scope, *canonical));
        EXPECT_EQ(r.resigned->authorization,
                  format_authorization(real.access_key_id, kS3Scope, signed_headers, expected));
        EXPECT_EQ(r.resigned->security_token, real.session_token);
      };
  auto with_placeholder_token = kS3Get;
  with_placeholder_token.emplace_back("x-amz-security-token", "sgph_token_placeholder");
  std::vector<std::string> signed_with_token = kS3Signed;
  signed_with_token.push_back("x-amz-security-token");
  const auto sent = signed_by_client(with_placeholder_token, "GET", "/test.txt", signed_with_token,
                                     kEmptyHash, kS3Scope);
  auto real_fields = kS3Get;
  real_fields.emplace_back("x-amz-security-token", "real-session-token");
  expect_signed_over(resign_fields(sent, "GET", "/test.txt", kEmptyHash, with_token), real_fields,
                     signed_with_token, with_token);
  expect_signed_over(resign_fields(sent, "GET", "/test.txt", kEmptyHash, kExampleKey), kS3Get,
                     kS3Signed, kExampleKey);
  const auto without =
      signed_by_client(kS3Get, "GET", "/test.txt", kS3Signed, kEmptyHash, kS3Scope);
  expect_signed_over(resign_fields(without, "GET", "/test.txt", kEmptyHash, with_token),
                     real_fields, signed_with_token, with_token);
}

TEST(SigV4Resign, RefusesWhatItMayNotOrCannotSignAgain) {
  const auto sent = signed_by_client(kS3Get, "GET", "/test.txt", kS3Signed, kEmptyHash, kS3Scope);
  const auto refusal = [](const ResignResult& r) {
    return r.resigned ? std::string("resigned") : std::string(refusal_name(r.refusal));
  };
  // Control: the request itself is signed again.
  EXPECT_EQ(refusal(resign_fields(sent, "GET", "/test.txt", kEmptyHash, kExampleKey)), "resigned");
  EXPECT_EQ(refusal(resign_fields(kS3Get, "GET", "/test.txt", kEmptyHash, kExampleKey)),
            "not_signed");
  auto basic = kS3Get;
  basic.emplace_back("Authorization", "Basic dXNlcjpwYXNz");
  EXPECT_EQ(refusal(resign_fields(basic, "GET", "/test.txt", kEmptyHash, kExampleKey)),
            "not_signed");
  // Signed with a key that is not the sandbox's placeholder (a real key found elsewhere).
  auto foreign = sent;
  const std::string auth = foreign.back().second;
  foreign.back().second.replace(auth.find(kPlaceholderKeyId), kPlaceholderKeyId.size(),
                                "AKIAOTHERKEY00000001");
  EXPECT_EQ(refusal(resign_fields(foreign, "GET", "/test.txt", kEmptyHash, kExampleKey)),
            "foreign_key");
  auto garbled = sent;
  garbled.back().second += ", Extra=1";
  EXPECT_EQ(refusal(resign_fields(garbled, "GET", "/test.txt", kEmptyHash, kExampleKey)),
            "malformed");
  auto other_day = sent;
  other_day[3].second = "20130525T000000Z";
  EXPECT_EQ(refusal(resign_fields(other_day, "GET", "/test.txt", kEmptyHash, kExampleKey)),
            "malformed");
  // A presigned URL made with the placeholder keys (its credential in any case of the name,
  // encoded or not) cannot be signed again; one made with other keys, or with only a
  // signature, is not sandgate's: it goes as it is.
  const std::string ours = "X-Amz-Credential=" + std::string(kPlaceholderKeyId) + "/20130524";
  EXPECT_EQ(
      refusal(resign_fields(
          sent, "GET", "/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&" + ours + "&X-Amz-Signature=00",
          kEmptyHash, kExampleKey)),
      "presigned");
  EXPECT_EQ(
      refusal(resign_fields(
          sent, "GET", "/test.txt?x-amz-credential=" + std::string(kPlaceholderKeyId) + "%2F2013",
          kEmptyHash, kExampleKey)),
      "presigned");
  EXPECT_EQ(refusal(resign_fields(sent, "GET",
                                  "/test.txt?X-Amz-Credential=AKIAOTHERKEY00000001%2F2013&"
                                  "X-Amz-Signature=00",
                                  kEmptyHash, kExampleKey)),
            "not_signed");
  EXPECT_EQ(
      refusal(resign_fields(sent, "GET", "/test.txt?X-Amz-Signature=00", kEmptyHash, kExampleKey)),
      "not_signed");
  EXPECT_EQ(refusal(resign_fields(sent, "GET", "/test.txt",
                                  "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", kExampleKey)),
            "unsupported_payload");
  auto without_range = sent;
  without_range.erase(without_range.begin() + 1);
  EXPECT_EQ(refusal(resign_fields(without_range, "GET", "/test.txt", kEmptyHash, kExampleKey)),
            "missing_field");
}

}  // namespace
}  // namespace sandgate::secrets::sigv4
