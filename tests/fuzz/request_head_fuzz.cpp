// libFuzzer target for http::find_head_end and http::parse_request_head. Besides "no crash,
// no sanitizer report" it checks invariants the proxy relies on, and that a head Beast
// re-serialises parses again to the same routing fields (no parse differential with ourselves).
#include <boost/beast/http/write.hpp>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "http/request_head.hpp"

namespace {

namespace bh = boost::beast::http;
using sandgate::http::RequestHead;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_parsed(const RequestHead& r, const sandgate::http::HeadLimits& limits) {
  check(!(r.chunked && r.content_length));
  check(r.has_body == (r.chunked || r.content_length.value_or(0) > 0));
  check(r.port != 0);
  switch (r.form) {
    case RequestHead::Form::absolute:
      check(r.scheme == "http" && !r.host.empty() && r.path_and_query.front() == '/');
      break;
    case RequestHead::Form::authority:
      check(r.msg().method() == bh::verb::connect && !r.host.empty() && !r.has_body);
      break;
    case RequestHead::Form::origin:
      check(r.path_and_query.front() == '/');
      break;
    case RequestHead::Form::asterisk:
      check(r.path_and_query == "*");
      break;
  }

  std::ostringstream os;
  os << r.msg().base();
  const std::string again_text = os.str();
  if (again_text.size() > limits.max_header_bytes) return;
  const auto again = sandgate::http::parse_request_head(again_text, limits);
  check(again.has_value());
  check(again->form == r.form && again->host == r.host && again->port == r.port &&
        again->path_and_query == r.path_and_query && again->chunked == r.chunked &&
        again->content_length == r.content_length && again->keep_alive == r.keep_alive);

  RequestHead::Message stripped = r.msg();
  sandgate::http::strip_hop_by_hop(stripped);
  check(stripped.count(bh::field::connection) == 0);
  check(stripped.count(bh::field::proxy_authorization) == 0);
  check(stripped.count(bh::field::host) == r.msg().count(bh::field::host));
  check(stripped.count(bh::field::content_length) == r.msg().count(bh::field::content_length));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  // Small limits so the fuzzer reaches the limit paths too.
  for (const sandgate::http::HeadLimits limits :
       {sandgate::http::HeadLimits{}, sandgate::http::HeadLimits{64, 512}}) {
    const auto end = sandgate::http::find_head_end(in, limits);
    if (end && *end > 0) {
      check(*end <= size && *end <= limits.max_header_bytes);
      check(in.substr(0, *end).ends_with("\r\n\r\n"));
      const auto r = sandgate::http::parse_request_head(in.substr(0, *end), limits);
      if (r) check_parsed(*r, limits);
    }
    const auto whole = sandgate::http::parse_request_head(in, limits);
    if (whole) check(end && *end == size);
  }
  return 0;
}
