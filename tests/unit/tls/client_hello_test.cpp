#include "tls/client_hello.hpp"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::tls {
namespace {

using Bytes = std::vector<std::uint8_t>;

// --- Real ClientHellos from OpenSSL -------------------------------------------------------

struct HelloOptions {
  const char* sni = nullptr;
  std::vector<std::string> alpn;
  std::size_t padding_ext_bytes = 0;  // a private extension that makes the hello this much larger
};

int add_padding(SSL*, unsigned, unsigned, const unsigned char** out, std::size_t* outlen, X509*,
                std::size_t, int*, void* arg) {
  const auto* len = static_cast<const std::size_t*>(arg);
  auto* data = new unsigned char[*len];
  std::memset(data, 'p', *len);
  *out = data;
  *outlen = *len;
  return 1;
}
void free_padding(SSL*, unsigned, unsigned, const unsigned char* out, void*) {
  delete[] out;
}

// Drives an OpenSSL client over memory BIOs until it has written its first flight, and returns
// those bytes: one or more TLS records holding the ClientHello.
Bytes openssl_client_hello(const HelloOptions& opt) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        &SSL_CTX_free);
  if (!ctx) throw std::runtime_error("SSL_CTX_new");
  std::size_t padding = opt.padding_ext_bytes;
  if (padding > 0 && SSL_CTX_add_custom_ext(ctx.get(), 0xff42, SSL_EXT_CLIENT_HELLO, &add_padding,
                                            &free_padding, &padding, nullptr, nullptr) != 1) {
    throw std::runtime_error("SSL_CTX_add_custom_ext");
  }
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), &SSL_free);
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), rbio, wbio);  // ssl owns both
  SSL_set_connect_state(ssl.get());
  if (opt.sni && SSL_set_tlsext_host_name(ssl.get(), opt.sni) != 1) {
    throw std::runtime_error("SSL_set_tlsext_host_name");
  }
  if (!opt.alpn.empty()) {
    Bytes wire;
    for (const auto& p : opt.alpn) {
      wire.push_back(static_cast<std::uint8_t>(p.size()));
      wire.insert(wire.end(), p.begin(), p.end());
    }
    if (SSL_set_alpn_protos(ssl.get(), wire.data(), static_cast<unsigned>(wire.size())) != 0) {
      throw std::runtime_error("SSL_set_alpn_protos");
    }
  }
  if (SSL_do_handshake(ssl.get()) != -1) throw std::runtime_error("handshake did not block");
  Bytes out(static_cast<std::size_t>(BIO_pending(wbio)));
  if (out.empty() ||
      BIO_read(wbio, out.data(), static_cast<int>(out.size())) != static_cast<int>(out.size())) {
    throw std::runtime_error("no ClientHello written");
  }
  return out;
}

const Bytes& default_hello() {
  static const Bytes hello = openssl_client_hello({"api.example.com", {"h2", "http/1.1"}, 0});
  return hello;
}

// --- Record helpers ---------------------------------------------------------------------

void put16(Bytes& b, std::size_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 8));
  b.push_back(static_cast<std::uint8_t>(v));
}
void put24(Bytes& b, std::size_t v) {
  b.push_back(static_cast<std::uint8_t>(v >> 16));
  put16(b, v & 0xffff);
}
void append(Bytes& b, const Bytes& more) {
  b.insert(b.end(), more.begin(), more.end());
}
void append(Bytes& b, std::string_view more) {
  b.insert(b.end(), more.begin(), more.end());
}

// The handshake bytes carried by a run of well-formed records.
Bytes handshake_bytes(const Bytes& records) {
  Bytes hs;
  for (std::size_t pos = 0; pos + 5 <= records.size();) {
    const std::size_t len = (std::size_t{records[pos + 3]} << 8) | records[pos + 4];
    hs.insert(hs.end(), records.begin() + static_cast<long>(pos + 5),
              records.begin() + static_cast<long>(pos + 5 + len));
    pos += 5 + len;
  }
  return hs;
}

std::size_t record_count(const Bytes& records) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos + 5 <= records.size(); ++n) {
    pos += 5 + ((std::size_t{records[pos + 3]} << 8) | records[pos + 4]);
  }
  return n;
}

// Re-frames handshake bytes into handshake records of at most `chunk` bytes each.
Bytes frame(const Bytes& hs, std::size_t chunk, std::uint16_t version = 0x0301) {
  Bytes out;
  for (std::size_t pos = 0; pos < hs.size(); pos += chunk) {
    const std::size_t n = std::min(chunk, hs.size() - pos);
    out.push_back(22);
    put16(out, version);
    put16(out, n);
    out.insert(out.end(), hs.begin() + static_cast<long>(pos),
               hs.begin() + static_cast<long>(pos + n));
  }
  return out;
}

PeekResult peek(const Bytes& b) {
  return peek_client_hello(std::span<const std::uint8_t>(b));
}
Bytes prefix(const Bytes& b, std::size_t n) {
  return Bytes(b.begin(), b.begin() + static_cast<long>(n));
}

// Every strict prefix is need_more with an honest hint; the whole input is complete.
void expect_incremental(const Bytes& records) {
  for (std::size_t n = 0; n < records.size(); ++n) {
    const PeekResult r = peek(prefix(records, n));
    ASSERT_EQ(r.status, PeekStatus::need_more) << "prefix " << n << " of " << records.size();
    ASSERT_GE(r.bytes_needed_hint, 1u);
    ASSERT_LE(n + r.bytes_needed_hint, records.size()) << "hint overshoots at " << n;
  }
  EXPECT_EQ(peek(records).status, PeekStatus::complete);
}

// --- Field offsets inside a single-record hello, for corrupting lengths -----------------

struct Offsets {
  std::size_t handshake_len = 6;  // 3 bytes
  std::size_t session_id_len = 0, suites_len = 0, compression_len = 0, extensions_len = 0;
  std::size_t sni_ext_len = 0, sni_list_len = 0, sni_name_len = 0;
  std::size_t alpn_list_len = 0, alpn_first_len = 0;
};

Offsets locate(const Bytes& h) {
  Offsets o;
  const auto u16 = [&](std::size_t at) { return (std::size_t{h.at(at)} << 8) | h.at(at + 1); };
  o.session_id_len = 5 + 4 + 2 + 32;
  o.suites_len = o.session_id_len + 1 + h.at(o.session_id_len);
  o.compression_len = o.suites_len + 2 + u16(o.suites_len);
  o.extensions_len = o.compression_len + 1 + h.at(o.compression_len);
  for (std::size_t pos = o.extensions_len + 2; pos + 4 <= h.size(); pos += 4 + u16(pos + 2)) {
    if (u16(pos) == 0x0000) {
      o.sni_ext_len = pos + 2;
      o.sni_list_len = pos + 4;
      o.sni_name_len = pos + 7;
    } else if (u16(pos) == 0x0010) {
      o.alpn_list_len = pos + 4;
      o.alpn_first_len = pos + 6;
    }
  }
  return o;
}

// --- Hand-built hellos for what OpenSSL will not send -----------------------------------

Bytes ext(std::uint16_t type, const Bytes& data) {
  Bytes b;
  put16(b, type);
  put16(b, data.size());
  append(b, data);
  return b;
}

struct Name {
  std::uint8_t type;
  std::string host;
};
Bytes sni_ext(const std::vector<Name>& names) {
  Bytes list;
  for (const auto& n : names) {
    list.push_back(n.type);
    put16(list, n.host.size());
    append(list, n.host);
  }
  Bytes data;
  put16(data, list.size());
  append(data, list);
  return ext(0x0000, data);
}
Bytes sni_ext(const std::string& host) {
  return sni_ext({{0, host}});
}

Bytes alpn_ext(const std::vector<std::string>& protos) {
  Bytes list;
  for (const auto& p : protos) {
    list.push_back(static_cast<std::uint8_t>(p.size()));
    append(list, p);
  }
  Bytes data;
  put16(data, list.size());
  append(data, list);
  return ext(0x0010, data);
}

struct Parts {
  std::uint8_t handshake_type = 1;
  std::uint16_t legacy_version = 0x0303;
  std::size_t session_id_len = 32;
  Bytes suites = {0x13, 0x01, 0x13, 0x02};
  Bytes compression = {0x00};
  std::optional<Bytes> extensions = Bytes{};  // concatenated; nullopt: no extensions block
  std::optional<std::size_t> extensions_len;  // override the block length
  Bytes after_hello;                          // extra handshake bytes in the same record
  std::uint16_t record_version = 0x0301;
};

Bytes build(const Parts& p) {
  Bytes body;
  put16(body, p.legacy_version);
  body.insert(body.end(), 32, 0xaa);  // random
  body.push_back(static_cast<std::uint8_t>(p.session_id_len));
  body.insert(body.end(), p.session_id_len, 0xbb);
  put16(body, p.suites.size());
  append(body, p.suites);
  body.push_back(static_cast<std::uint8_t>(p.compression.size()));
  append(body, p.compression);
  if (p.extensions) {
    put16(body, p.extensions_len.value_or(p.extensions->size()));
    append(body, *p.extensions);
  }
  Bytes hs{p.handshake_type};
  put24(hs, body.size());
  append(hs, body);
  append(hs, p.after_hello);
  return frame(hs, 16384, p.record_version);
}

Bytes hello_with(const std::vector<Bytes>& exts) {
  Bytes all;
  for (const auto& e : exts) append(all, e);
  Parts p;
  p.extensions = all;
  return build(p);
}

// --- Tests ----------------------------------------------------------------------------

TEST(LooksLikeTls, NeedsHandshakeTypeAndMajorVersionThree) {
  EXPECT_TRUE(looks_like_tls(default_hello()));
  EXPECT_TRUE(looks_like_tls(Bytes{0x16, 0x03}));
  EXPECT_FALSE(looks_like_tls(Bytes{}));
  EXPECT_FALSE(looks_like_tls(Bytes{0x16}));
  EXPECT_FALSE(looks_like_tls(Bytes{0x16, 0x02, 0x00}));
  EXPECT_FALSE(looks_like_tls(Bytes{0x17, 0x03, 0x03}));
  EXPECT_FALSE(looks_like_tls(Bytes{'G', 'E', 'T', ' '}));
}

TEST(PeekClientHello, OpenSslHelloWhole) {
  const Bytes& h = default_hello();
  const PeekResult r = peek(h);
  ASSERT_EQ(r.status, PeekStatus::complete);
  EXPECT_EQ(r.hello.sni, "api.example.com");
  EXPECT_EQ(r.hello.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
  EXPECT_FALSE(r.hello.has_ech);
  EXPECT_EQ(r.record_bytes, h.size());
}

TEST(PeekClientHello, BytesAfterTheHelloAreIgnored) {
  Bytes h = default_hello();
  const std::size_t hello_size = h.size();
  append(h, Bytes{0x17, 0x03, 0x03, 0x00, 0x01, 0x00});  // e.g. early data
  const PeekResult r = peek(h);
  ASSERT_EQ(r.status, PeekStatus::complete);
  EXPECT_EQ(r.record_bytes, hello_size);
}

TEST(PeekClientHello, ByteByByteIsNeedMoreUntilComplete) {
  expect_incremental(default_hello());
}

TEST(PeekClientHello, NoSni) {
  const Bytes h = openssl_client_hello({nullptr, {}, 0});
  const PeekResult r = peek(h);
  ASSERT_EQ(r.status, PeekStatus::complete);
  EXPECT_FALSE(r.hello.sni.has_value());
  EXPECT_TRUE(r.hello.alpn.empty());
  expect_incremental(h);
}

TEST(PeekClientHello, ReframedIntoSmallRecords) {
  const Bytes hs = handshake_bytes(default_hello());
  for (const std::size_t chunk : {1u, 3u, 4u, 50u, 1000u}) {
    SCOPED_TRACE(chunk);
    const Bytes records = frame(hs, chunk);
    ASSERT_GT(record_count(records), chunk < 1000 ? 2u : 0u);
    const PeekResult r = peek(records);
    ASSERT_EQ(r.status, PeekStatus::complete);
    EXPECT_EQ(r.hello.sni, "api.example.com");
    EXPECT_EQ(r.hello.alpn, (std::vector<std::string>{"h2", "http/1.1"}));
    EXPECT_EQ(r.record_bytes, records.size());
    if (chunk == 50) expect_incremental(records);
  }
}

TEST(PeekClientHello, OpenSslSplitsALargeHelloAcrossRecords) {
  const Bytes h = openssl_client_hello({"big.example", {}, 20000});
  ASSERT_GE(record_count(h), 2u);
  const PeekResult r = peek(h);
  ASSERT_EQ(r.status, PeekStatus::complete);
  EXPECT_EQ(r.hello.sni, "big.example");
}

TEST(PeekClientHello, CapsTheBytesItWillBuffer) {
  // About 60 KiB of handshake in 50-byte records is over 64 KiB on the wire.
  const Bytes h = frame(handshake_bytes(openssl_client_hello({"big.example", {}, 60000})), 50);
  ASSERT_GT(h.size(), kMaxClientHelloBytes);
  EXPECT_EQ(peek(h).status, PeekStatus::malformed);
  for (std::size_t n = 0; n < h.size(); n += 997) {
    EXPECT_NE(peek(prefix(h, n)).status, PeekStatus::complete) << n;
  }
  // A handshake header claiming 16 MiB is refused as soon as it is seen.
  EXPECT_EQ(peek(Bytes{0x16, 0x03, 0x01, 0x00, 0x04, 0x01, 0xff, 0xff, 0xff}).status,
            PeekStatus::malformed);
}

TEST(PeekClientHello, TruncatedAtEveryLengthNeverCompletes) {
  const Bytes a = openssl_client_hello({"trunc.example", {"h2"}, 0});
  const Bytes b = frame(handshake_bytes(a), 50);
  for (const Bytes* h : {&a, &b}) {
    for (std::size_t n = 0; n < h->size(); ++n) {
      EXPECT_EQ(peek(prefix(*h, n)).status, PeekStatus::need_more) << n;
    }
  }
}

struct CorruptRow {
  const char* name;
  std::size_t Offsets::*field;
  int delta;
  bool two_bytes;
  PeekStatus expected;
};

void PrintTo(const CorruptRow& row, std::ostream* os) {
  *os << row.name;
}

class CorruptedLength : public testing::TestWithParam<CorruptRow> {};

TEST_P(CorruptedLength, IsRefused) {
  const CorruptRow& row = GetParam();
  Bytes h = default_hello();
  ASSERT_EQ(record_count(h), 1u);
  const Offsets o = locate(h);
  const std::size_t at = o.*row.field;
  ASSERT_NE(at, 0u);
  // Lengths are big-endian; adjust the low byte (+1/-1 never carries for these small values).
  const std::size_t low = row.two_bytes ? at + 1 : at;
  if (row.field == &Offsets::handshake_len) {
    h.at(at + 2) = static_cast<std::uint8_t>(h.at(at + 2) + row.delta);
  } else {
    h.at(low) = static_cast<std::uint8_t>(h.at(low) + row.delta);
  }
  EXPECT_EQ(peek(h).status, row.expected) << row.name;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CorruptedLength,
    testing::Values(
        // A longer handshake length waits for another record; a shorter one leaves bytes over.
        CorruptRow{"handshake_plus", &Offsets::handshake_len, +1, false, PeekStatus::need_more},
        CorruptRow{"handshake_minus", &Offsets::handshake_len, -1, false, PeekStatus::malformed},
        CorruptRow{"session_id_plus", &Offsets::session_id_len, +1, false, PeekStatus::malformed},
        CorruptRow{"session_id_minus", &Offsets::session_id_len, -1, false, PeekStatus::malformed},
        CorruptRow{"suites_plus", &Offsets::suites_len, +1, true, PeekStatus::malformed},
        CorruptRow{"suites_minus", &Offsets::suites_len, -1, true, PeekStatus::malformed},
        CorruptRow{"suites_minus_two", &Offsets::suites_len, -2, true, PeekStatus::malformed},
        CorruptRow{"compression_plus", &Offsets::compression_len, +1, false, PeekStatus::malformed},
        CorruptRow{"compression_minus", &Offsets::compression_len, -1, false,
                   PeekStatus::malformed},
        CorruptRow{"extensions_plus", &Offsets::extensions_len, +1, true, PeekStatus::malformed},
        CorruptRow{"extensions_minus", &Offsets::extensions_len, -1, true, PeekStatus::malformed},
        CorruptRow{"sni_ext_plus", &Offsets::sni_ext_len, +1, true, PeekStatus::malformed},
        CorruptRow{"sni_ext_minus", &Offsets::sni_ext_len, -1, true, PeekStatus::malformed},
        CorruptRow{"sni_list_plus", &Offsets::sni_list_len, +1, true, PeekStatus::malformed},
        CorruptRow{"sni_list_minus", &Offsets::sni_list_len, -1, true, PeekStatus::malformed},
        CorruptRow{"sni_name_plus", &Offsets::sni_name_len, +1, true, PeekStatus::malformed},
        CorruptRow{"sni_name_minus", &Offsets::sni_name_len, -1, true, PeekStatus::malformed},
        CorruptRow{"alpn_list_plus", &Offsets::alpn_list_len, +1, true, PeekStatus::malformed},
        CorruptRow{"alpn_list_minus", &Offsets::alpn_list_len, -1, true, PeekStatus::malformed},
        CorruptRow{"alpn_first_plus", &Offsets::alpn_first_len, +1, false, PeekStatus::malformed},
        CorruptRow{"alpn_first_minus", &Offsets::alpn_first_len, -1, false, PeekStatus::malformed}),
    [](const testing::TestParamInfo<CorruptRow>& row) { return std::string(row.param.name); });

struct CraftedRow {
  const char* name;
  Bytes input;
  PeekStatus expected;
  std::optional<std::string> sni = std::nullopt;
  bool has_ech = false;
};

Bytes with_record_length(Bytes h, std::size_t len) {
  h.at(3) = static_cast<std::uint8_t>(len >> 8);
  h.at(4) = static_cast<std::uint8_t>(len);
  return h;
}

Bytes interleave_alert(const Bytes& hs) {
  const Bytes records = frame(hs, 50);
  Bytes out(records.begin(), records.begin() + 55);
  append(out, Bytes{0x15, 0x03, 0x03, 0x00, 0x02, 0x01, 0x00});
  out.insert(out.end(), records.begin() + 55, records.end());
  return out;
}

std::vector<CraftedRow> crafted_rows() {
  const Bytes real_hs = handshake_bytes(default_hello());
  Parts no_ext;
  no_ext.extensions = std::nullopt;
  Parts bad_ext_len;
  bad_ext_len.extensions = sni_ext("a.example");
  bad_ext_len.extensions_len = bad_ext_len.extensions->size() + 4;
  Parts server_hello;
  server_hello.handshake_type = 2;
  Parts sslv2_version;
  sslv2_version.legacy_version = 0x0200;
  Parts long_session_id;
  long_session_id.session_id_len = 33;
  Parts odd_suites;
  odd_suites.suites = {0x13, 0x01, 0x13};
  Parts no_suites;
  no_suites.suites = {};
  Parts no_compression;
  no_compression.compression = {};
  Parts trailing_message;
  trailing_message.after_hello = {0x01, 0x00, 0x00, 0x00};
  Parts bad_record_version;
  bad_record_version.record_version = 0x0305;
  const std::string name_with_nul("a\0b.example", 11);

  return {
      {"minimal_with_sni", hello_with({sni_ext("a.example")}), PeekStatus::complete, "a.example"},
      {"no_extensions_block", build(no_ext), PeekStatus::complete},
      {"ech_detected", hello_with({sni_ext("public.example"), ext(0xfe0d, {0x00, 0x01})}),
       PeekStatus::complete, "public.example", true},
      {"unknown_extensions_ignored", hello_with({ext(0x7a7a, {}), sni_ext("a.example")}),
       PeekStatus::complete, "a.example"},
      {"ip_literal_sni_returned_raw", hello_with({sni_ext("10.0.0.1")}), PeekStatus::complete,
       "10.0.0.1"},
      {"two_host_names", hello_with({sni_ext({{0, "a.example"}, {0, "b.example"}})}),
       PeekStatus::malformed},
      {"name_type_one", hello_with({sni_ext({{1, "a.example"}})}), PeekStatus::malformed},
      {"host_name_then_other_type", hello_with({sni_ext({{0, "a.example"}, {1, "b"}})}),
       PeekStatus::malformed},
      {"sni_with_nul", hello_with({sni_ext(name_with_nul)}), PeekStatus::malformed},
      {"sni_with_space", hello_with({sni_ext("a b.example")}), PeekStatus::malformed},
      {"sni_with_control", hello_with({sni_ext("a\x01.example")}), PeekStatus::malformed},
      {"sni_with_del", hello_with({sni_ext("a\x7f.example")}), PeekStatus::malformed},
      {"sni_non_ascii",
       hello_with({sni_ext("b\xc3\xbc"
                           "cher.example")}),
       PeekStatus::malformed},
      {"sni_empty_name", hello_with({sni_ext("")}), PeekStatus::malformed},
      {"sni_empty_list", hello_with({sni_ext(std::vector<Name>{})}), PeekStatus::malformed},
      {"sni_empty_extension", hello_with({ext(0x0000, {})}), PeekStatus::malformed},
      {"sni_extension_twice", hello_with({sni_ext("a.example"), sni_ext("b.example")}),
       PeekStatus::malformed},
      {"unknown_extension_twice", hello_with({ext(0x7a7a, {}), ext(0x7a7a, {})}),
       PeekStatus::malformed},
      {"alpn_empty_list", hello_with({alpn_ext({})}), PeekStatus::malformed},
      {"alpn_empty_name", hello_with({alpn_ext({"h2", ""})}), PeekStatus::malformed},
      {"extensions_block_overruns", build(bad_ext_len), PeekStatus::malformed},
      {"server_hello", build(server_hello), PeekStatus::malformed},
      {"legacy_version_major_two", build(sslv2_version), PeekStatus::malformed},
      {"session_id_33_bytes", build(long_session_id), PeekStatus::malformed},
      {"odd_cipher_suites_length", build(odd_suites), PeekStatus::malformed},
      {"no_cipher_suites", build(no_suites), PeekStatus::malformed},
      {"no_compression_methods", build(no_compression), PeekStatus::malformed},
      {"second_message_in_last_record", build(trailing_message), PeekStatus::malformed},
      {"record_version_3_5", build(bad_record_version), PeekStatus::malformed},
      {"zero_length_record", with_record_length(default_hello(), 0), PeekStatus::malformed},
      {"record_over_2_14", with_record_length(default_hello(), 16385), PeekStatus::malformed},
      {"alert_between_fragments", interleave_alert(real_hs), PeekStatus::malformed},
      {"empty_input", {}, PeekStatus::need_more},
      {"one_byte_0x16", {0x16}, PeekStatus::need_more},
      {"http_get",
       Bytes{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1', '\r', '\n'},
       PeekStatus::not_tls},
      {"http_connect_prefix", Bytes{'C', 'O'}, PeekStatus::not_tls},
      {"sslv2_hello", {0x80, 0x2e, 0x01, 0x00, 0x02}, PeekStatus::not_tls},
      {"handshake_type_major_two", {0x16, 0x02, 0x00, 0x00, 0x10}, PeekStatus::not_tls},
      {"application_data_record", {0x17, 0x03, 0x03, 0x00, 0x10}, PeekStatus::not_tls},
  };
}

void PrintTo(const CraftedRow& row, std::ostream* os) {
  *os << row.name;
}

class Crafted : public testing::TestWithParam<CraftedRow> {};

TEST_P(Crafted, Peeks) {
  const CraftedRow& row = GetParam();
  const PeekResult r = peek(row.input);
  ASSERT_EQ(r.status, row.expected);
  if (row.expected != PeekStatus::complete) return;
  EXPECT_EQ(r.hello.sni, row.sni);
  EXPECT_EQ(r.hello.has_ech, row.has_ech);
  EXPECT_EQ(r.record_bytes, row.input.size());
  // Whatever is complete whole is need_more at every strict prefix.
  for (std::size_t n = 0; n < row.input.size(); ++n) {
    ASSERT_EQ(peek(prefix(row.input, n)).status, PeekStatus::need_more) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, Crafted, testing::ValuesIn(crafted_rows()),
                         [](const testing::TestParamInfo<CraftedRow>& row) {
                           return std::string(row.param.name);
                         });

}  // namespace
}  // namespace sandgate::tls
