#include "common/errc.hpp"

#include <string>

namespace sandgate {

namespace {

struct CodeInfo {
  std::string_view name;
  unsigned status;
  bool retryable;
  Side side;
};

CodeInfo info(Errc e) {
  switch (e) {
    case Errc::ok:
      return {"OK", 200, false, Side::internal};
    case Errc::network_denied:
      return {"SANDBOX_NETWORK_DENIED", 403, false, Side::client};
    case Errc::proxy_auth_required:
      return {"PROXY_AUTH_REQUIRED", 407, false, Side::client};
    case Errc::too_many_connections:
      return {"TOO_MANY_CONNECTIONS", 429, true, Side::client};
    case Errc::malformed_request:
      return {"MALFORMED_REQUEST", 400, false, Side::client};
    case Errc::request_line_too_long:
      return {"REQUEST_LINE_TOO_LONG", 400, false, Side::client};
    case Errc::headers_too_large:
      return {"REQUEST_HEADERS_TOO_LARGE", 400, false, Side::client};
    case Errc::content_length_with_te:
      return {"CONTENT_LENGTH_WITH_TRANSFER_ENCODING", 400, false, Side::client};
    case Errc::conflicting_length:
      return {"CONFLICTING_CONTENT_LENGTH", 400, false, Side::client};
    case Errc::bad_transfer_encoding:
      return {"UNSUPPORTED_TRANSFER_ENCODING", 400, false, Side::client};
    case Errc::obs_fold:
      return {"OBSOLETE_LINE_FOLDING", 400, false, Side::client};
    case Errc::invalid_header:
      return {"INVALID_HEADER", 400, false, Side::client};
    case Errc::host_mismatch:
      return {"HOST_MISMATCH", 400, false, Side::client};
    case Errc::unsupported_target:
      return {"UNSUPPORTED_REQUEST_TARGET", 400, false, Side::client};
    case Errc::header_timeout:
      return {"REQUEST_HEADER_TIMEOUT", 408, true, Side::client};
    case Errc::upstream_dns_failed:
      return {"UPSTREAM_DNS_FAILED", 502, true, Side::upstream};
    case Errc::upstream_connect_failed:
      return {"UPSTREAM_CONNECT_FAILED", 502, true, Side::upstream};
    case Errc::upstream_tls_failed:
      return {"UPSTREAM_TLS_FAILED", 502, false, Side::upstream};
    case Errc::upstream_timeout:
      return {"UPSTREAM_TIMEOUT", 504, true, Side::upstream};
    case Errc::upstream_protocol_error:
      return {"UPSTREAM_PROTOCOL_ERROR", 502, false, Side::upstream};
    case Errc::credential_unavailable:
      return {"CREDENTIAL_UNAVAILABLE", 503, true, Side::internal};
    case Errc::too_many_dns_queries:
      return {"TOO_MANY_DNS_QUERIES", 429, true, Side::client};
    case Errc::misdirected_request:
      return {"MISDIRECTED_REQUEST", 421, false, Side::client};
    case Errc::client_tls_failed:
      return {"CLIENT_TLS_FAILED", 400, false, Side::client};
    case Errc::too_many_leaf_mints:
      return {"TOO_MANY_LEAF_MINTS", 429, true, Side::client};
    case Errc::local_resources_exhausted:
      return {"LOCAL_RESOURCES_EXHAUSTED", 503, true, Side::internal};
    case Errc::http2_connection_error:
      return {"HTTP2_CONNECTION_ERROR", 400, false, Side::client};
    case Errc::upstream_encoding_unsupported:
      return {"UPSTREAM_ENCODING_UNSUPPORTED", 502, false, Side::upstream};
    case Errc::request_body_too_large:
      return {"REQUEST_BODY_TOO_LARGE", 413, false, Side::client};
    case Errc::signature_not_resignable:
      return {"SIGNATURE_NOT_RESIGNABLE", 400, false, Side::client};
    case Errc::internal_error:
      return {"INTERNAL_ERROR", 500, true, Side::internal};
  }
  return {"INTERNAL_ERROR", 500, true, Side::internal};
}

class Category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "sandgate"; }
  std::string message(int ev) const override {
    return std::string(code_name(static_cast<Errc>(ev)));
  }
};

}  // namespace

std::string_view code_name(Errc e) {
  return info(e).name;
}
unsigned http_status(Errc e) {
  return info(e).status;
}
bool retryable(Errc e) {
  return info(e).retryable;
}
Side side_of(Errc e) {
  return info(e).side;
}

const std::error_category& sandgate_category() {
  static const Category category;
  return category;
}

}  // namespace sandgate
