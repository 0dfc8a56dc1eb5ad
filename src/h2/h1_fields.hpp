#pragma once

// Header fields between an HTTP/1.1 message (Beast) and an HTTP/2 stream, for the bridges of
// intercepted requests (h2 client <-> h1 upstream and the other way round).

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>

#include "h2/h2.hpp"

namespace sandgate::h2 {

// An HTTP/1.1 header's fields as HTTP/2 sends them (sendable_fields: names lowercased,
// connection-specific fields, host and te other than "trailers" dropped; a repeated
// Content-Length sent once). Fields the message's
// Connection header names are hop-by-hop too: strip them first (http::strip_hop_by_hop).
Fields from_h1(const boost::beast::http::fields& fields);

// HTTP/2 fields appended to an HTTP/1.1 header. Cookie fields, which HTTP/2 may split, are
// joined into one with "; " (RFC 9113 section 8.2.3), empty ones left out. Host and framing
// are the caller's.
void to_h1(const Fields& fields, boost::beast::http::fields& out);

// The HTTP/1.1 request head that carries an HTTP/2 request to an HTTP/1.1 destination: the
// head's :method and `target` (its :path, or the form sandgate forwards), version 1.1, then
// `fields` (to_h1 of the head's fields, as the request filters left them) in order, Host set to
// the head's :authority (in place of any host field). Framing (Transfer-Encoding: chunked for a
// body of unknown length) is the caller's.
boost::beast::http::request<boost::beast::http::empty_body> to_h1_request(
    const RequestHead& head, std::string_view target, const boost::beast::http::fields& fields);

}  // namespace sandgate::h2
