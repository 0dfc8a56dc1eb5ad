#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>

#include "proxy/runtime.hpp"
#include "secrets/secret_file.hpp"

namespace sandgate::proxy {

// The admin API's write token, from listeners.admin_token_file read now (so a rotated token
// counts at once): the daemon checks a write call against it, `sandgate holds` sends it.
struct AdminToken {
  secrets::SecretFile file;  // holds the bytes; file.error says why there is none
  // The token: the file's content without its trailing line ends.
  std::string_view value() const;
};
AdminToken read_admin_token(const std::string& path);

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
