// The injected credential never comes back to the sandbox (THREATS 22, 30), through the real
// daemon and real curl over HTTP/1.1, HTTP/1.0 and HTTP/2: an origin of the bound host that
// compresses its echo of the request's Authorization whatever Accept-Encoding says (gzip,
// deflate zlib-wrapped and raw, br, a list), that escapes it (JSON, percent, HTML, URL-safe
// base64), that reflects a token it stored on a request that got no credential. Controls: an
// ordinary body and a compressed one without the token arrive intact, decoded.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "secrets/encoding.hpp"
#include "support/compress.hpp"
#include "support/eventually.hpp"
#include "support/http_origin.hpp"
#include "support/json_helpers.hpp"
#include "support/sandgate_assertions.hpp"
#include "support/sandgate_process.hpp"
#include "support/subprocess.hpp"
#include "support/temp_dir.hpp"
#include "support/tls_origin.hpp"
#include "unit/h2/h2_fixture.hpp"

namespace sandgate::test {
namespace {

const std::string kId = "sb1";
const std::string kSandboxToken = "tok-sb1-redaction-4Kp";
// Holds the characters escapes change: "+", "/", "=", "_", ".", "-".
const std::string kToken = "sk+live/Abc=123_xyz.QRS-9tok";
const std::string kBasicUser = "x-access-token";
const std::string kControl = "an ordinary body, nothing secret in it\n";

std::string percent(std::string_view s, bool upper) {
  std::string out;
  for (const char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += c;
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, upper ? "%%%02X" : "%%%02x", c);
      out += buf;
    }
  }
  return out;
}

// As PHP's json_encode writes it ("/" as "\/"), and "+" as a unicode escape.
std::string json_escaped(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '/') {
      out += "\\/";
    } else if (c == '+') {
      out += "\\u002b";
    } else {
      out += c;
    }
  }
  return out;
}

std::string html_escaped(std::string_view s, bool hex) {
  std::string out;
  for (const char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += c;
    } else {
      char buf[12];
      std::snprintf(buf, sizeof buf, hex ? "&#x%X;" : "&#%d;", c);
      out += buf;
    }
  }
  return out;
}

// The Authorization value, URL-safe base64 without padding where it is Basic.
std::string url_safe(std::string auth) {
  for (char& c : auth) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  while (!auth.empty() && auth.back() == '=') auth.pop_back();
  return auth;
}

// The origin of api.test and npm.test: /in/... get the credential (the inject rules' path
// prefix), /out/... do not. /X/echo/CODING echoes the Authorization it received in a JSON
// body with Content-Encoding CODING, whatever Accept-Encoding said; /X/escaped/FORM echoes it
// escaped; /X/reflect returns the token as a stored one would be; /X/control/CODING a body
// without it; /X/zstd a coding sandgate cannot decode; /X/corrupt gzip that breaks mid-body.
OriginReply answer(const RecordedRequest& r) {
  const std::string auth = r.header("Authorization");
  const std::string echo = R"({"authorization":")" + auth + R"("})" + "\n";
  const std::string_view target = r.target;
  const auto route = target.substr(std::min(target.find('/', 1), target.size()));
  using Headers = std::vector<std::pair<std::string, std::string>>;
  if (route == "/echo/plain") return OriginReply::with_length(200, echo, {{"X-Echo", auth}});
  if (route == "/echo/gzip") {
    return OriginReply::with_length(200, gzip_encode(echo),
                                    {{"Content-Encoding", "gzip"}, {"ETag", "\"v1\""}});
  }
  if (route == "/echo/x-gzip-chunked") {
    return OriginReply::chunked(200, gzip_encode(echo), 7, {}, {{"Content-Encoding", "x-gzip"}});
  }
  if (route == "/echo/deflate") {
    return OriginReply::with_length(200, zlib_deflate_encode(echo),
                                    {{"Content-Encoding", "deflate"}});
  }
  if (route == "/echo/raw-deflate") {
    return OriginReply::with_length(200, raw_deflate_encode(echo),
                                    {{"Content-Encoding", "deflate"}});
  }
  if (route == "/echo/br") {
    return OriginReply::chunked(200, brotli_encode(echo), 3, {}, {{"Content-Encoding", "br"}});
  }
  if (route == "/echo/gzip-br") {
    return OriginReply::with_length(200, brotli_encode(gzip_encode(echo)),
                                    {{"Content-Encoding", "gzip, br"}});
  }
  if (route == "/escaped/json") return OriginReply::with_length(200, json_escaped(echo));
  if (route == "/escaped/percent") return OriginReply::with_length(200, percent(auth, true));
  if (route == "/escaped/percent-lower") {
    return OriginReply::with_length(200, percent(auth, false));
  }
  if (route == "/escaped/html") return OriginReply::with_length(200, html_escaped(auth, false));
  if (route == "/escaped/html-hex") return OriginReply::with_length(200, html_escaped(auth, true));
  if (route == "/escaped/base64url") return OriginReply::with_length(200, url_safe(auth));
  if (route == "/reflect") {
    return OriginReply::with_length(200, "stored: " + kToken + "\n", {{"X-Stored", kToken}});
  }
  if (route == "/reflect-gzip") {
    return OriginReply::with_length(200, gzip_encode("stored: " + kToken + "\n"),
                                    {{"Content-Encoding", "gzip"}});
  }
  if (route == "/control/plain") return OriginReply::with_length(200, kControl);
  if (route == "/control/gzip") {
    return OriginReply::with_length(200, gzip_encode(kControl), {{"Content-Encoding", "gzip"}});
  }
  if (route == "/control/br") {
    return OriginReply::chunked(200, brotli_encode(kControl), 5, {}, {{"Content-Encoding", "br"}});
  }
  if (route == "/zstd") {
    return OriginReply::with_length(200, echo, Headers{{"Content-Encoding", "zstd"}});
  }
  if (route == "/corrupt") {
    // A long body whose gzip breaks two thirds in: the head and the start are out by then.
    std::string plain(200 * 1024, 'x');
    plain += echo;
    std::string encoded = gzip_encode(plain);
    for (std::size_t i = encoded.size() * 2 / 3; i < encoded.size(); i += 5) encoded[i] ^= 0x5a;
    return OriginReply::with_length(200, encoded, {{"Content-Encoding", "gzip"}});
  }
  return OriginReply::with_length(404, "no such route\n");
}

class ProxyRedaction : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto ca = run_command({sandgate_binary(), "ca", "init", dir_.file("ca")});
    ASSERT_EQ(ca.exit_code, 0) << ca.err;
    dir_.write("static-token", kToken + "\n");
    ::chmod(dir_.file("static-token").c_str(), 0600);
    dir_.write("placeholder.key", std::string(32, '\x5a'));
    ::chmod(dir_.file("placeholder.key").c_str(), 0600);
    origin_.set_handler(answer);
    daemon_ = std::make_unique<SandgateProcess>(SandgateOptions{tables()});
  }

  std::string tables() const {
    const std::string p = std::to_string(origin_.port());
    return R"(
[limits]
header_timeout_ms = 2000
idle_timeout_ms = 3000
connect_timeout_ms = 2000

[dns.hosts]
"api.test" = ["127.0.0.1"]
"npm.test" = ["127.0.0.1"]

[interception]
ca_cert = ")" +
           dir_.file("ca/ca.pem") +
           R"("
ca_key = ")" +
           dir_.file("ca/ca.key") +
           R"("
upstream_ca_file = ")" +
           roots_ +
           R"("

[credentials]
placeholder_key_file = ")" +
           dir_.file("placeholder.key") +
           R"("

[credentials.st]
provider = "static"
file = ")" +
           dir_.file("static-token") +
           R"("

[sandboxes.sb1]
token = ")" +
           kSandboxToken +
           R"("
ports = [)" +
           p +
           R"(]
allow = ["api.test", "npm.test"]
allow_cidrs = ["127.0.0.1/32"]

[[sandboxes.sb1.inject]]
hosts = ["api.test"]
path_prefixes = ["/in"]
credential = "st"
as = "bearer"

[[sandboxes.sb1.inject]]
hosts = ["npm.test"]
path_prefixes = ["/in"]
credential = "st"
as = "basic"
user = ")" +
           kBasicUser +
           R"("
)";
  }

  std::string url(const std::string& host, const std::string& path) const {
    return "https://" + host + ":" + std::to_string(origin_.port()) + path;
  }
  CurlResult curl(std::vector<std::string> args, const std::string& version = "--http1.1") const {
    std::vector<std::string> all = {version,    "--compressed",
                                    "-x",       daemon_->proxy_url(kId, kSandboxToken),
                                    "--cacert", dir_.file("ca/ca.pem")};
    all.insert(all.end(), args.begin(), args.end());
    return run_curl(all);
  }
  // Every form of the token the sandbox could read or decode: none may arrive.
  void expect_no_token(const CurlResult& r, const std::string& what) const {
    const std::string basic = secrets::base64(kBasicUser + ":" + kToken);
    const std::string got = r.headers + r.body;
    for (const std::string& form :
         {kToken, basic, url_safe(basic), json_escaped(kToken), percent(kToken, true),
          percent(kToken, false), html_escaped(kToken, false), html_escaped(kToken, true),
          std::string("sk+live"), std::string("QRS-9tok")}) {
      EXPECT_EQ(got.find(form), std::string::npos) << what << ": " << form << " in " << got;
    }
  }

  TempDir dir_;
  const TestCertificate origin_cert_ =
      make_self_signed_certificate({"api.test", "npm.test"}, {"127.0.0.1"});
  TempDir roots_dir_;
  const std::string roots_ = roots_dir_.write("roots.pem", origin_cert_.cert_pem);
  HttpOrigin origin_{"127.0.0.1", 0, origin_cert_};
  std::unique_ptr<SandgateProcess> daemon_;
};

const std::vector<std::string> kVersions = {"--http1.1", "--http2", "--http1.0"};

// THREATS 30: compressed echoes arrive decoded (Content-Encoding gone), the token redacted.
TEST_F(ProxyRedaction, ACompressedEchoArrivesDecodedAndRedacted) {
  const std::string stars(kToken.size(), '*');
  const std::string expected = R"({"authorization":"Bearer )" + stars + R"("})" + "\n";
  for (const std::string& version : kVersions) {
    for (const std::string coding :
         {"plain", "gzip", "x-gzip-chunked", "deflate", "raw-deflate", "br", "gzip-br"}) {
      const std::string what = version + " " + coding;
      const auto r = curl({url("api.test", "/in/echo/" + coding)}, version);
      ASSERT_EQ(r.exit_code, 0) << what << " " << r.err << daemon_->audit_text();
      EXPECT_EQ(r.http_code, 200) << what;
      EXPECT_EQ(r.body, expected) << what;
      EXPECT_EQ(curl_header(r, "Content-Encoding"), "") << what << r.headers;
      expect_no_token(r, what);
    }
    // The validator of the decoded body is weak.
    const auto tagged = curl({url("api.test", "/in/echo/gzip")}, version);
    EXPECT_EQ(curl_header(tagged, "ETag"), "W/\"v1\"") << version << tagged.headers;
  }
  // The origin received the token each time, and was asked for no compression.
  for (const auto& request : origin_.requests()) {
    EXPECT_EQ(request.header("Authorization"), "Bearer " + kToken);
    EXPECT_EQ(request.header("Accept-Encoding"), "identity");
  }
  const auto line = daemon_->wait_audit_code("http_request");
  ASSERT_TRUE(line);
  EXPECT_GE(json_int(*line, "labels.redactions").value_or(0), 1);
  EXPECT_EQ(daemon_->audit_text().find(kToken), std::string::npos);
}

// Controls: bodies without the token, plain and compressed, arrive intact and decoded.
TEST_F(ProxyRedaction, BodiesWithoutTheTokenArriveIntact) {
  for (const std::string& version : kVersions) {
    for (const std::string coding : {"plain", "gzip", "br"}) {
      for (const std::string side : {"/in", "/out"}) {
        const auto r = curl({url("api.test", side + "/control/" + coding)}, version);
        ASSERT_EQ(r.exit_code, 0) << version << coding << side << r.err;
        EXPECT_EQ(r.body, kControl) << version << " " << coding << " " << side;
      }
    }
  }
}

// THREATS 30: the escapes an echo commonly writes are redacted too, for Bearer and Basic.
TEST_F(ProxyRedaction, EscapedEchoesAreRedacted) {
  for (const std::string version : {"--http1.1", "--http2"}) {
    for (const std::string host : {"api.test", "npm.test"}) {
      for (const std::string form :
           {"json", "percent", "percent-lower", "html", "html-hex", "base64url"}) {
        if (form == "base64url" && host != "npm.test") continue;  // a form of Basic only
        const std::string what = version + " " + host + " " + form;
        const auto r = curl({url(host, "/in/escaped/" + form)}, version);
        ASSERT_EQ(r.exit_code, 0) << what << r.err;
        EXPECT_EQ(r.http_code, 200) << what;
        EXPECT_NE(r.body.find("****"), std::string::npos) << what << ": " << r.body;
        expect_no_token(r, what);
      }
    }
  }
  // The Basic echo over each coding, too.
  const auto basic = curl({url("npm.test", "/in/echo/br")});
  EXPECT_EQ(basic.exit_code, 0) << basic.err;
  expect_no_token(basic, "basic br");
}

// THREATS 30: a request that got no credential (a path no rule names, an Upgrade) to a host
// a credential is bound to: once a token is cached, a reflected one is redacted as well.
TEST_F(ProxyRedaction, ResponsesOfABoundHostAreRedactedWithoutACredentialToo) {
  ASSERT_EQ(curl({url("api.test", "/in/echo/plain")}).exit_code, 0);  // the token is cached
  for (const std::string version : {"--http1.1", "--http2"}) {
    for (const std::string route : {"/out/reflect", "/out/reflect-gzip"}) {
      const auto r = curl({url("api.test", route)}, version);
      ASSERT_EQ(r.exit_code, 0) << version << route << r.err;
      EXPECT_EQ(r.body, "stored: " + std::string(kToken.size(), '*') + "\n") << version << route;
      expect_no_token(r, version + route);
    }
  }
  // A request naming an Upgrade gets no credential, and its response is still scanned.
  const auto upgrade =
      curl({"-H", "Connection: Upgrade", "-H", "Upgrade: foo", url("api.test", "/in/reflect")});
  ASSERT_EQ(upgrade.exit_code, 0) << upgrade.err;
  EXPECT_EQ(upgrade.body, "stored: " + std::string(kToken.size(), '*') + "\n");
  expect_no_token(upgrade, "upgrade");
  // No request to /out (nor the Upgrade) carried the token.
  std::size_t credentialed = 0;
  for (const auto& request : origin_.requests()) {
    if (request.target.starts_with("/out") || request.target == "/in/reflect") {
      EXPECT_EQ(request.header("Authorization"), "") << request.target;
    } else {
      ++credentialed;
    }
  }
  EXPECT_EQ(credentialed, 1u);
}

// A coding sandgate cannot decode is refused before the head goes out; a body that turns out
// corrupt is cut off (no last chunk, a reset stream): never passed on undecoded.
TEST_F(ProxyRedaction, WhatCannotBeDecodedIsRefused) {
  for (const std::string version : {"--http1.1", "--http2"}) {
    const auto zstd = curl({url("api.test", "/in/zstd")}, version);
    EXPECT_EQ(zstd.http_code, 502) << version;
    EXPECT_EQ(curl_header(zstd, "X-Sandgate-Error"), "UPSTREAM_ENCODING_UNSUPPORTED") << version;
    expect_no_token(zstd, version + " zstd");

    const auto corrupt = curl({url("api.test", "/in/corrupt")}, version);
    EXPECT_NE(corrupt.exit_code, 0) << version;
    expect_no_token(corrupt, version + " corrupt");
  }
  const auto line = daemon_->wait_audit_code("UPSTREAM_ENCODING_UNSUPPORTED");
  ASSERT_TRUE(line);
  EXPECT_EQ(json_string(*line, "event.reason"), "response_not_decodable");
  EXPECT_TRUE(eventually([&] {
    std::size_t n = 0;
    for (const auto& l : daemon_->audit_lines()) {
      n += json_string(l, "event.code") == "UPSTREAM_ENCODING_UNSUPPORTED" ? 1 : 0;
    }
    return n == 4;
  })) << daemon_->audit_text();
}

// The same from an HTTP/2 destination (python3-h2, which compresses with Python's gzip and
// zlib; the brotli body is made here): the h2-to-h2 leg decodes and redacts as well.
TEST_F(ProxyRedaction, AnHttp2DestinationsCompressedEchoIsDecodedAndRedacted) {
  const std::string key = roots_dir_.write("origin.key", origin_cert_.key_pem);
  const std::string echo = R"({"authorization":"Bearer )" + kToken + R"("})" + "\n";
  const std::string script = R"(
import gzip, socket, ssl, sys, threading, zlib
import h2.config, h2.connection, h2.events
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
ctx.set_alpn_protocols(["h2"])
token, echo_br, control = sys.argv[3].encode(), bytes.fromhex(sys.argv[4]), sys.argv[5].encode()
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(16)
print("port=%d" % srv.getsockname()[1], flush=True)
def answer(path, auth):
    echo = b'{"authorization":"' + auth + b'"}\n'
    if path == "/in/echo/gzip": return "gzip", gzip.compress(echo)
    if path == "/in/echo/deflate": return "deflate", zlib.compress(echo)
    if path == "/in/echo/br": return "br", echo_br
    if path == "/in/zstd": return "zstd", echo
    if path == "/out/reflect-gzip": return "gzip", gzip.compress(b"stored: " + token + b"\n")
    if path == "/out/control/gzip": return "gzip", gzip.compress(control)
    if path == "/in/corrupt":
        body = bytearray(gzip.compress(b"x" * 40000 + echo))
        for i in range(len(body) * 2 // 3, len(body), 5): body[i] ^= 0x5a
        return "gzip", bytes(body)
    return None, b"no such route\n"
def serve(raw):
    try:
        t = ctx.wrap_socket(raw, server_side=True)
    except (OSError, ssl.SSLError):
        return
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                             header_encoding="utf-8"))
    c.initiate_connection()
    t.sendall(c.data_to_send())
    while True:
        try:
            data = t.recv(65536)
        except (OSError, ssl.SSLError):
            return
        if not data:
            return
        for e in c.receive_data(data):
            if isinstance(e, h2.events.RequestReceived):
                h = dict(e.headers)
                coding, body = answer(h[":path"], h.get("authorization", "").encode())
                fields = [(":status", "200"), ("content-length", str(len(body)))]
                if coding: fields.append(("content-encoding", coding))
                c.send_headers(e.stream_id, fields)
                for at in range(0, len(body), 16000):
                    c.send_data(e.stream_id, body[at:at + 16000])
                c.end_stream(e.stream_id)
            elif isinstance(e, h2.events.DataReceived):
                c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        t.sendall(c.data_to_send())
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
)";
  std::string echo_br_hex;
  for (const unsigned char c : brotli_encode(echo)) {
    char buf[3];
    std::snprintf(buf, sizeof buf, "%02x", c);
    echo_br_hex += buf;
  }
  h2::test::BackgroundPeer h2_origin(
      {"/usr/bin/python3", "-c", script, roots_, key, kToken, echo_br_hex, kControl});
  const std::string port = h2_origin.ready_line("port=");
  ASSERT_FALSE(port.empty()) << "the python3-h2 origin did not start";
  std::string with_port = tables();
  with_port.replace(with_port.find("ports = ["), 9, "ports = [" + port + ", ");
  ASSERT_TRUE(daemon_->reload(with_port));
  const auto at = [&](const std::string& path) { return "https://api.test:" + port + path; };

  const std::string expected =
      R"({"authorization":"Bearer )" + std::string(kToken.size(), '*') + R"("})" + "\n";
  for (const std::string coding : {"gzip", "deflate", "br"}) {
    const auto r = curl({at("/in/echo/" + coding)}, "--http2");
    ASSERT_EQ(r.exit_code, 0) << coding << " " << r.err;
    EXPECT_EQ(r.body, expected) << coding;
    EXPECT_EQ(curl_header(r, "Content-Encoding"), "") << coding << r.headers;
    EXPECT_EQ(curl_header(r, "Content-Length"), "") << coding << r.headers;
    expect_no_token(r, "h2 origin " + coding);
  }
  // The token is cached now: a request that got none has its response scanned too.
  const auto reflected = curl({at("/out/reflect-gzip")}, "--http2");
  ASSERT_EQ(reflected.exit_code, 0) << reflected.err;
  EXPECT_EQ(reflected.body, "stored: " + std::string(kToken.size(), '*') + "\n");
  const auto control = curl({at("/out/control/gzip")}, "--http2");
  ASSERT_EQ(control.exit_code, 0) << control.err;
  EXPECT_EQ(control.body, kControl);

  const auto zstd = curl({at("/in/zstd")}, "--http2");
  EXPECT_EQ(zstd.http_code, 502);
  EXPECT_EQ(curl_header(zstd, "X-Sandgate-Error"), "UPSTREAM_ENCODING_UNSUPPORTED");
  expect_no_token(zstd, "h2 origin zstd");
  const auto corrupt = curl({at("/in/corrupt")}, "--http2");
  EXPECT_NE(corrupt.exit_code, 0);
  expect_no_token(corrupt, "h2 origin corrupt");
  EXPECT_TRUE(eventually([&] {
    std::size_t n = 0;
    for (const auto& l : daemon_->audit_lines()) {
      n += json_string(l, "event.code") == "UPSTREAM_ENCODING_UNSUPPORTED" ? 1 : 0;
    }
    return n == 2;
  })) << daemon_->audit_text();
}

}  // namespace
}  // namespace sandgate::test
