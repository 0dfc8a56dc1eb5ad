// sendable_fields and the HTTP/1.1 conversions, one row per case.
#include <gtest/gtest.h>

#include "h2/h1_fields.hpp"

namespace sandgate::h2 {
namespace {

struct Row {
  const char* name;
  Fields in;
  Fields out;
};

class SendableFields : public testing::TestWithParam<Row> {};

TEST_P(SendableFields, Filters) {
  EXPECT_EQ(sendable_fields(GetParam().in), GetParam().out);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, SendableFields,
    testing::Values(Row{"kept_and_lowercased",
                        {{"Content-Type", "text/plain"}},
                        {{"content-type", "text/plain"}}},
                    Row{"connection", {{"Connection", "close"}, {"a", "1"}}, {{"a", "1"}}},
                    Row{"keep_alive", {{"Keep-Alive", "timeout=5"}}, {}},
                    Row{"proxy_connection", {{"proxy-connection", "keep-alive"}}, {}},
                    Row{"transfer_encoding", {{"Transfer-Encoding", "chunked"}}, {}},
                    Row{"upgrade", {{"Upgrade", "h2c"}}, {}},
                    Row{"host", {{"Host", "example.com"}}, {}},
                    Row{"te_trailers", {{"TE", "trailers"}}, {{"te", "trailers"}}},
                    Row{"te_gzip", {{"te", "gzip"}}, {}},
                    Row{"order_kept",
                        {{"b", "2"}, {"a", "1"}, {"b", "3"}},
                        {{"b", "2"}, {"a", "1"}, {"b", "3"}}}),
    [](const testing::TestParamInfo<Row>& i) { return std::string(i.param.name); });

TEST(H1Fields, FromBeastDropsWhatHttp2CannotCarry) {
  boost::beast::http::fields f;
  f.insert("Host", "example.com");
  f.insert("Accept", "*/*");
  f.insert("Connection", "keep-alive");
  f.insert("Transfer-Encoding", "chunked");
  const Fields expected{{"accept", "*/*"}};
  EXPECT_EQ(from_h1(f), expected);
}

// An origin that repeats Content-Length (same value; Beast refuses different ones): an HTTP/2
// client gets it once, which it would otherwise refuse as malformed.
TEST(H1Fields, FromBeastSendsARepeatedContentLengthOnce) {
  boost::beast::http::fields f;
  f.insert("Content-Length", "42");
  f.insert("X-A", "1");
  f.insert("content-length", "42");
  const Fields expected{{"content-length", "42"}, {"x-a", "1"}};
  EXPECT_EQ(from_h1(f), expected);
}

TEST(H1Fields, ToBeastJoinsSplitCookies) {
  const Fields in{{"cookie", "a=1"}, {"accept", "*/*"}, {"cookie", "b=2"}};
  boost::beast::http::fields out;
  to_h1(in, out);
  EXPECT_EQ(out[boost::beast::http::field::cookie], "a=1; b=2");
  EXPECT_EQ(out["accept"], "*/*");
  EXPECT_EQ(std::distance(out.begin(), out.end()), 2);
}

// An empty crumb added only a trailing "; ", which an HTTP/1.1 reader trims (h2_h1_head_fuzz).
TEST(H1Fields, ToBeastLeavesEmptyCookieCrumbsOut) {
  const Fields in{{"cookie", "a=1"}, {"cookie", ""}, {"accept", "*/*"}, {"cookie", "b=2"}};
  boost::beast::http::fields out;
  to_h1(in, out);
  EXPECT_EQ(out[boost::beast::http::field::cookie], "a=1; b=2");
  const Fields only_empty{{"cookie", ""}};
  boost::beast::http::fields none;
  to_h1(only_empty, none);
  EXPECT_EQ(none.count(boost::beast::http::field::cookie), 0u);
}

TEST(H1Fields, TheHttp11RequestCarriesTheHeadWithHostFromTheAuthority) {
  RequestHead head{"POST", "https", "a.test:8443", "/p?q=1", {}};
  boost::beast::http::fields fields;
  fields.insert("x-a", "1");
  fields.insert("host", "stale.test");
  fields.insert("x-b", "2");
  const auto req = to_h1_request(head, "/canonical", fields);
  EXPECT_EQ(req.method_string(), "POST");
  EXPECT_EQ(req.target(), "/canonical");
  EXPECT_EQ(req.version(), 11);
  EXPECT_EQ(req.count(boost::beast::http::field::host), 1u);
  EXPECT_EQ(req[boost::beast::http::field::host], "a.test:8443");
  EXPECT_EQ(req["x-a"], "1");
  EXPECT_EQ(req["x-b"], "2");
}

}  // namespace
}  // namespace sandgate::h2
