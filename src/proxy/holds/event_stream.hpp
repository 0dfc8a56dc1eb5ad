#pragma once

// GET /holds/events[?sandbox=ID] on the admin listener: the held destinations as a stream of
// Server-Sent Events (text/event-stream). First one `held` event per hold pending now, then a
// `held` event when a hold begins and an `answered` event when one ends; a comment line
// (": keep-alive") after kKeepAlive without an event, so that idle proxies and clients keep
// the connection. Read-only, like GET /holds. The stream ends when the reader falls
// kQueue events behind, when kMaxSubscribers newer readers came after it, or when the daemon
// stops (HoldEvents).

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "proxy/holds/hold_events.hpp"
#include "proxy/runtime.hpp"

namespace sandgate::proxy {

inline constexpr std::chrono::seconds kKeepAlive{15};

// One hold as GET /holds lists it and a `held` event carries it: id, sandbox, host, port,
// mode, method, path, since_ms, waiting.
boost::json::object hold_json(const PendingHold& hold);

// An event in the stream's framing: `id:`, `event:` and one `data:` line (JSON), then a
// blank line. An `answered` event's data: id, sandbox, host, port, outcome.
std::string event_text(const HoldEvent& event);

// Whether a GET of `target` is the stream (whatever its query).
bool is_hold_events_target(std::string_view target);

// Answers the stream's request on `socket` until one of its ends (a bad query: 400). Runs on
// the admin listener's worker; takes everything by value but the socket, which the caller
// closes afterwards.
boost::asio::awaitable<void> serve_hold_events(tcp::socket& socket, std::shared_ptr<Shared> shared,
                                               std::string target);

}  // namespace sandgate::proxy
