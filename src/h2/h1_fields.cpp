#include "h2/h1_fields.hpp"

#include <string>

namespace sandgate::h2 {

Fields from_h1(const boost::beast::http::fields& fields) {
  Fields all;
  all.reserve(static_cast<std::size_t>(std::distance(fields.begin(), fields.end())));
  bool length = false;
  for (const auto& f : fields) {
    // A repeated Content-Length (Beast's parser accepts only equal values) is sent once: an
    // HTTP/2 client treats two as a malformed response (RFC 9113 section 8.1.1).
    if (f.name() == boost::beast::http::field::content_length) {
      if (length) continue;
      length = true;
    }
    add_sendable(all, f.name_string(), f.value());
  }
  return all;
}

void to_h1(const Fields& fields, boost::beast::http::fields& out) {
  std::string cookie;
  for (const Field& f : fields) {
    if (f.name == "cookie") {
      // An empty crumb adds nothing but a "; " at the end, which an HTTP/1.1 reader trims.
      if (f.value.empty()) continue;
      if (!cookie.empty()) cookie += "; ";
      cookie += f.value;
      continue;
    }
    out.insert(f.name, f.value);
  }
  if (!cookie.empty()) out.insert(boost::beast::http::field::cookie, cookie);
}

boost::beast::http::request<boost::beast::http::empty_body> to_h1_request(
    const RequestHead& head, std::string_view target, const boost::beast::http::fields& fields) {
  boost::beast::http::request<boost::beast::http::empty_body> req;
  for (const auto& f : fields) req.insert(f.name_string(), f.value());
  req.method_string(head.method);
  req.target(target);
  req.version(11);
  req.set(boost::beast::http::field::host, head.authority);
  return req;
}

}  // namespace sandgate::h2
