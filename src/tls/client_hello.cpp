#include "tls/client_hello.hpp"

#include <algorithm>

namespace sandgate::tls {

namespace {

constexpr std::uint8_t kHandshakeRecord = 22;
constexpr std::uint8_t kClientHello = 1;
constexpr std::size_t kRecordHeader = 5;
constexpr std::size_t kHandshakeHeader = 4;
constexpr std::size_t kMaxFragment = 16384;  // RFC 8446 §5.1: TLSPlaintext.length <= 2^14

constexpr std::uint16_t kExtServerName = 0x0000;
constexpr std::uint16_t kExtAlpn = 0x0010;
constexpr std::uint16_t kExtEch = 0xfe0d;

// Bounds-checked big-endian reads over a span. Every read either succeeds completely or leaves
// the reader unchanged and returns false, so a length that overruns its container is malformed.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> data) : data_(data) {}

  [[nodiscard]] bool empty() const { return pos_ == data_.size(); }
  [[nodiscard]] std::size_t remaining() const { return data_.size() - pos_; }

  bool u8(std::uint8_t& v) {
    if (remaining() < 1) return false;
    v = data_[pos_++];
    return true;
  }
  bool u16(std::uint16_t& v) {
    if (remaining() < 2) return false;
    v = static_cast<std::uint16_t>((data_[pos_] << 8) | data_[pos_ + 1]);
    pos_ += 2;
    return true;
  }
  bool bytes(std::size_t n, std::span<const std::uint8_t>& out) {
    if (remaining() < n) return false;
    out = data_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  bool skip(std::size_t n) {
    std::span<const std::uint8_t> ignored;
    return bytes(n, ignored);
  }

 private:
  std::span<const std::uint8_t> data_;
  std::size_t pos_ = 0;
};

// RFC 6066 §3. Only host_name (type 0) is defined; anything else, an empty list, an empty name
// or a second host_name is refused rather than guessed at, since the SNI drives the decision.
bool parse_server_name(std::span<const std::uint8_t> ext, ClientHelloInfo& info) {
  Reader r(ext);
  std::uint16_t list_len = 0;
  if (!r.u16(list_len) || list_len == 0 || list_len != r.remaining()) return false;
  while (!r.empty()) {
    std::uint8_t name_type = 0;
    std::uint16_t name_len = 0;
    std::span<const std::uint8_t> name;
    if (!r.u8(name_type) || name_type != 0) return false;
    if (!r.u16(name_len) || name_len == 0 || !r.bytes(name_len, name)) return false;
    if (info.sni) return false;
    const bool printable =
        std::all_of(name.begin(), name.end(), [](std::uint8_t c) { return c > 0x20 && c < 0x7f; });
    if (!printable) return false;
    info.sni.emplace(name.begin(), name.end());
  }
  return true;
}

// RFC 7301 §3.1: a non-empty list of non-empty protocol names.
bool parse_alpn(std::span<const std::uint8_t> ext, ClientHelloInfo& info) {
  Reader r(ext);
  std::uint16_t list_len = 0;
  if (!r.u16(list_len) || list_len == 0 || list_len != r.remaining()) return false;
  while (!r.empty()) {
    std::uint8_t len = 0;
    std::span<const std::uint8_t> name;
    if (!r.u8(len) || len == 0 || !r.bytes(len, name)) return false;
    info.alpn.emplace_back(name.begin(), name.end());
  }
  return true;
}

bool parse_extensions(Reader& r, ClientHelloInfo& info) {
  std::uint16_t block_len = 0;
  if (!r.u16(block_len) || block_len != r.remaining()) return false;
  std::vector<std::uint16_t> seen;
  while (!r.empty()) {
    std::uint16_t type = 0;
    std::uint16_t len = 0;
    std::span<const std::uint8_t> body;
    if (!r.u16(type) || !r.u16(len) || !r.bytes(len, body)) return false;
    seen.push_back(type);
    switch (type) {
      case kExtServerName:
        if (!parse_server_name(body, info)) return false;
        break;
      case kExtAlpn:
        if (!parse_alpn(body, info)) return false;
        break;
      case kExtEch:
        info.has_ech = true;
        break;
      default:
        break;
    }
  }
  // RFC 8446 §4.2: no extension type may appear twice (two SNI extensions would let the
  // peeker and the upstream disagree on which one counts).
  std::sort(seen.begin(), seen.end());
  return std::adjacent_find(seen.begin(), seen.end()) == seen.end();
}

// The ClientHello body after the 4-byte handshake header (RFC 8446 §4.1.2, RFC 5246 §7.4.1.2).
bool parse_client_hello_body(std::span<const std::uint8_t> body, ClientHelloInfo& info) {
  Reader r(body);
  std::uint16_t legacy_version = 0;
  if (!r.u16(legacy_version) || (legacy_version >> 8) != 3) return false;
  if (!r.skip(32)) return false;  // random
  std::uint8_t session_id_len = 0;
  if (!r.u8(session_id_len) || session_id_len > 32 || !r.skip(session_id_len)) return false;
  std::uint16_t suites_len = 0;
  if (!r.u16(suites_len) || suites_len == 0 || suites_len % 2 != 0 || !r.skip(suites_len)) {
    return false;
  }
  std::uint8_t compression_len = 0;
  if (!r.u8(compression_len) || compression_len == 0 || !r.skip(compression_len)) return false;
  if (r.empty()) return true;  // pre-TLS-1.2 hellos may omit the extensions block
  return parse_extensions(r, info);
}

PeekResult with_status(PeekStatus s) {
  PeekResult r;
  r.status = s;
  return r;
}
PeekResult need_more(std::size_t hint) {
  PeekResult r = with_status(PeekStatus::need_more);
  r.bytes_needed_hint = std::max<std::size_t>(hint, 1);
  return r;
}

// Checks the record header bytes that have arrived; `first` says whether this is the record that
// decides not_tls. Returns need_more when the bytes seen so far are fine.
PeekStatus check_record_header_prefix(std::span<const std::uint8_t> hdr, bool first) {
  const PeekStatus foreign = first ? PeekStatus::not_tls : PeekStatus::malformed;
  if (hdr.size() >= 1 && hdr[0] != kHandshakeRecord) return foreign;
  if (hdr.size() >= 2 && hdr[1] != 3) return foreign;
  if (hdr.size() >= 3 && hdr[2] > 4) return PeekStatus::malformed;  // SSL 3.0 .. TLS 1.3
  return PeekStatus::need_more;
}

}  // namespace

bool looks_like_tls(std::span<const std::uint8_t> data) {
  return data.size() >= 2 && data[0] == kHandshakeRecord && data[1] == 3;
}

PeekResult peek_client_hello(std::span<const std::uint8_t> data) {
  // Handshake bytes reassembled from the record fragments seen so far. Bounded by
  // kMaxClientHelloBytes because every fragment is checked against the cap before it is copied.
  std::vector<std::uint8_t> message;
  std::optional<std::size_t> message_len;  // 4 + the handshake length, once the header is in
  std::size_t pos = 0;
  for (bool first = true;; first = false) {
    const std::span<const std::uint8_t> rest = data.subspan(pos);
    if (rest.size() < kRecordHeader) {
      if (const PeekStatus s = check_record_header_prefix(rest, first);
          s != PeekStatus::need_more) {
        return with_status(s);
      }
      if (pos + kRecordHeader > kMaxClientHelloBytes) return with_status(PeekStatus::malformed);
      return need_more(kRecordHeader - rest.size());
    }
    if (const PeekStatus s = check_record_header_prefix(rest.first(3), first);
        s != PeekStatus::need_more) {
      return with_status(s);
    }
    const auto fragment_len = static_cast<std::size_t>((rest[3] << 8) | rest[4]);
    // RFC 8446 §5.1: no zero-length handshake fragments, none above 2^14.
    if (fragment_len == 0 || fragment_len > kMaxFragment) return with_status(PeekStatus::malformed);
    if (pos + kRecordHeader + fragment_len > kMaxClientHelloBytes) {
      return with_status(PeekStatus::malformed);
    }
    const std::span<const std::uint8_t> fragment =
        rest.subspan(kRecordHeader, std::min(fragment_len, rest.size() - kRecordHeader));
    message.insert(message.end(), fragment.begin(), fragment.end());

    if (!message_len && message.size() >= kHandshakeHeader) {
      if (message[0] != kClientHello) return with_status(PeekStatus::malformed);
      message_len = kHandshakeHeader +
                    ((std::size_t{message[1]} << 16) | (std::size_t{message[2]} << 8) | message[3]);
      if (*message_len > kMaxClientHelloBytes) return with_status(PeekStatus::malformed);
    }
    // The ClientHello must end exactly at a record boundary: trailing handshake bytes in its
    // last record would be a second message the upstream sees and we did not check.
    const std::size_t framed_len = message.size() - fragment.size() + fragment_len;
    if (message_len && framed_len > *message_len) return with_status(PeekStatus::malformed);
    if (fragment.size() < fragment_len) return need_more(fragment_len - fragment.size());

    pos += kRecordHeader + fragment_len;
    if (message_len && message.size() == *message_len) {
      PeekResult result = with_status(PeekStatus::complete);
      result.record_bytes = pos;
      const std::span<const std::uint8_t> body =
          std::span<const std::uint8_t>(message).subspan(kHandshakeHeader);
      if (!parse_client_hello_body(body, result.hello)) return with_status(PeekStatus::malformed);
      return result;
    }
  }
}

}  // namespace sandgate::tls
