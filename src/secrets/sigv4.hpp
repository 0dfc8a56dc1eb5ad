#pragma once

// AWS Signature Version 4, the pieces a re-signing gateway needs: parse the Authorization field
// a client signed with, rebuild the canonical request from the request as it will be sent,
// and sign it again with other credentials; the same for the chunks and trailer of an S3
// streaming (aws-chunked) upload. Pure: no clock, no I/O; OpenSSL (SHA-256, HMAC) in the .cpp
// only. Checked against AWS's published test suite (tests/unit/secrets/testdata/sigv4).

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::secrets::sigv4 {

inline constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
// x-amz-content-sha256 values that are not a payload's hash.
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kStreamingPayload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
inline constexpr std::string_view kStreamingPayloadTrailer =
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
inline constexpr std::string_view kStreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER";

// The credential scope: DATE/REGION/SERVICE/aws4_request.
struct Scope {
  std::string date;  // YYYYMMDD
  std::string region;
  std::string service;

  std::string to_string() const;
  bool operator==(const Scope&) const = default;
};

// An Authorization field of SigV4, parsed strictly: the algorithm, then Credential,
// SignedHeaders and Signature (in any order, each once), nothing else.
struct Authorization {
  std::string access_key_id;
  Scope scope;
  std::vector<std::string> signed_headers;  // as listed: lowercase, sorted, no repeats
  std::string signature;                    // 64 lowercase hex digits
};
std::optional<Authorization> parse_authorization(std::string_view value);
std::string format_authorization(std::string_view access_key_id, const Scope& scope,
                                 std::span<const std::string> signed_headers,
                                 std::string_view signature);

// How the canonical URI is made from the path as sent.
enum class PathRule {
  // S3: the path as sent, signed once (bytes outside the unreserved set, '/' and '%' encoded).
  s3,
  // Every other service: dot segments and empty segments removed, then every byte outside the
  // unreserved set and '/' encoded, so a path sent encoded is signed encoded twice.
  standard,
};

struct Field {
  std::string_view name;  // any case
  std::string_view value;
};

struct Request {
  std::string_view method;
  std::string_view target;  // origin-form path and query, as sent
  std::span<const Field> fields;
};

// The canonical request: method, canonical URI, canonical query (each name and value decoded
// and encoded again, sorted), the signed fields (lowercase names, values trimmed with inner
// runs of spaces made one, repeated fields joined with ','), the signed names, the payload
// hash. nullopt when a signed field is missing from the request.
std::optional<std::string> canonical_request(const Request& request,
                                             std::span<const std::string> signed_headers,
                                             std::string_view payload_hash, PathRule rule);

std::string string_to_sign(std::string_view amz_date, const Scope& scope,
                           std::string_view canonical_request);

// The key HMAC chains from the secret and the scope. Wiped when destroyed.
class SigningKey {
 public:
  SigningKey(std::string_view secret_access_key, const Scope& scope);
  ~SigningKey();
  SigningKey(const SigningKey&) = delete;
  SigningKey& operator=(const SigningKey&) = delete;

  // Lowercase hex of HMAC-SHA256(key, text).
  std::string sign(std::string_view text) const;

 private:
  std::array<unsigned char, 32> key_{};
};

// aws-chunked uploads: each chunk's signature chains from the one before (the first from the
// request's), over the chunk's data; the trailer's over its lines.
std::string chunk_string_to_sign(std::string_view amz_date, const Scope& scope,
                                 std::string_view previous_signature, std::string_view chunk_data);
std::string trailer_string_to_sign(std::string_view amz_date, const Scope& scope,
                                   std::string_view previous_signature,
                                   std::string_view trailer_lines);

// S3 (and its variants) signs the path once; every other service by the standard rule.
PathRule path_rule_for(std::string_view service);

// Real credentials to sign with. `session_token` empty for a long-term key.
struct Credentials {
  std::string_view access_key_id;
  std::string_view secret_access_key;
  std::string_view session_token;
};

// The Authorization of a request sandgate itself sends (a provider's call to an AWS API),
// signed over every field of `request` (lowercase names, each once; host and x-amz-date among
// them) in `scope` at `amz_date` (YYYYMMDDTHHMMSSZ).
std::string authorization_for(const Request& request, std::string_view payload_hash,
                              const Scope& scope, std::string_view amz_date,
                              const Credentials& keys);

// AWS credentials as one token of the credential store: "KEY_ID\nSECRET\nSESSION_TOKEN" (the
// last line empty for a long-term key). Unpacked, the views point into `packed`; nullopt when
// it is not three such lines (a key id or secret empty, or any byte that is not visible ASCII).
std::string pack_credentials(const Credentials& credentials);
std::optional<Credentials> unpack_credentials(std::string_view packed);

// Why a request cannot be signed again.
enum class ResignRefusal {
  not_signed,   // no Authorization field, or not SigV4 (AWS4-HMAC-SHA256), or a presigned URL
                // made with other keys than the placeholder's: nothing of sandgate's to sign
  malformed,    // an Authorization that does not parse, or X-Amz-Date missing, invalid or not
                // of the credential scope's day
  presigned,    // a presigned URL (the signature in the query) made with the placeholder keys
  foreign_key,  // signed with a key id other than this sandbox's placeholder
  unsupported_payload,  // an x-amz-content-sha256 this signer cannot sign again (SigV4a)
  missing_field,        // a field the client signed is not in the request
};
std::string_view refusal_name(ResignRefusal r);

// What to send instead of what the client signed: these fields set (replacing any of the same
// name), X-Amz-Security-Token removed when `security_token` is empty.
struct Resigned {
  std::string authorization;
  std::string security_token;
  // For aws-chunked bodies: each chunk's signature chains from `signature`, in this scope and
  // at this time.
  std::string signature;
  Scope scope;
  std::string amz_date;
};

// Signs `request` (the request as it will be sent, with the client's Authorization in it)
// again with `real`, for the fields the client signed (plus X-Amz-Security-Token when `real`
// has a session token, minus it when not), in the client's scope and at its X-Amz-Date. Fields
// a proxy never passes on as they came (Expect, Transfer-Encoding and the other hop-by-hop
// fields, which curl signs when it is given them) are not signed again.
// `payload_hash`: x-amz-content-sha256's value when the request carries one, else the hex
// SHA-256 of the body. Refused when the client did not sign with `placeholder_key_id`.
struct ResignResult {
  std::optional<Resigned> resigned;
  ResignRefusal refusal = ResignRefusal::not_signed;  // when !resigned
};
ResignResult resign(const Request& request, std::string_view payload_hash,
                    std::string_view placeholder_key_id, const Credentials& real);

}  // namespace sandgate::secrets::sigv4
