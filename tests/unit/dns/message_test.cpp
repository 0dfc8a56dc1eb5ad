#include "dns/message.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace sandgate::dns {
namespace {

using Bytes = std::vector<std::uint8_t>;
using policy::IpAddress;

void put16(Bytes& b, unsigned v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8 & 0xFF));
  b.push_back(static_cast<std::uint8_t>(v & 0xFF));
}

Bytes wire_name(const std::string& name) {
  Bytes out;
  std::size_t start = 0;
  while (start < name.size()) {
    std::size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    out.push_back(static_cast<std::uint8_t>(dot - start));
    out.insert(out.end(), name.begin() + static_cast<std::ptrdiff_t>(start),
               name.begin() + static_cast<std::ptrdiff_t>(dot));
    start = dot + 1;
  }
  out.push_back(0);
  return out;
}

// A query as a stub resolver sends it; each field can be spoiled by a test row.
struct QuerySpec {
  unsigned id = 0x1234;
  unsigned flags = 0x0100;  // RD
  unsigned qd = 1, an = 0, ns = 0;
  Bytes name = wire_name("example.com");
  unsigned qtype = kTypeA;
  unsigned qclass = kClassIn;
  bool opt = false;
  unsigned udp_size = 1232;
  unsigned edns_version = 0;
  Bytes options;  // raw EDNS options
  Bytes trailer;  // bytes after everything
};

Bytes make_query(const QuerySpec& s) {
  Bytes b;
  put16(b, s.id);
  put16(b, s.flags);
  put16(b, s.qd);
  put16(b, s.an);
  put16(b, s.ns);
  put16(b, s.opt ? 1 : 0);
  b.insert(b.end(), s.name.begin(), s.name.end());
  put16(b, s.qtype);
  put16(b, s.qclass);
  if (s.opt) {
    b.push_back(0);
    put16(b, kTypeOpt);
    put16(b, s.udp_size);
    put16(b, s.edns_version);  // extended rcode 0, version
    put16(b, 0);
    put16(b, static_cast<unsigned>(s.options.size()));
    b.insert(b.end(), s.options.begin(), s.options.end());
  }
  b.insert(b.end(), s.trailer.begin(), s.trailer.end());
  return b;
}

Query parse_ok(const Bytes& b) {
  auto r = parse_query(b);
  EXPECT_TRUE(std::holds_alternative<Query>(r));
  return std::holds_alternative<Query>(r) ? std::get<Query>(r) : Query{};
}

unsigned at16(const Bytes& b, std::size_t i) {
  return static_cast<unsigned>(b[i] << 8 | b[i + 1]);
}

TEST(DnsMessageTest, ParsesStubQueries) {
  struct Row {
    const char* label;
    QuerySpec spec;
    std::string name;
    unsigned qtype;
    bool opt;
  };
  QuerySpec edns;
  edns.opt = true;
  edns.options = {0x00, 0x0a, 0x00, 0x08, 1, 2, 3, 4, 5, 6, 7, 8};  // a client cookie
  QuerySpec upper;
  upper.name = wire_name("WWW.Example.COM");
  upper.qtype = kTypeAaaa;
  QuerySpec root;
  root.name = {0};
  QuerySpec odd;
  odd.name = {3, 'a', '.', 'b', 2, 'c', 0xff, 0};
  QuerySpec mx;
  mx.qtype = 15;
  const std::vector<Row> rows = {
      {"plain", QuerySpec{}, "example.com", kTypeA, false},
      {"edns with cookie", edns, "example.com", kTypeA, true},
      {"case kept", upper, "WWW.Example.COM", kTypeAaaa, false},
      {"root", root, ".", kTypeA, false},
      {"dot and byte escaped", odd, "a\\046b.c\\255", kTypeA, false},
      {"other type parses", mx, "example.com", 15, false},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.label);
    const Bytes b = make_query(row.spec);
    const Query q = parse_ok(b);
    EXPECT_EQ(q.header.id, row.spec.id);
    EXPECT_TRUE(q.header.rd);
    EXPECT_EQ(q.name, row.name);
    EXPECT_EQ(q.qtype, row.qtype);
    EXPECT_EQ(q.has_opt, row.opt);
    EXPECT_EQ(q.question.size(), row.spec.name.size() + 4);
  }
}

TEST(DnsMessageTest, RejectsMalformedWithFormerr) {
  struct Row {
    const char* label;
    QuerySpec spec;
  };
  auto with = [](auto change) {
    QuerySpec s;
    change(s);
    return s;
  };
  Bytes long_name;
  for (int i = 0; i < 5; ++i) {
    long_name.push_back(63);
    long_name.insert(long_name.end(), 63, 'a');
  }
  long_name.push_back(0);
  const std::vector<Row> rows = {
      {"response bit", with([](QuerySpec& s) { s.flags = 0x8100; })},
      {"opcode status", with([](QuerySpec& s) { s.flags = 2 << 11; })},
      {"no question", with([](QuerySpec& s) { s.qd = 0; })},
      {"two questions", with([](QuerySpec& s) { s.qd = 2; })},
      {"answer count", with([](QuerySpec& s) { s.an = 1; })},
      {"authority count", with([](QuerySpec& s) { s.ns = 1; })},
      {"class CH", with([](QuerySpec& s) { s.qclass = 3; })},
      {"class ANY", with([](QuerySpec& s) { s.qclass = 255; })},
      {"pointer in question", with([](QuerySpec& s) {
         s.name = {0xC0, 0x0C};
       })},
      {"pointer loop", with([](QuerySpec& s) {
         s.name = {1, 'a', 0xC0, 0x0C};
       })},
      {"reserved label type", with([](QuerySpec& s) {
         s.name = {0x41, 'a', 0};
       })},
      {"name over 255 bytes", with([&](QuerySpec& s) { s.name = long_name; })},
      {"name runs off the end", with([](QuerySpec& s) {
         s.name = {5, 'a', 'b'}, s.qtype = 0, s.qclass = 0;
       })},
      {"trailing byte", with([](QuerySpec& s) { s.trailer = {0}; })},
      {"edns version 1", with([](QuerySpec& s) { s.opt = true, s.edns_version = 1; })},
      {"edns option too long",
       with([](QuerySpec& s) { s.opt = true, s.options = {0, 10, 0, 9, 1, 2, 3}; })},
      {"edns option header cut", with([](QuerySpec& s) {
         s.opt = true, s.options = {0, 10, 0};
       })},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.label);
    const auto r = parse_query(make_query(row.spec));
    ASSERT_TRUE(std::holds_alternative<ParseError>(r));
    const auto& e = std::get<ParseError>(r);
    EXPECT_EQ(e.rcode, Rcode::formerr);
    ASSERT_TRUE(e.header);
    EXPECT_EQ(e.header->id, row.spec.id);
  }
}

TEST(DnsMessageTest, EveryPrefixOfAQueryFails) {
  QuerySpec s;
  s.opt = true;
  s.options = {0, 10, 0, 2, 1, 2};
  const Bytes full = make_query(s);
  ASSERT_TRUE(std::holds_alternative<Query>(parse_query(full)));
  for (std::size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    const auto r = parse_query(std::span(full).first(n));
    ASSERT_TRUE(std::holds_alternative<ParseError>(r));
    EXPECT_EQ(std::get<ParseError>(r).header.has_value(), n >= kHeaderBytes);
  }
}

TEST(DnsMessageTest, OptRecordMustBeRootAndTypeOpt) {
  Bytes b = make_query(QuerySpec{});
  b[11] = 1;                                                             // ARCOUNT 1
  const Bytes a_record = {0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 1, 2, 3, 4};  // root A record
  Bytes with_a = b;
  with_a.insert(with_a.end(), a_record.begin(), a_record.end());
  EXPECT_TRUE(std::holds_alternative<ParseError>(parse_query(with_a)));
  Bytes named_opt = b;
  const Bytes opt = {1, 'x', 0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0};
  named_opt.insert(named_opt.end(), opt.begin(), opt.end());
  EXPECT_TRUE(std::holds_alternative<ParseError>(parse_query(named_opt)));
}

TEST(DnsMessageTest, UdpLimit) {
  Query q;
  EXPECT_EQ(udp_limit(q), 512u);
  q.has_opt = true;
  q.udp_size = 100;
  EXPECT_EQ(udp_limit(q), 512u);
  q.udp_size = 4096;
  EXPECT_EQ(udp_limit(q), kMaxUdpBytes);
  q.udp_size = 1000;
  EXPECT_EQ(udp_limit(q), 1000u);
}

const std::vector<IpAddress> kAddresses = {
    IpAddress::v4(0xC0000201),  // 192.0.2.1
    IpAddress::v4(0xC0000202),
    IpAddress::v6({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}),
};

TEST(DnsMessageTest, AnswerCarriesRecordsOfTheAskedFamily) {
  QuerySpec s;
  const Query q = parse_ok(make_query(s));
  const Bytes r = build_answer(q, kAddresses, 60, 512);
  EXPECT_EQ(at16(r, 0), 0x1234u);
  EXPECT_EQ(at16(r, 2), 0x8180u);  // QR, RD, RA, NOERROR
  EXPECT_EQ(at16(r, 4), 1u);
  EXPECT_EQ(at16(r, 6), 2u);
  EXPECT_EQ(at16(r, 10), 0u);
  std::size_t at = kHeaderBytes + q.question.size();
  EXPECT_TRUE(std::equal(q.question.begin(), q.question.end(), r.begin() + kHeaderBytes));
  for (std::uint8_t last : {1, 2}) {
    EXPECT_EQ(at16(r, at), 0xC00Cu);
    EXPECT_EQ(at16(r, at + 2), kTypeA);
    EXPECT_EQ(at16(r, at + 4), kClassIn);
    EXPECT_EQ(at16(r, at + 6) << 16 | at16(r, at + 8), 60u);
    EXPECT_EQ(at16(r, at + 10), 4u);
    EXPECT_EQ(r[at + 15], last);
    at += 16;
  }
  EXPECT_EQ(at, r.size());

  s.qtype = kTypeAaaa;
  s.opt = true;
  const Query q6 = parse_ok(make_query(s));
  const Bytes r6 = build_answer(q6, kAddresses, 1, 512);
  EXPECT_EQ(at16(r6, 6), 1u);
  EXPECT_EQ(at16(r6, 10), 1u);  // OPT
  const std::size_t rr = kHeaderBytes + q6.question.size();
  EXPECT_EQ(at16(r6, rr + 2), kTypeAaaa);
  EXPECT_EQ(at16(r6, rr + 10), 16u);
  EXPECT_EQ(r6[rr + 12], 0x20);
  EXPECT_EQ(r6.size(), rr + 12 + 16 + 11);
  EXPECT_EQ(at16(r6, r6.size() - 10), kTypeOpt);
}

TEST(DnsMessageTest, NoDataWhenFamilyMissing) {
  QuerySpec s;
  s.qtype = kTypeAaaa;
  const Query q = parse_ok(make_query(s));
  const std::vector<IpAddress> v4_only(kAddresses.begin(), kAddresses.begin() + 2);
  const Bytes r = build_answer(q, v4_only, 60, 512);
  EXPECT_EQ(at16(r, 2) & 0xF, 0u);
  EXPECT_EQ(at16(r, 6), 0u);
  EXPECT_EQ(r.size(), kHeaderBytes + q.question.size());
}

// Issue 9 item 7: NXDOMAIN and NODATA with the zone's SOA, which authority_soa reads back.
TEST(DnsMessageTest, NegativeAnswerCarriesTheSoa) {
  QuerySpec s;
  s.name = wire_name("www.example.com");
  s.opt = true;
  const Query q = parse_ok(make_query(s));
  const Soa soa{
      "example.com", "ns1.example.com", "hostmaster.example.com", 7, 7200, 3600, 1209600, 60, 30};
  const Bytes r = build_negative(q, Rcode::nxdomain, &soa, 512);
  EXPECT_EQ(at16(r, 2), 0x8183u);  // QR RD RA, NXDOMAIN
  EXPECT_EQ(at16(r, 4), 1u);
  EXPECT_EQ(at16(r, 6), 0u);
  EXPECT_EQ(at16(r, 8), 1u);   // the SOA
  EXPECT_EQ(at16(r, 10), 1u);  // OPT
  const auto back = authority_soa(r, "www.example.com");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->zone, "example.com");
  EXPECT_EQ(back->mname, "ns1.example.com");
  EXPECT_EQ(back->rname, "hostmaster.example.com");
  EXPECT_EQ(back->serial, 7u);
  EXPECT_EQ(back->minimum, 60u);
  EXPECT_EQ(back->ttl, 30u);  // min(TTL 30, MINIMUM 60)
  // Not the name's zone: ignored. The root zone is every name's.
  EXPECT_FALSE(authority_soa(r, "www.example.org"));
  EXPECT_FALSE(authority_soa(r, "wwwexample.com"));
  Soa root = soa;
  root.zone = "";
  EXPECT_TRUE(authority_soa(build_negative(q, Rcode::noerror, &root, 512), "www.example.com"));
  // Every prefix of the reply is refused, never read past.
  for (std::size_t n = 0; n < r.size() - 11; ++n) {  // the OPT after the SOA is not read
    EXPECT_FALSE(authority_soa(std::span(r).first(n), "www.example.com")) << n;
  }
  // NODATA; no room for the SOA: the negative answer without it.
  const Bytes nodata = build_negative(q, Rcode::noerror, &soa, kHeaderBytes + 30);
  EXPECT_EQ(at16(nodata, 2) & 0xF, 0u);
  EXPECT_EQ(at16(nodata, 8), 0u);
  EXPECT_EQ(nodata.size(), kHeaderBytes + q.question.size() + 11);
}

TEST(DnsMessageTest, TruncatesWhenTooLarge) {
  const Query q = parse_ok(make_query(QuerySpec{}));
  std::vector<IpAddress> many;
  for (std::uint32_t i = 0; i < 40; ++i) many.push_back(IpAddress::v4(0x0A000000 + i));
  const Bytes r = build_answer(q, many, 60, 512);
  EXPECT_EQ(at16(r, 2), 0x8380u);  // TC set
  EXPECT_EQ(at16(r, 6), 0u);
  EXPECT_EQ(r.size(), kHeaderBytes + q.question.size());
  const Bytes tcp = build_answer(q, many, 60, kMaxMessageBytes);
  EXPECT_EQ(at16(tcp, 6), 40u);
  EXPECT_EQ(tcp.size(), kHeaderBytes + q.question.size() + 40 * 16);
}

TEST(DnsMessageTest, RefusalCarriesExtendedError) {
  QuerySpec s;
  s.opt = true;
  const Query q = parse_ok(make_query(s));
  const std::string text = "SANDBOX_NETWORK_DENIED: no_matching_rule (example.com)";
  const Bytes r = build_refusal(q, text, 512);
  EXPECT_EQ(at16(r, 2), 0x8185u);  // REFUSED
  EXPECT_EQ(at16(r, 10), 1u);
  std::size_t at = kHeaderBytes + q.question.size();
  EXPECT_EQ(r[at], 0);
  EXPECT_EQ(at16(r, at + 1), kTypeOpt);
  EXPECT_EQ(at16(r, at + 9), 6 + text.size());
  EXPECT_EQ(at16(r, at + 11), kOptionEde);
  EXPECT_EQ(at16(r, at + 13), 2 + text.size());
  EXPECT_EQ(at16(r, at + 15), kEdeBlocked);
  EXPECT_EQ(std::string(r.begin() + static_cast<std::ptrdiff_t>(at + 17), r.end()), text);

  const Bytes cut = build_refusal(q, std::string(2000, 'x'), 512);
  EXPECT_EQ(cut.size(), 512u);

  const Query plain = parse_ok(make_query(QuerySpec{}));
  const Bytes no_opt = build_refusal(plain, text, 512);
  EXPECT_EQ(no_opt.size(), kHeaderBytes + plain.question.size());
  EXPECT_EQ(at16(no_opt, 10), 0u);
}

// A refused name's sink answer: NOERROR, one A record of the sink for A (none for AAAA), and
// the EDE when the query had an OPT record, cut short to fit. Control: no OPT, no EDE.
TEST(DnsMessageTest, SinkAnswersAWithTheSinkAndCarriesTheExtendedError) {
  QuerySpec s;
  s.opt = true;
  const Query q = parse_ok(make_query(s));
  const IpAddress sink = IpAddress::v4(0xC00002FE);
  const std::string text = "SANDBOX_NETWORK_DENIED: no_matching_rule (example.com)";
  const Bytes r = build_sink(q, sink, 5, text, 512);
  EXPECT_EQ(at16(r, 2), 0x8180u);  // NOERROR
  EXPECT_EQ(at16(r, 6), 1u);
  EXPECT_EQ(at16(r, 10), 1u);
  std::size_t at = kHeaderBytes + q.question.size();
  EXPECT_EQ(at16(r, at), 0xC00Cu);
  EXPECT_EQ(at16(r, at + 2), kTypeA);
  EXPECT_EQ(at16(r, at + 6) << 16 | at16(r, at + 8), 5u);
  EXPECT_EQ(r[at + 12], 192);
  EXPECT_EQ(r[at + 15], 254);
  at += 16;
  EXPECT_EQ(at16(r, at + 1), kTypeOpt);
  EXPECT_EQ(at16(r, at + 15), kEdeBlocked);
  EXPECT_EQ(std::string(r.begin() + static_cast<std::ptrdiff_t>(at + 17), r.end()), text);
  EXPECT_EQ(build_sink(q, sink, 5, std::string(2000, 'x'), 512).size(), 512u);

  s.qtype = kTypeAaaa;
  const Query q6 = parse_ok(make_query(s));
  const Bytes r6 = build_sink(q6, sink, 5, text, 512);
  EXPECT_EQ(at16(r6, 2), 0x8180u);
  EXPECT_EQ(at16(r6, 6), 0u);  // NODATA
  EXPECT_EQ(r6.size(), kHeaderBytes + q6.question.size() + 11 + 6 + text.size());

  const Query plain = parse_ok(make_query(QuerySpec{}));
  const Bytes no_opt = build_sink(plain, sink, 5, text, 512);
  EXPECT_EQ(no_opt.size(), kHeaderBytes + plain.question.size() + 16);
  EXPECT_EQ(at16(no_opt, 10), 0u);
}

TEST(DnsMessageTest, Errors) {
  QuerySpec s;
  s.flags = 0;  // RD clear is copied
  const Query q = parse_ok(make_query(s));
  const Bytes r = build_error(q, Rcode::servfail);
  EXPECT_EQ(at16(r, 2), 0x8082u);
  EXPECT_EQ(at16(r, 4), 1u);
  EXPECT_EQ(r.size(), kHeaderBytes + q.question.size());

  const Bytes f = build_header_error(Header{0xBEEF, 0, true}, Rcode::formerr);
  EXPECT_EQ(f, (Bytes{0xBE, 0xEF, 0x81, 0x81, 0, 0, 0, 0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace sandgate::dns
