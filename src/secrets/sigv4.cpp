#include "secrets/sigv4.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <utility>

#include "common/ascii.hpp"
#include "common/hop_by_hop.hpp"
#include "secrets/encoding.hpp"

namespace sandgate::secrets::sigv4 {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string hex(const unsigned char* data, std::size_t size) {
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 0xf];
  }
  return out;
}

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

// Percent-encodes every byte outside the unreserved set and `keep`, in uppercase hex.
std::string encode(std::string_view s, std::string_view keep) {
  constexpr char kUpper[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (unreserved(c) || keep.find(ch) != std::string_view::npos) {
      out += ch;
    } else {
      out += '%';
      out += kUpper[c >> 4];
      out += kUpper[c & 0xf];
    }
  }
  return out;
}

// Percent-decodes; a '%' not followed by two hex digits stays as it is.
std::string decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = hex_value(s[i + 1]);
      const int lo = hex_value(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// RFC 3986 remove_dot_segments, also dropping empty segments, as AWS normalises a path (the
// leading '/' kept, a trailing one kept when anything is left).
std::string normalized_path(std::string_view path) {
  std::vector<std::string_view> kept;
  std::size_t at = 0;
  while (at <= path.size()) {
    const std::size_t end = std::min(path.find('/', at), path.size());
    const std::string_view segment = path.substr(at, end - at);
    if (segment == "..") {
      if (!kept.empty()) kept.pop_back();
    } else if (!segment.empty() && segment != ".") {
      kept.push_back(segment);
    }
    at = end + 1;
  }
  std::string out = "/";
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (i > 0) out += '/';
    out += kept[i];
  }
  if (!kept.empty() && path.ends_with('/')) out += '/';
  return out;
}

std::string canonical_uri(std::string_view path, PathRule rule) {
  if (path.empty()) return "/";
  if (rule == PathRule::s3) return encode(path, "/%");
  return encode(normalized_path(path), "/");
}

std::string canonical_query(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> pairs;
  std::size_t at = 0;
  while (at < query.size()) {
    const std::size_t end = std::min(query.find('&', at), query.size());
    const std::string_view pair = query.substr(at, end - at);
    if (!pair.empty()) {
      const std::size_t eq = pair.find('=');
      const std::string_view name = pair.substr(0, eq);
      const std::string_view value =
          eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
      pairs.emplace_back(encode(decode(name), ""), encode(decode(value), ""));
    }
    at = end + 1;
  }
  std::sort(pairs.begin(), pairs.end());
  std::string out;
  for (const auto& [name, value] : pairs) {
    if (!out.empty()) out += '&';
    out += name;
    out += '=';
    out += value;
  }
  return out;
}

// A field value as SigV4 signs it: trimmed, each run of spaces and tabs made one space.
void append_trimmed(std::string& out, std::string_view value) {
  bool space = false;
  bool started = false;
  for (const char c : value) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      space = started;
      continue;
    }
    if (space) out += ' ';
    space = false;
    started = true;
    out += c;
  }
}

bool is_lower_hex(std::string_view s, std::size_t size) {
  return s.size() == size && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The signed field names as SignedHeaders and the canonical request list them.
void append_joined(std::string& out, std::span<const std::string> names) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ';';
    out += names[i];
  }
}

// Lines joined with '\n', as every SigV4 string to sign is written.
std::string joined_lines(std::initializer_list<std::string_view> lines) {
  std::string out;
  for (const std::string_view line : lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

std::array<unsigned char, 32> hmac(std::span<const unsigned char> key, std::string_view text) {
  return hmac_sha256({reinterpret_cast<const char*>(key.data()), key.size()}, text);
}

}  // namespace

std::string Scope::to_string() const {
  return date + "/" + region + "/" + service + "/aws4_request";
}

std::optional<Authorization> parse_authorization(std::string_view value) {
  value = trim_ows(value);
  if (!value.starts_with(kAlgorithm) || value.size() == kAlgorithm.size() ||
      value[kAlgorithm.size()] != ' ') {
    return std::nullopt;
  }
  value.remove_prefix(kAlgorithm.size());
  Authorization out;
  bool credential = false;
  bool signed_headers = false;
  bool signature = false;
  std::size_t at = 0;
  while (at <= value.size()) {
    const std::size_t end = std::min(value.find(',', at), value.size());
    const std::string_view part = trim_ows(value.substr(at, end - at));
    at = end + 1;
    const std::size_t eq = part.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view name = part.substr(0, eq);
    const std::string_view v = part.substr(eq + 1);
    if (name == "Credential" && !credential) {
      credential = true;
      // AKID/DATE/REGION/SERVICE/aws4_request; the key id itself holds no '/'.
      std::vector<std::string_view> pieces;
      std::size_t p = 0;
      while (p <= v.size()) {
        const std::size_t slash = std::min(v.find('/', p), v.size());
        pieces.push_back(v.substr(p, slash - p));
        p = slash + 1;
      }
      if (pieces.size() != 5 || pieces[4] != "aws4_request" || pieces[1].size() != 8 ||
          !std::all_of(pieces[1].begin(), pieces[1].end(),
                       [](char c) { return c >= '0' && c <= '9'; })) {
        return std::nullopt;
      }
      for (const std::string_view piece : pieces) {
        if (piece.empty()) return std::nullopt;
      }
      out.access_key_id = pieces[0];
      out.scope = {std::string(pieces[1]), std::string(pieces[2]), std::string(pieces[3])};
    } else if (name == "SignedHeaders" && !signed_headers) {
      signed_headers = true;
      std::size_t p = 0;
      while (p <= v.size()) {
        const std::size_t semi = std::min(v.find(';', p), v.size());
        const std::string_view header = v.substr(p, semi - p);
        if (header.empty() || std::any_of(header.begin(), header.end(), [](char c) {
              return (c >= 'A' && c <= 'Z') || c == ' ' || c == '\t';
            })) {
          return std::nullopt;
        }
        if (!out.signed_headers.empty() && out.signed_headers.back() >= header) {
          return std::nullopt;  // not sorted, or repeated
        }
        out.signed_headers.emplace_back(header);
        p = semi + 1;
      }
    } else if (name == "Signature" && !signature) {
      signature = true;
      if (!is_lower_hex(v, 64)) return std::nullopt;
      out.signature = v;
    } else {
      return std::nullopt;
    }
  }
  if (!credential || !signed_headers || !signature) return std::nullopt;
  return out;
}

std::string format_authorization(std::string_view access_key_id, const Scope& scope,
                                 std::span<const std::string> signed_headers,
                                 std::string_view signature) {
  std::string out(kAlgorithm);
  out += " Credential=";
  out += access_key_id;
  out += '/';
  out += scope.to_string();
  out += ", SignedHeaders=";
  append_joined(out, signed_headers);
  out += ", Signature=";
  out += signature;
  return out;
}

std::optional<std::string> canonical_request(const Request& request,
                                             std::span<const std::string> signed_headers,
                                             std::string_view payload_hash, PathRule rule) {
  const std::size_t question = request.target.find('?');
  const std::string_view path = request.target.substr(0, question);
  const std::string_view query =
      question == std::string_view::npos ? std::string_view() : request.target.substr(question + 1);
  std::string out(request.method);
  out += '\n';
  out += canonical_uri(path, rule);
  out += '\n';
  out += canonical_query(query);
  out += '\n';
  for (const std::string& name : signed_headers) {
    out += name;
    out += ':';
    bool found = false;
    for (const Field& f : request.fields) {
      if (!iequals_ascii(f.name, name)) continue;
      if (found) out += ',';
      found = true;
      append_trimmed(out, f.value);
    }
    if (!found) return std::nullopt;
    out += '\n';
  }
  out += '\n';
  append_joined(out, signed_headers);
  out += '\n';
  out += payload_hash;
  return out;
}

std::string string_to_sign(std::string_view amz_date, const Scope& scope,
                           std::string_view canonical_request) {
  return joined_lines({kAlgorithm, amz_date, scope.to_string(), sha256_hex(canonical_request)});
}

SigningKey::SigningKey(std::string_view secret_access_key, const Scope& scope) {
  std::string seed = "AWS4";
  seed += secret_access_key;
  auto k = hmac({reinterpret_cast<const unsigned char*>(seed.data()), seed.size()}, scope.date);
  OPENSSL_cleanse(seed.data(), seed.size());
  for (const std::string* part : {&scope.region, &scope.service}) k = hmac(k, *part);
  key_ = hmac(k, "aws4_request");
  OPENSSL_cleanse(k.data(), k.size());
}

SigningKey::~SigningKey() {
  OPENSSL_cleanse(key_.data(), key_.size());
}

std::string SigningKey::sign(std::string_view text) const {
  const auto mac = hmac(key_, text);
  return hex(mac.data(), mac.size());
}

std::string chunk_string_to_sign(std::string_view amz_date, const Scope& scope,
                                 std::string_view previous_signature, std::string_view chunk_data) {
  static const std::string kEmptyHash = sha256_hex({});
  return joined_lines({"AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope.to_string(), previous_signature,
                       kEmptyHash, sha256_hex(chunk_data)});
}

std::string trailer_string_to_sign(std::string_view amz_date, const Scope& scope,
                                   std::string_view previous_signature,
                                   std::string_view trailer_lines) {
  return joined_lines({"AWS4-HMAC-SHA256-TRAILER", amz_date, scope.to_string(), previous_signature,
                       sha256_hex(trailer_lines)});
}

PathRule path_rule_for(std::string_view service) {
  return service == "s3" || service == "s3-outposts" || service == "s3express" ? PathRule::s3
                                                                               : PathRule::standard;
}

std::string_view refusal_name(ResignRefusal r) {
  switch (r) {
    case ResignRefusal::not_signed:
      return "not_signed";
    case ResignRefusal::malformed:
      return "malformed";
    case ResignRefusal::presigned:
      return "presigned";
    case ResignRefusal::foreign_key:
      return "foreign_key";
    case ResignRefusal::unsupported_payload:
      return "unsupported_payload";
    case ResignRefusal::missing_field:
      return "missing_field";
  }
  return "unknown";
}

namespace {

std::optional<std::string_view> field(const Request& request, std::string_view name) {
  for (const Field& f : request.fields) {
    if (iequals_ascii(f.name, name)) return f.value;
  }
  return std::nullopt;
}

// A presigned URL's X-Amz-Credential ("" when it has only X-Amz-Signature); nullopt when the
// query holds neither.
std::optional<std::string> presigned_credential(std::string_view target) {
  const std::size_t question = target.find('?');
  if (question == std::string_view::npos) return std::nullopt;
  const std::string query = decode(target.substr(question + 1));
  std::optional<std::string> out;
  std::size_t at = 0;
  while (at < query.size()) {
    const std::size_t end = std::min(query.find('&', at), query.size());
    const std::string_view pair = std::string_view(query).substr(at, end - at);
    const std::size_t equals = std::min(pair.find('='), pair.size());
    const std::string_view name = pair.substr(0, equals);
    if (iequals_ascii(name, "X-Amz-Credential")) {
      out = std::string(pair.substr(std::min(equals + 1, pair.size())));
    } else if (iequals_ascii(name, "X-Amz-Signature") && !out) {
      out = std::string();
    }
    at = end + 1;
  }
  return out;
}

// YYYYMMDDTHHMMSSZ
bool valid_amz_date(std::string_view d) {
  if (d.size() != 16 || d[8] != 'T' || d[15] != 'Z') return false;
  for (std::size_t i = 0; i < 15; ++i) {
    if (i != 8 && (d[i] < '0' || d[i] > '9')) return false;
  }
  return true;
}

// The signing key of `secret` in `scope`. It changes once a day per key, region and service,
// and its derivation is four HMACs: each thread keeps the last few it derived, rather than
// deriving one per request signed again.
const SigningKey& signing_key(std::string_view secret, const Scope& scope) {
  struct Derived {
    std::string secret;
    Scope scope;
    std::unique_ptr<SigningKey> key;
    ~Derived() { OPENSSL_cleanse(secret.data(), secret.size()); }
  };
  thread_local std::array<Derived, 4> derived;
  thread_local std::size_t next = 0;
  for (const Derived& d : derived) {
    if (d.key != nullptr && d.scope == scope && d.secret == secret) return *d.key;
  }
  Derived& slot = derived[next++ % derived.size()];
  OPENSSL_cleanse(slot.secret.data(), slot.secret.size());
  slot.secret = secret;
  slot.scope = scope;
  slot.key = std::make_unique<SigningKey>(secret, scope);
  return *slot.key;
}

bool resignable_payload(std::string_view hash) {
  return is_lower_hex(hash, 64) || hash == kUnsignedPayload || hash == kStreamingPayload ||
         hash == kStreamingPayloadTrailer || hash == kStreamingUnsignedTrailer;
}

}  // namespace

std::string authorization_for(const Request& request, std::string_view payload_hash,
                              const Scope& scope, std::string_view amz_date,
                              const Credentials& keys) {
  std::vector<std::string> names;
  for (const Field& f : request.fields) names.emplace_back(f.name);
  std::sort(names.begin(), names.end());
  const auto canonical =
      canonical_request(request, names, payload_hash, path_rule_for(scope.service));
  const std::string signature =
      SigningKey(keys.secret_access_key, scope).sign(string_to_sign(amz_date, scope, *canonical));
  return format_authorization(keys.access_key_id, scope, names, signature);
}

std::string pack_credentials(const Credentials& credentials) {
  std::string out;
  out.reserve(credentials.access_key_id.size() + credentials.secret_access_key.size() +
              credentials.session_token.size() + 2);
  out.append(credentials.access_key_id).append(1, '\n');
  out.append(credentials.secret_access_key).append(1, '\n');
  out.append(credentials.session_token);
  return out;
}

std::optional<Credentials> unpack_credentials(std::string_view packed) {
  const std::size_t first = packed.find('\n');
  if (first == std::string_view::npos) return std::nullopt;
  const std::size_t second = packed.find('\n', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  Credentials out;
  out.access_key_id = packed.substr(0, first);
  out.secret_access_key = packed.substr(first + 1, second - first - 1);
  out.session_token = packed.substr(second + 1);
  const auto visible = [](std::string_view text) {
    return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c <= '~'; });
  };
  if (out.access_key_id.empty() || out.secret_access_key.empty() || !visible(out.access_key_id) ||
      !visible(out.secret_access_key) || !visible(out.session_token)) {
    return std::nullopt;
  }
  return out;
}

ResignResult resign(const Request& request, std::string_view payload_hash,
                    std::string_view placeholder_key_id, const Credentials& real) {
  ResignResult out;
  const auto refuse = [&](ResignRefusal r) {
    out.refusal = r;
    return out;
  };
  // A presigned URL made with the placeholder keys would need its query signed again; one made
  // with other keys (handed to the agent by someone who holds them) is not sandgate's to sign.
  if (const auto credential = presigned_credential(request.target)) {
    const bool ours = credential->size() > placeholder_key_id.size() &&
                      credential->starts_with(placeholder_key_id) &&
                      (*credential)[placeholder_key_id.size()] == '/';
    return refuse(ours ? ResignRefusal::presigned : ResignRefusal::not_signed);
  }
  const auto authorization = field(request, "authorization");
  if (!authorization || !trim_ows(*authorization).starts_with(kAlgorithm)) {
    return refuse(ResignRefusal::not_signed);
  }
  const auto parsed = parse_authorization(*authorization);
  if (!parsed) return refuse(ResignRefusal::malformed);
  if (parsed->access_key_id != placeholder_key_id) return refuse(ResignRefusal::foreign_key);
  const auto amz_date = field(request, "x-amz-date");
  if (!amz_date || !valid_amz_date(*amz_date) || amz_date->substr(0, 8) != parsed->scope.date) {
    return refuse(ResignRefusal::malformed);
  }
  if (!resignable_payload(payload_hash)) return refuse(ResignRefusal::unsupported_payload);

  // The fields as they will be sent: the client's, its session token (a placeholder, if any)
  // replaced by the real one or dropped. Authorization is never signed.
  std::vector<Field> fields;
  for (const Field& f : request.fields) {
    if (!iequals_ascii(f.name, "x-amz-security-token")) fields.push_back(f);
  }
  std::vector<std::string> signed_headers;
  for (const std::string& name : parsed->signed_headers) {
    if (name != "x-amz-security-token" && name != "authorization" && !hop_by_hop_field(name)) {
      signed_headers.push_back(name);
    }
  }
  if (!real.session_token.empty()) {
    fields.push_back({"x-amz-security-token", real.session_token});
    signed_headers.insert(
        std::lower_bound(signed_headers.begin(), signed_headers.end(), "x-amz-security-token"),
        "x-amz-security-token");
  }
  const Request sent{request.method, request.target, fields};
  const auto canonical =
      canonical_request(sent, signed_headers, payload_hash, path_rule_for(parsed->scope.service));
  if (!canonical) return refuse(ResignRefusal::missing_field);
  Resigned r;
  r.signature = signing_key(real.secret_access_key, parsed->scope)
                    .sign(string_to_sign(*amz_date, parsed->scope, *canonical));
  r.authorization =
      format_authorization(real.access_key_id, parsed->scope, signed_headers, r.signature);
  r.security_token = real.session_token;
  r.scope = parsed->scope;
  r.amz_date = *amz_date;
  out.resigned = std::move(r);
  return out;
}

}  // namespace sandgate::secrets::sigv4
