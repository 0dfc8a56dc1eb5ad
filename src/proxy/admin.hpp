#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>

#include "proxy/runtime.hpp"

namespace sandgate::proxy {

// The admin listener: GET /metrics (Prometheus text), /healthz (process alive), /readyz
// (listeners bound and config loaded), /sandboxes and /sandboxes/ID (what the daemon knows;
// the launcher polls this), /sandboxes/ID/denials (the sandbox's refusal counts, DenialCounts;
// `sandgate-launch run --json` reports the ones of its run), GET /holds and the stream
// GET /holds/events (holds/event_stream.hpp), POST /holds/ID (with the admin token). One
// request per connection; nothing
// here touches a secret. Keeps answering when the process is out of descriptors: it holds one in
// reserve (DescriptorReserve) and frees it to accept an admin connection.
boost::asio::awaitable<void> admin_accept_loop(tcp::acceptor& acceptor,
                                               std::shared_ptr<Shared> shared);

}  // namespace sandgate::proxy
