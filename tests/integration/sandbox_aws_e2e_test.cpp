// AWS keys end to end (issue 38): the AWS CLI, boto3 and curl --aws-sigv4 in a sandbox made by
// the real sandgate-launch, and through the explicit proxy, sign their requests with the
// sandbox's placeholder keys; sandgate signs each again with the real ones. The endpoints are
// an AWS stand-in (testdata/aws/aws_standin.py) on the test internet that, as AWS does,
// refuses every request whose signature does not verify with the secret of the key it names;
// botocore computes the signature it expects. STS, Secrets Manager and S3 (single and
// multipart uploads, ranged downloads); temporary keys with their session token; the
// refusals (keys sandgate never handed out, a presigned URL) with their controls; an echo of
// the real key id and session token redacted. The keys of the instance's own role, from an
// IMDSv2 stand-in (support/fake_imds) on loopback, used as they are and to assume a role.
//
// Runs in sandbox_credentials_e2e_test's binary, in its private network namespace (its main).
#include <sys/stat.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "e2e_support.hpp"
#include "gtest/gtest.h"
#include "secrets/placeholder.hpp"
#include "support/fake_imds.hpp"
#include "support/json_helpers.hpp"
#include "support/private_netns.hpp"
#include "support/sandgate_process.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"

namespace sandgate::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kAwsAddress = "203.0.113.21";
constexpr const char* kBucket = "sandgate-e2e";
constexpr const char* kKeyId = "AKIASANDGATEE2EREAL1";
constexpr const char* kSecret = "wJalrXUtnFEMI/K7MDENG+sandgateE2eRealKey1";
constexpr const char* kTempKeyId = "ASIASANDGATEE2ETEMP1";
constexpr const char* kTempSecret = "tempSecret/sandgateE2eTemporaryKey00001";
constexpr const char* kSessionToken = "IQoJb3JpZ2luX2VjEsandgateE2eSessionToken//Long+Value=";
// The temporary keys STS hands out for the assumed role and the web identity (the stand-in
// knows them, and their session tokens).
constexpr const char* kAssumedKeyId = "ASIASANDGATEASSUMED";
constexpr const char* kAssumedSecret = "assumedRoleSecret/sandgateE2e000000001";
constexpr const char* kAssumedToken = "FwoGZXIvYXdzEAssumedRoleSessionToken+sandgate==";
constexpr const char* kWebKeyId = "ASIASANDGATEWEBIDENT";
constexpr const char* kWebSecret = "webIdentitySecret/sandgateE2e0000000001";
constexpr const char* kWebToken = "FwoGZXIvYXdzEWebIdentitySessionToken+sandgate==";
// The instance's role's keys, as IMDS gives them.
constexpr const char* kInstanceKeyId = "ASIASANDGATEINSTANCE";
constexpr const char* kInstanceSecret = "instanceRoleSecret/sandgateE2e00000001";
constexpr const char* kInstanceToken = "FwoGZXIvYXdzEInstanceRoleSessionToken+sandgate==";
constexpr const char* kWebIdentityToken =
    "eyJhbGciOiJSUzI1NiJ9.e2e-projected-service-account-token.sig";
constexpr const char* kExplicitId = "explicit-aws";
constexpr const char* kExplicitToken = "tok-explicit-aws-8Hq";
const std::string kPlaceholderKey(32, '\x5a');

const std::vector<std::string> kAwsNames = {
    "sts.amazonaws.com",
    "sts.us-east-1.amazonaws.com",
    "secretsmanager.us-east-1.amazonaws.com",
    "s3.amazonaws.com",
    "s3.us-east-1.amazonaws.com",
    std::string(kBucket) + ".s3.amazonaws.com",
    std::string(kBucket) + ".s3.us-east-1.amazonaws.com",
    "api.internal.test",  // not AWS: an API whose token is kept in Secrets Manager
};

// The test internet with the AWS stand-in, and the daemon: set up once for the suite.
struct AwsWorld {
  TempDir dir;
  std::string internet = "sga" + std::to_string(::getpid()) + "i";
  std::string log = dir.file("aws-requests.log");
  std::unique_ptr<Background> standin;
  // The instance metadata service, on loopback in the suite's namespace, where the daemon runs.
  FakeImds imds{"sandgate-host", [] { return std::chrono::system_clock::now(); },
                [](int) {
                  const std::time_t expires = std::chrono::system_clock::to_time_t(
                      std::chrono::system_clock::now() + std::chrono::hours(1));
                  std::tm utc{};
                  gmtime_r(&expires, &utc);
                  char expiration[32];
                  std::strftime(expiration, sizeof expiration, "%Y-%m-%dT%H:%M:%SZ", &utc);
                  return std::string(R"({"Code":"Success","Type":"AWS-HMAC","AccessKeyId":")") +
                         kInstanceKeyId + R"(","SecretAccessKey":")" + kInstanceSecret +
                         R"(","Token":")" + kInstanceToken + R"(","Expiration":")" + expiration +
                         R"("})";
                }};
  std::unique_ptr<SandgateProcess> daemon;

  AwsWorld() {
    try {
      must({sandgate_binary(), "ca", "init", dir.file("sandgate-ca")});
      const TestCertificate cert = make_self_signed_certificate(kAwsNames, {});
      dir.write("aws.pem", cert.cert_pem);
      dir.write("aws.key", cert.key_pem);
      const auto key = [](const std::string& id, const std::string& secret,
                          const std::string& token) {
        return "\"" + id + "\": {\"secret\": \"" + secret + "\", \"token\": \"" + token + "\"}";
      };
      dir.write("keys.json", "{" + key(kKeyId, kSecret, "") + ", " +
                                 key(kTempKeyId, kTempSecret, kSessionToken) + ", " +
                                 key(kAssumedKeyId, kAssumedSecret, kAssumedToken) + ", " +
                                 key(kWebKeyId, kWebSecret, kWebToken) + ", " +
                                 key(kInstanceKeyId, kInstanceSecret, kInstanceToken) + "}");
      for (const auto& [name, value] :
           std::vector<std::pair<std::string, std::string>>{{"placeholder.key", kPlaceholderKey},
                                                            {"key-id", kKeyId},
                                                            {"secret", kSecret},
                                                            {"temp-key-id", kTempKeyId},
                                                            {"temp-secret", kTempSecret},
                                                            {"session-token", kSessionToken},
                                                            {"oidc-token", kWebIdentityToken}}) {
        dir.write(name, value + (name == "placeholder.key" ? "" : "\n"));
        ::chmod(dir.file(name).c_str(), 0600);
      }
      make_internet();
      start_daemon();
    } catch (...) {
      clean_up();
      throw;
    }
  }
  ~AwsWorld() { clean_up(); }

  void clean_up() {
    if (daemon) {
      run_command({launch_binary(), "--config", daemon->config_path(), "gc"}, 60s);
      daemon.reset();
    }
    standin.reset();
    run_command({"ip", "netns", "del", internet});
  }

  void make_internet() {
    make_test_internet(internet, {kAwsAddress});
    must({"ip", "route", "add", "203.0.113.0/24", "via", "192.0.2.2"});
    // Debian's python3 (botocore is Debian's too), not whatever python3 PATH finds first.
    standin = std::make_unique<Background>(
        std::vector<std::string>{"ip", "netns", "exec", internet, "/usr/bin/python3",
                                 source_dir() + "/tests/integration/testdata/aws/aws_standin.py",
                                 log, dir.file("aws.pem"), dir.file("aws.key"),
                                 std::string(kAwsAddress) + ":443", dir.file("keys.json")},
        dir.file("standin.out"));
    for (int i = 0; i < 100; ++i) {
      if (read_all(dir.file("standin.out")).find("ready") != std::string::npos) return;
      std::this_thread::sleep_for(100ms);
    }
    throw std::runtime_error("the AWS stand-in did not start: " +
                             read_all(dir.file("standin.out")));
  }

  void start_daemon() {
    fs::create_directories(dir.file("sandboxes.d"));
    SandgateOptions o;
    o.workers = 2;
    o.audit_to_file = true;
    o.sandboxes_dir = dir.file("sandboxes.d");
    o.admin_listen = "127.0.0.1:9090";
    o.listeners = "transparent = [\"0.0.0.0:15001\"]\ndns = [\"0.0.0.0:15053\"]";
    std::string hosts;
    for (const std::string& name : kAwsNames) {
      hosts += "\"" + name + "\" = [\"" + kAwsAddress + "\"]\n";
    }
    const auto profile = [](const std::string& name, const std::string& credential) {
      return "[profiles." + name +
             "]\nallow = [\"*.amazonaws.com\", \"api.internal.test\"]\n"
             "allow_cidrs = [\"203.0.113.0/24\"]\n\n[[profiles." +
             name + ".inject]]\nhosts = [\"*.amazonaws.com\"]\ncredential = \"" + credential +
             "\"\nas = \"aws_sigv4\"\n\n[[profiles." + name +
             ".inject]]\nhosts = [\"api.internal.test\"]\npath_prefixes = [\"/broken/\"]\n"
             "credential = \"missing\"\nas = \"bearer\"\n\n[[profiles." +
             name +
             ".inject]]\nhosts = [\"api.internal.test\"]\ncredential = \"api-token\"\n"
             "as = \"bearer\"\n\n";
    };
    // A token kept in Secrets Manager (one field of a JSON secret), read with the aws keys;
    // and one that is not there.
    const std::string aws_env =
        "env = [\"AWS_ACCESS_KEY_ID\", \"AWS_SECRET_ACCESS_KEY\", \"AWS_SESSION_TOKEN\"]\n\n";
    const auto from_secrets_manager = [](const std::string& name, const std::string& id) {
      return "[credentials." + name +
             "]\nprovider = \"aws_secrets_manager\"\naws_credential = \"aws\"\nsecret_id = \"" +
             id + "\"\nregion = \"us-east-1\"\njson_field = \"token\"\n";
    };
    o.tables =
        "[limits]\npeek_timeout_ms = 300\nidle_timeout_ms = 20000\n\n[dns.hosts]\n" + hosts +
        "\n[interception]\nca_cert = \"" + dir.file("sandgate-ca/ca.pem") + "\"\nca_key = \"" +
        dir.file("sandgate-ca/ca.key") + "\"\nupstream_ca_file = \"" + dir.file("aws.pem") +
        "\"\n\n[launcher]\nstate_dir = \"" + dir.file("state") +
        "\"\npool = \"10.202.0.0/24\"\n\n[credentials]\nplaceholder_key_file = \"" +
        dir.file("placeholder.key") + "\"\n\n[credentials.aws]\nprovider = \"aws_static\"\n" +
        "access_key_id_file = \"" + dir.file("key-id") + "\"\nsecret_access_key_file = \"" +
        dir.file("secret") +
        "\"\nenv = [\"AWS_ACCESS_KEY_ID\", \"AWS_SECRET_ACCESS_KEY\"]\n\n"
        "[credentials.aws-temp]\nprovider = \"aws_static\"\naccess_key_id_file = \"" +
        dir.file("temp-key-id") + "\"\nsecret_access_key_file = \"" + dir.file("temp-secret") +
        "\"\nsession_token_file = \"" + dir.file("session-token") +
        "\"\nenv = [\"AWS_ACCESS_KEY_ID\", \"AWS_SECRET_ACCESS_KEY\", "
        "\"AWS_SESSION_TOKEN\"]\n\n" +
        "[credentials.aws-role]\nprovider = \"aws_assume_role\"\naws_credential = \"aws\"\n"
        "role_arn = \"arn:aws:iam::123456789012:role/agents\"\n" +
        aws_env +
        "[credentials.aws-irsa]\nprovider = \"aws_web_identity\"\n"
        "web_identity_token_file = \"" +
        dir.file("oidc-token") +
        "\"\nrole_arn = \"arn:aws:iam::123456789012:role/agents\"\n"
        "role_session_name = \"irsa-e2e\"\n" +
        aws_env + "[credentials.aws-instance]\nprovider = \"aws_instance\"\nendpoint_url = \"" +
        imds.url() + "\"\n" + aws_env +
        "[credentials.aws-instance-role]\nprovider = \"aws_assume_role\"\n"
        "aws_credential = \"aws-instance\"\n"
        "role_arn = \"arn:aws:iam::123456789012:role/agents\"\n" +
        aws_env + from_secrets_manager("api-token", "api-token") + "env = [\"API_TOKEN\"]\n\n" +
        from_secrets_manager("missing", "nope") + "\n" + profile("agent", "aws") +
        profile("temp", "aws-temp") + profile("assumed", "aws-role") + profile("irsa", "aws-irsa") +
        profile("instance", "aws-instance") + profile("instance-role", "aws-instance-role") +
        "[sandboxes." + kExplicitId + "]\nprofile = \"agent\"\ntoken = \"" + kExplicitToken +
        "\"\n";
    daemon = std::make_unique<SandgateProcess>(o);
  }

  // The stand-in's line for each request it received, in order.
  std::vector<boost::json::object> requests() const {
    std::vector<boost::json::object> out;
    std::istringstream in(read_all(log));
    for (std::string line; std::getline(in, line);) {
      out.push_back(boost::json::parse(line).as_object());
    }
    return out;
  }
};

AwsWorld* aws = nullptr;

class AwsE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::getenv("SANDGATE_CREDS_E2E_INSIDE") == nullptr) return;
    aws = new AwsWorld();
  }
  static void TearDownTestSuite() {
    delete aws;
    aws = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(aws, nullptr) << "run through main(): the suite needs its private namespace";
    audit_from_ = aws->daemon->audit_lines().size();
    requests_from_ = aws->requests().size();
  }

  static std::string id(const std::string& name) {
    return "aws-" + std::to_string(::getpid()) + "-" + name;
  }
  static std::string placeholder(const std::string& sandbox, const std::string& credential) {
    return secrets::PlaceholderKey::from_bytes(kPlaceholderKey)
        .placeholder_for(sandbox, credential);
  }

  // `sandgate-launch run` with a shell script, from an environment holding the operator's own
  // AWS keys (which must not get in). HOME is a fresh directory (the CLI's cache).
  static CommandResult run_in(const std::string& sandbox, const std::string& profile,
                              const std::string& script) {
    const std::string home = aws->dir.file("home-" + sandbox);
    fs::create_directories(home);
    return run_command(
        {"env", "AWS_ACCESS_KEY_ID=AKIAOPERATORSOWNKEY1",
         "AWS_SECRET_ACCESS_KEY=operators-own-secret", launch_binary(), "--config",
         aws->daemon->config_path(), "run", "--sandbox", id(sandbox), "--profile", profile, "--",
         "sh", "-c", "export HOME=" + home + " AWS_DEFAULT_REGION=us-east-1 AWS_PAGER=; " + script},
        180s);
  }

  // The requests the stand-in received since the test began.
  std::vector<boost::json::object> requests() const {
    const auto all = aws->requests();
    return {all.begin() + static_cast<std::ptrdiff_t>(requests_from_), all.end()};
  }
  std::vector<boost::json::object> audit(const std::string& code) const {
    return audit_lines_since(*aws->daemon, audit_from_, code);
  }

  // No real key (id, secret, session token) in `text`.
  static void expect_no_key_in(const std::string& what, const std::string& text) {
    for (const std::string secret :
         {kKeyId, kSecret, kTempKeyId, kTempSecret, kSessionToken, kInstanceKeyId, kInstanceSecret,
          kInstanceToken, "AQAEAImdsSessionToken"}) {
      EXPECT_EQ(text.find(secret), std::string::npos) << what << " holds " << secret;
    }
  }
  static void expect_no_key_anywhere() {
    expect_no_key_in("the audit log", aws->daemon->audit_text());
    expect_no_key_in("the daemon's stderr", aws->daemon->stderr_text());
    expect_no_key_in("the metrics", aws->daemon->metrics_text());
  }

  std::size_t audit_from_ = 0;
  std::size_t requests_from_ = 0;
};

// The headline: the AWS CLI and boto3, with nothing but placeholder keys in the sandbox, call
// STS, Secrets Manager and S3 (a 9 MB upload, which the CLI sends in parts, and its ranged
// download back): every request reaches the stand-in signed with the real key, and verifies.
TEST_F(AwsE2e, TheAwsCliAndBoto3WorkWithOnlyPlaceholderKeysInTheSandbox) {
  const std::string work = aws->dir.file("work-cli");
  fs::create_directories(work);
  const auto r = run_in(
      "cli", "agent",
      "env | grep -E '^AWS_(ACCESS|SECRET|SESSION)' | sort; "
      "/usr/bin/aws sts get-caller-identity --query Arn --output text; "
      "/usr/bin/aws secretsmanager get-secret-value --secret-id db --query SecretString "
      "--output text; "
      "head -c 9000000 /dev/urandom > " +
          work + "/big && /usr/bin/aws s3 cp --no-progress " + work + "/big s3://" + kBucket +
          "/big >/dev/null && /usr/bin/aws s3 cp --no-progress s3://" + kBucket + "/big " + work +
          "/back >/dev/null && cmp " + work + "/big " + work +
          "/back && echo same; "
          "/usr/bin/python3 -c \"import boto3; c = boto3.client('s3'); "
          "c.put_object(Bucket='" +
          kBucket + "', Key='hello.txt', Body=b'hi from boto3'); print(c.get_object(Bucket='" +
          kBucket + "', Key='hello.txt')['Body'].read().decode())\"");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string mine = placeholder(id("cli"), "aws");
  EXPECT_EQ(r.out, "AWS_ACCESS_KEY_ID=" + mine + "\nAWS_SECRET_ACCESS_KEY=" + mine +
                       "\narn:aws:iam::123456789012:user/sandgate-test\nthe-stored-secret\nsame\n"
                       "hi from boto3\n")
      << r.err;

  const auto seen = requests();
  // STS, Secrets Manager, the upload's start, parts and end, the download's head and ranges,
  // boto3's put and get.
  ASSERT_GE(seen.size(), 9u);
  std::size_t parts = 0;
  for (const auto& request : seen) {
    EXPECT_EQ(json_string(request, "verdict"), "ok") << boost::json::serialize(request);
    EXPECT_EQ(json_string(request, "key_id"), kKeyId);
    if (json_string(request, "path").value_or("").find("partNumber=") != std::string::npos) ++parts;
  }
  EXPECT_GE(parts, 2u) << "the CLI uploads 9 MB in parts of 8 MiB";
  const auto lines = audit("http_request");
  ASSERT_EQ(lines.size(), seen.size());
  for (const auto& line : lines) {
    EXPECT_EQ(json_string(line, "credential.name"), "aws");
    EXPECT_EQ(json_string(line, "labels.sandbox_id"), id("cli"));
    EXPECT_FALSE(json_string(line, "credential.fingerprint").value_or("").empty());
  }
  expect_no_key_in("the sandbox's output", r.out + r.err);
  expect_no_key_anywhere();
}

// Temporary keys: the sandbox holds a placeholder session token too; the request leaves with
// the real one (X-Amz-Security-Token, which the stand-in checks and the signature covers).
TEST_F(AwsE2e, TemporaryKeysLeaveWithTheirRealSessionToken) {
  const auto r = run_in("temp", "temp",
                        "echo \"$AWS_SESSION_TOKEN\"; /usr/bin/aws sts get-caller-identity "
                        "--query Account --output text");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, placeholder(id("temp"), "aws-temp") + "\n123456789012\n");
  const auto seen = requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(json_string(seen[0], "verdict"), "ok");
  EXPECT_EQ(json_string(seen[0], "key_id"), kTempKeyId);
  expect_no_key_in("the sandbox's output", r.out + r.err);
  expect_no_key_anywhere();
}

// curl's own SigV4 signer, over HTTP/2 and HTTP/1.1 (sandgate hashes the body, which STS's
// requests do not declare). Refused: a request signed with keys sandgate never handed out
// (403 placeholder_misuse: nothing reaches AWS) and a presigned URL (400
// SIGNATURE_NOT_RESIGNABLE). An echo of the request's Authorization and session token comes
// back with the real key id and token masked.
TEST_F(AwsE2e, OnlyThePlaceholderKeysAreSignedAgainAndEchoesAreRedacted) {
  const std::string sts =
      "-d 'Action=GetCallerIdentity&Version=2011-06-15' https://sts.amazonaws.com/";
  const auto r = run_in("curl", "temp",
                        "for v in --http2 --http1.1; do "
                        "curl -sS -m 10 $v --aws-sigv4 aws:amz:us-east-1:sts "
                        "--user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
                        "-H \"X-Amz-Security-Token: $AWS_SESSION_TOKEN\" " +
                            sts +
                            "; echo; done; "
                            "curl -sS -m 10 -w '%{http_code}\\n' --aws-sigv4 aws:amz:us-east-1:sts "
                            "--user AKIAKEYSANDGATENEVER1:a-secret-from-elsewhere " +
                            sts +
                            "; "
                            "curl -sS -m 10 --aws-sigv4 aws:amz:us-east-1:s3 "
                            "--user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
                            "-H \"X-Amz-Security-Token: $AWS_SESSION_TOKEN\" https://" +
                            kBucket +
                            ".s3.amazonaws.com/echo-auth; echo; "
                            "url=$(/usr/bin/aws s3 presign s3://" +
                            kBucket + "/hello.txt); curl -sS -m 10 -w '%{http_code}\\n' \"$url\"");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string arn = "<Arn>arn:aws:iam::123456789012:user/sandgate-test</Arn>";
  std::istringstream out(r.out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 7u) << r.out << r.err;
  EXPECT_NE(lines[0].find(arn), std::string::npos) << lines[0];  // HTTP/2
  EXPECT_NE(lines[1].find(arn), std::string::npos) << lines[1];  // HTTP/1.1
  // Keys from elsewhere: refused by sandgate, in its own words.
  EXPECT_NE(lines[2].find("\"code\":\"SANDBOX_NETWORK_DENIED\""), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("placeholder_misuse"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3], "403");
  // The echo: the real key id and token were sent, and come back masked.
  EXPECT_NE(
      lines[4].find("Credential=" + std::string(std::string_view(kTempKeyId).size(), '*') + "/"),
      std::string::npos)
      << lines[4];
  EXPECT_NE(lines[4].find("\"token\": \"" +
                          std::string(std::string_view(kSessionToken).size(), '*') + "\""),
            std::string::npos)
      << lines[4];
  // The presigned URL (the placeholder key in its query): refused, with its own code.
  EXPECT_NE(lines[5].find("\"code\":\"SIGNATURE_NOT_RESIGNABLE\""), std::string::npos) << lines[5];
  EXPECT_EQ(lines[6], "400");

  // The stand-in saw the two STS calls and the echo, each signed with the real key; never the
  // foreign key nor the presigned URL.
  const auto seen = requests();
  ASSERT_EQ(seen.size(), 3u);
  for (const auto& request : seen) {
    EXPECT_EQ(json_string(request, "verdict"), "ok") << boost::json::serialize(request);
    EXPECT_EQ(json_string(request, "key_id"), kTempKeyId);
  }
  const auto denied = audit("SANDBOX_NETWORK_DENIED");
  ASSERT_EQ(denied.size(), 1u);
  EXPECT_EQ(json_string(denied[0], "event.reason"), "placeholder_misuse");
  EXPECT_EQ(json_string(denied[0], "rule.name"), "credentials.aws-temp");
  const auto presigned = audit("SIGNATURE_NOT_RESIGNABLE");
  ASSERT_EQ(presigned.size(), 1u);
  EXPECT_EQ(json_string(presigned[0], "credential.name"), "aws-temp");
  expect_no_key_in("the sandbox's output", r.out + r.err);
  expect_no_key_anywhere();
}

// The body a signature covers, read whole before the request may leave, however the client
// frames it: chunked, after Expect: 100-continue, two requests on one kept-alive connection
// (the second read after the first's body was put back), over HTTP/1.1 and HTTP/2. Past 8 MiB:
// 413 REQUEST_BODY_TOO_LARGE, nothing forwarded; control: 8 MiB exactly goes.
TEST_F(AwsE2e, BodiesAreHashedHoweverTheyAreFramedAndBoundedAt8MiB) {
  const std::string work = aws->dir.file("work-bodies");
  fs::create_directories(work);
  // One request's options: curl's own SigV4 signer with the placeholder keys, the status only.
  const std::string sign =
      "--aws-sigv4 aws:amz:us-east-1:sts --user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
      "-o /dev/null -w '%{http_code}\\n' ";
  const std::string form = "-d 'Action=GetCallerIdentity&Version=2011-06-15' ";
  const std::string url = "https://sts.amazonaws.com/";
  const std::string curl = "curl -sS -m 20 ";
  const auto r = run_in(
      "bodies", "agent",
      "printf 'Action=GetCallerIdentity&Version=2011-06-15&Pad=' > " + work + "/exact; " +
          "head -c $((8388608 - $(wc -c < " + work + "/exact))) /dev/zero | tr '\\0' a >> " + work +
          "/exact; cp " + work + "/exact " + work + "/over; printf a >> " + work + "/over; " +
          curl + sign + "--http1.1 -H 'Transfer-Encoding: chunked' " + form + url + "; " + curl +
          sign + "--http1.1 -H 'Expect: 100-continue' " + form + url + "; " +
          // Two requests on one connection (--next keeps it).
          curl + sign + "--http1.1 " + form + url + " --next " + sign + "--http1.1 " + form + url +
          "; " + curl + sign + "--http2 " + form + url + " --next " + sign + "--http2 " + form +
          url + "; for v in --http1.1 --http2; do " + curl + sign + "$v --data-binary @" + work +
          "/exact " + url + "; " + curl + sign + "$v --data-binary @" + work + "/over " + url +
          "; done");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "200\n200\n200\n200\n200\n200\n200\n413\n200\n413\n") << r.err;
  const auto seen = requests();
  ASSERT_EQ(seen.size(), 8u);
  for (const auto& request : seen) {
    EXPECT_EQ(json_string(request, "verdict"), "ok") << boost::json::serialize(request);
  }
  EXPECT_EQ(audit("REQUEST_BODY_TOO_LARGE").size(), 2u);
  expect_no_key_anywhere();
}

// S3 uploads signed chunk by chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD, the mode the SDKs that
// stream a body sign in; with and without a signed checksum trailer), over HTTP/1.1 and HTTP/2:
// each chunk's signature is signed again as the body passes, and the stand-in verifies every
// one, and the trailer's, with the real secret. A body that breaks the framing (a chunk
// without its signature): 400 SIGNATURE_NOT_RESIGNABLE, and the stand-in never takes it.
TEST_F(AwsE2e, UploadsSignedChunkByChunkAreSignedAgainAsTheyStream) {
  const std::string work = aws->dir.file("work-chunks");
  fs::create_directories(work);
  const std::string url =
      "https://s3.us-east-1.amazonaws.com/" + std::string(kBucket) + "/streamed";
  const std::string upload = "/usr/bin/python3 " + source_dir() +
                             "/tests/integration/testdata/aws/aws_chunked_upload.py " + url +
                             " us-east-1 " + work + "/h " + work + "/b";
  const std::string send = "curl -sS -m 30 -X PUT -H @" + work + "/h --data-binary @" + work +
                           "/b -o /dev/null -w '%{http_code}\\n' " + url;
  const auto r = run_in("chunks", "agent",
                        "for mode in plain trailer broken; do for v in --http1.1 --http2; do " +
                            upload + " $mode && " + send + " $v; done; done");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "200\n200\n200\n200\n400\n400\n") << r.err;
  std::size_t verified = 0;
  for (const auto& request : requests()) {
    if (json_string(request, "verdict") != "ok") continue;
    ++verified;
    EXPECT_TRUE(request.contains("chunked")) << boost::json::serialize(request);
    EXPECT_EQ(request.at("bytes").as_int64(), 200000) << boost::json::serialize(request);
  }
  EXPECT_EQ(verified, 4u);
  const auto refused = audit("SIGNATURE_NOT_RESIGNABLE");
  ASSERT_EQ(refused.size(), 2u);
  for (const auto& line : refused) {
    EXPECT_EQ(json_string(line, "labels.termination"), "malformed") << boost::json::serialize(line);
  }
  expect_no_key_anywhere();
}

// A token kept in AWS Secrets Manager, for an API that is not AWS: sandgate reads it
// (GetSecretValue signed with the aws credential's real keys, the secret's "token" field) and
// injects it; the sandbox holds a placeholder. A secret that is not there: 503
// CREDENTIAL_UNAVAILABLE, the audit line naming AWS's error, nothing forwarded.
TEST_F(AwsE2e, ATokenKeptInSecretsManagerIsInjectedAndAMissingOneSaysWhy) {
  const auto r = run_in("sm", "agent",
                        "echo \"$API_TOKEN\"; curl -sS -m 10 https://api.internal.test/hello; "
                        "curl -sS -m 10 -w '%{http_code}\\n' https://api.internal.test/broken/x");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream out(r.out);
  std::vector<std::string> lines;
  for (std::string line; std::getline(out, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_EQ(lines[0], placeholder(id("sm"), "api-token"));
  EXPECT_EQ(lines[1], "hello from the internal api");
  EXPECT_NE(lines[2].find("\"code\":\"CREDENTIAL_UNAVAILABLE\""), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3], "503");
  const auto seen = requests();
  // GetSecretValue (signed with the real key), the API call, GetSecretValue of "nope".
  ASSERT_EQ(seen.size(), 3u) << read_all(aws->log);
  EXPECT_EQ(json_string(seen[0], "host"), "secretsmanager.us-east-1.amazonaws.com");
  EXPECT_EQ(json_string(seen[0], "verdict"), "ok");
  EXPECT_EQ(json_string(seen[0], "key_id"), kKeyId);
  EXPECT_EQ(json_string(seen[1], "host"), "api.internal.test");
  EXPECT_EQ(json_string(seen[1], "verdict"), "ok");
  EXPECT_EQ(json_string(seen[2], "verdict"), "ok");
  const auto failed = audit("CREDENTIAL_UNAVAILABLE");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(json_string(failed[0], "credential.name"), "missing");
  EXPECT_EQ(json_string(failed[0], "credential.endpoint.error"), "ResourceNotFoundException")
      << boost::json::serialize(failed[0]);
  expect_no_key_in("the sandbox's output", r.out + r.err);
  EXPECT_EQ(r.out.find("tok-from-secrets-manager-e2e"), std::string::npos);
  EXPECT_EQ(aws->daemon->audit_text().find("tok-from-secrets-manager-e2e"), std::string::npos);
  expect_no_key_anywhere();
}

// Keys from STS: a role assumed with the aws keys (AssumeRole, signed with them), one assumed
// with the instance's keys from IMDS (signed with them and their session token), and one
// assumed with a projected service-account token (AssumeRoleWithWebIdentity, as on EKS). The
// CLI in the sandbox signs with placeholders; its requests leave signed with the temporary
// keys and their session token, which the stand-in handed out and verifies. The assumed role
// is a session per sandbox, named after it (STS's RoleSessionName, which CloudTrail records).
TEST_F(AwsE2e, RolesAssumedThroughStsSignTheSandboxsRequests) {
  // Two sandboxes of the assumed role's profile: a role session each, named after it.
  for (const auto& [sandbox, profile, key_id] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"role-assumed", "assumed", kAssumedKeyId},
           {"role-other", "assumed", kAssumedKeyId},
           {"role-instance", "instance-role", kAssumedKeyId},
           {"role-irsa", "irsa", kWebKeyId}}) {
    SCOPED_TRACE(sandbox);
    const std::size_t from = aws->requests().size();
    const auto r = run_in(sandbox, profile,
                          "/usr/bin/aws sts get-caller-identity --query Account --output text");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.out, "123456789012\n");
    const auto all = aws->requests();
    ASSERT_EQ(all.size(), from + 2) << read_all(aws->log);
    // First sandgate's own call to STS, then the sandbox's request with the role's keys.
    if (profile != "irsa") {
      EXPECT_EQ(json_string(all[from], "key_id"), profile == "assumed" ? kKeyId : kInstanceKeyId);
      EXPECT_EQ(json_string(all[from], "verdict"), "ok");
      EXPECT_EQ(json_string(all[from], "session"), "sandgate-" + id(sandbox));
    } else {
      // The credential names its one session (role_session_name): not one per sandbox.
      EXPECT_EQ(json_string(all[from], "verdict"), "web_identity");
      EXPECT_EQ(json_string(all[from], "session"), "irsa-e2e");
    }
    EXPECT_EQ(json_string(all[from + 1], "key_id"), key_id);
    EXPECT_EQ(json_string(all[from + 1], "verdict"), "ok");
    expect_no_key_in("the sandbox's output", r.out + r.err);
  }
  expect_no_key_anywhere();
}

// The instance's own role: its keys from IMDSv2 (a session token first, every GET with it;
// never IMDSv1, which the stand-in refuses as an IMDSv2-only instance does) sign the sandbox's
// requests.
TEST_F(AwsE2e, TheInstancesKeysFromImdsV2SignTheSandboxsRequests) {
  const auto r = run_in("instance", "instance",
                        "/usr/bin/aws sts get-caller-identity --query Account --output text");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "123456789012\n");
  const auto seen = requests();
  ASSERT_EQ(seen.size(), 1u) << read_all(aws->log);
  EXPECT_EQ(json_string(seen[0], "key_id"), kInstanceKeyId);
  EXPECT_EQ(json_string(seen[0], "verdict"), "ok");
  const auto imds = aws->imds.server().requests();
  ASSERT_GE(imds.size(), 3u);
  EXPECT_EQ(imds[0].method, "PUT");
  for (const auto& request : imds) {
    if (request.method == "GET") {
      EXPECT_EQ(request.headers.count("x-aws-ec2-metadata-token"), 1u) << request.target;
    }
  }
  EXPECT_EQ(aws->imds.sessions_given(), 1);
  expect_no_key_in("the sandbox's output", r.out + r.err);
  expect_no_key_anywhere();
}

// The explicit proxy (CONNECT, the sandbox named by Proxy-Authorization): the CLI with the
// explicit sandbox's placeholder keys.
TEST_F(AwsE2e, TheAwsCliThroughTheExplicitProxy) {
  const std::string mine = placeholder(kExplicitId, "aws");
  const std::string home = aws->dir.file("home-explicit");
  fs::create_directories(home);
  const auto r = run_command(
      {"env", "-i", "PATH=/usr/bin:/bin", "HOME=" + home, "AWS_DEFAULT_REGION=us-east-1",
       "AWS_ACCESS_KEY_ID=" + mine, "AWS_SECRET_ACCESS_KEY=" + mine,
       "AWS_CA_BUNDLE=" + aws->dir.file("sandgate-ca/ca.pem"),
       "HTTPS_PROXY=" + aws->daemon->proxy_url(kExplicitId, kExplicitToken), "/usr/bin/aws", "sts",
       "get-caller-identity", "--query", "UserId", "--output", "text"},
      60s);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "AIDASANDGATETESTUSER\n");
  const auto seen = requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(json_string(seen[0], "verdict"), "ok");
  EXPECT_EQ(json_string(seen[0], "key_id"), kKeyId);
  const auto lines = audit("http_request");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(json_string(lines[0], "credential.name"), "aws");
  EXPECT_EQ(json_string(lines[0], "labels.sandbox_id"), kExplicitId);
  expect_no_key_in("the CLI's output", r.out + r.err);
  expect_no_key_anywhere();
}

}  // namespace
}  // namespace sandgate::test
