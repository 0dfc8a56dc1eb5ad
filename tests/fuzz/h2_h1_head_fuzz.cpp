// libFuzzer target for the HTTP/2 request -> HTTP/1.1 request head conversion of the h2 bridge
// (h2::to_h1 and h2::to_h1_request, as proxy/intercept_h2.cpp's forward_h1 uses them). The
// input builds an HTTP/2 header list (pseudo-headers in any order, missing or repeated, and
// fields, names and values from small sets or from the input's bytes). It goes through a real
// nghttp2 client session and a real nghttp2 server session with the options the codec uses
// (HTTP messaging checks on), and through the checks the codec adds when a head completes
// (h2/core.cpp, Core::on_head_complete: no CONNECT, host agrees with :authority, one host) and
// that the proxy makes before it forwards (the authority parses and names a host). What gets
// through is converted, with its :path as sent and in its canonical form (forwarded_target),
// and the HTTP/1.1 head written (http::head_text, byte for byte what Beast writes) must parse
// back with sandgate's own strict parser (http::parse_request_head) to the same method, target,
// Host (the :authority) and fields in order (names without case; Beast keeps the fields of one
// name together, where the first of them was), cookies joined into one field with "; " at the
// end (RFC 9113 8.2.3), empty ones left out. Aborts otherwise.
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_input.hpp"
#include "h2/h1_fields.hpp"
#include "h2/h2.hpp"
#include "http/request_head.hpp"
#include "policy/host.hpp"
#include "policy/path.hpp"

namespace {

namespace h2 = sandgate::h2;
namespace http = sandgate::http;
namespace policy = sandgate::policy;

using sandgate::fuzz::check;
using sandgate::fuzz::Input;

// A value from the set, or 0 to 15 bytes of the input.
template <std::size_t N>
std::string text(Input& in, const std::string_view (&from)[N]) {
  const std::uint8_t b = in.byte();
  if (b < 192) return std::string(from[b % N]);
  return std::string(in.take(b % 16));
}

const std::string_view kMethods[] = {"GET", "POST",     "OPTIONS", "CONNECT", "get",
                                     "PUT", "M-SEARCH", "DELETE",  "HEAD",    "A_B"};
const std::string_view kSchemes[] = {"https", "http", "HTTPS"};
const std::string_view kAuthorities[] = {
    "example.com",     "EXAMPLE.com:443", "example.com:8443", "[::1]:443", "a.b",
    "x_y.example.com", "example.com.",    "user@example.com", ""};
const std::string_view kPaths[] = {"/",       "*",         "/a?b=c",    "/a#f", "/%41%2f",
                                   "/a b",    "/\"<>\\",   "/~{}|^`[]", "//x",  "/a/../b",
                                   "/?q=%zz", "/\xc3\xa9", "a",         ""};
const std::string_view kNames[] = {"accept", "cookie",  "host",          "content-length",
                                   "te",     "x-a",     "user-agent",    "Accept",
                                   "x b",    "x:y",     "connection",    "transfer-encoding",
                                   "expect", "trailer", "authorization", "x-\x7f"};
const std::string_view kValues[] = {
    "a",    "trailers", "5", "a=b",         "c=d; e=f",    " a",      "a ", "a\tb", "\x01",
    "\x7f", "\x80",     "",  "example.com", "EXAMPLE.COM", "chunked", "0",  "gzip", "100-continue"};

struct Collected {
  h2::RequestHead head;
  bool complete = false;
};

int on_header(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
              std::size_t namelen, const std::uint8_t* value, std::size_t valuelen, std::uint8_t,
              void* user) {
  // As h2/callbacks.cpp, Callbacks::on_header (server role, the request head).
  auto& c = *static_cast<Collected*>(user);
  if (frame->hd.type != NGHTTP2_HEADERS || c.complete) return 0;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":method") {
    c.head.method = v;
  } else if (n == ":scheme") {
    c.head.scheme = v;
  } else if (n == ":authority") {
    c.head.authority = v;
  } else if (n == ":path") {
    c.head.path = v;
  } else if (!n.starts_with(':')) {
    c.head.fields.push_back({std::string(n), v});
  }
  return 0;
}

int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  if (frame->hd.type == NGHTTP2_HEADERS && frame->hd.stream_id == 1) {
    static_cast<Collected*>(user)->complete = true;
  }
  return 0;
}

// The request head an nghttp2 server session takes from `nva` as a client sends it; nullopt
// when nghttp2 refuses it.
std::optional<h2::RequestHead> through_nghttp2(const std::vector<nghttp2_nv>& nva) {
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
  nghttp2_session* client = nullptr;
  nghttp2_session* server = nullptr;
  Collected collected;
  nghttp2_session_client_new(&client, callbacks, nullptr);
  nghttp2_session_server_new(&server, callbacks, &collected);
  nghttp2_session_callbacks_del(callbacks);
  std::optional<h2::RequestHead> out;
  nghttp2_submit_settings(client, NGHTTP2_FLAG_NONE, nullptr, 0);
  if (nghttp2_submit_request(client, nullptr, nva.data(), nva.size(), nullptr, nullptr) == 1) {
    std::string wire;
    for (;;) {
      const std::uint8_t* bytes = nullptr;
      const ssize_t n = nghttp2_session_mem_send(client, &bytes);
      if (n <= 0) break;
      wire.append(reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(n));
    }
    const ssize_t read = nghttp2_session_mem_recv(
        server, reinterpret_cast<const std::uint8_t*>(wire.data()), wire.size());
    if (read == static_cast<ssize_t>(wire.size()) && collected.complete) {
      out = std::move(collected.head);
    }
  }
  nghttp2_session_del(client);
  nghttp2_session_del(server);
  return out;
}

bool ieq(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           const auto low = [](char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; };
           return low(x) == low(y);
         });
}

// Core::on_head_complete's checks, then the proxy's: false when the head would be answered
// by the codec (400, 405) or never forwarded (an authority that names no host, a head an
// HTTP/1.1 client could not send).
bool forwarded(h2::RequestHead& r) {
  if (r.method == "CONNECT") return false;
  const std::string_view host = h2::find_field(r.fields, "host");
  if (r.authority.empty()) {
    if (host.empty()) return false;
    r.authority = host;
  } else if (!host.empty() && !ieq(host, r.authority)) {
    return false;
  }
  if (std::count_if(r.fields.begin(), r.fields.end(),
                    [](const h2::Field& f) { return f.name == "host"; }) > 1) {
    return false;
  }
  const auto authority = policy::parse_authority(r.authority);
  if (!authority || !policy::normalize_host(authority->host).is_name()) return false;
  // proxy/intercept_h2.cpp, serve_stream: what an HTTP/1.1 client could not send is refused.
  std::vector<std::string_view> values;
  for (const h2::Field& f : r.fields) values.push_back(f.value);
  return http::check_h2_request(r.method, r.path, values) == sandgate::Errc::ok;
}

void round_trip(const h2::RequestHead& head, const std::string& target) {
  boost::beast::http::fields fields;
  h2::to_h1(head.fields, fields);
  const auto req = h2::to_h1_request(head, target, fields);
  const std::string text = http::head_text(req.base());
  auto parsed = http::parse_request_head(text, http::HeadLimits{});
  if (!parsed) {
    std::string shown;  // the head, its bytes outside printable ASCII escaped
    for (const char c : text) {
      const auto u = static_cast<unsigned char>(c);
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      shown += u >= 0x20 && u < 0x7f ? std::string(1, c) : c == '\n' ? "\\n\n" : hex;
    }
    std::fprintf(stderr, "the HTTP/1.1 head is refused (%s):\n%s", parsed.error().message().c_str(),
                 shown.c_str());
  }
  check(parsed.has_value());
  const auto& msg = parsed->msg();
  check(msg.method_string() == head.method);
  check(msg.target() == target);
  check(msg.version() == 11);
  check(parsed->host == policy::parse_authority(head.authority)->host);
  // The fields as sent, but host; cookies at the end, joined.
  std::vector<h2::Field> want;
  std::string cookie;
  for (const h2::Field& f : head.fields) {
    if (f.name == "host") continue;
    if (f.name == "cookie") {
      if (!f.value.empty()) cookie += (cookie.empty() ? "" : "; ") + f.value;
      continue;
    }
    // Beast inserts a field after the last one of its name: fields of one name end up
    // together, in their order, where the first of them was.
    auto last = std::find_if(want.rbegin(), want.rend(),
                             [&](const h2::Field& w) { return ieq(w.name, f.name); });
    want.insert(last == want.rend() ? want.end() : last.base(), f);
  }
  if (!cookie.empty()) want.push_back({"cookie", cookie});
  std::size_t i = 0;
  bool host_seen = false;
  for (const auto& f : msg) {
    if (ieq(f.name_string(), "host")) {
      check(!host_seen && f.value() == head.authority);
      host_seen = true;
      continue;
    }
    if (i >= want.size() || !ieq(f.name_string(), want[i].name) || f.value() != want[i].value) {
      std::fprintf(stderr, "field %zu of the HTTP/1.1 head is \"%s: %s\", not \"%s: %s\"\n", i,
                   std::string(f.name_string()).c_str(), std::string(f.value()).c_str(),
                   i < want.size() ? want[i].name.c_str() : "(none)",
                   i < want.size() ? want[i].value.c_str() : "");
      check(false);
    }
    ++i;
  }
  check(host_seen && i == want.size());
}

nghttp2_nv nv(const std::string& name, const std::string& value) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in{{reinterpret_cast<const char*>(data), size}};
  // The header list: pseudo-headers first (each present unless its bit is set, one repeated
  // or moved after the fields now and then), then 0 to 7 fields.
  const std::uint8_t shape = in.byte();
  std::vector<std::pair<std::string, std::string>> list;
  const std::string method = text(in, kMethods);
  const std::string scheme = text(in, kSchemes);
  const std::string authority = text(in, kAuthorities);
  const std::string path = text(in, kPaths);
  if ((shape & 1) == 0) list.emplace_back(":method", method);
  if ((shape & 2) == 0) list.emplace_back(":scheme", scheme);
  if ((shape & 4) == 0) list.emplace_back(":authority", authority);
  if ((shape & 8) == 0) list.emplace_back(":path", path);
  for (int i = 0, n = (shape >> 4) % 8; i < n; ++i) {
    std::string name = text(in, kNames);
    std::string value = text(in, kValues);
    list.emplace_back(std::move(name), std::move(value));
  }
  if ((shape & 0x80) != 0 && !list.empty()) {
    const std::uint8_t b = in.byte();
    if ((b & 1) != 0) {
      list.push_back(list[b % list.size()]);  // a repeat, at the end
    } else {
      std::rotate(list.begin(), list.begin() + 1, list.end());  // the first one last
    }
  }
  std::vector<nghttp2_nv> nva;
  for (const auto& [name, value] : list) nva.push_back(nv(name, value));

  std::optional<h2::RequestHead> head = through_nghttp2(nva);
  if (!head || !forwarded(*head)) return 0;
  round_trip(*head, head->path);
  const policy::CanonicalPath canonical = policy::canonicalize_path(head->path);
  if (!canonical.ambiguous && canonical.path != "*") {
    round_trip(*head,
               canonical.path + (canonical.has_query ? "?" + std::string(canonical.query) : ""));
  }
  return 0;
}
