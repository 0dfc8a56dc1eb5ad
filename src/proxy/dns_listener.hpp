#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/udp.hpp>

#include "proxy/runtime.hpp"

namespace sandgate::proxy {

// The sandbox DNS listener. A client is the sandbox its source address names; it gets A and
// AAAA answers (resolved upstream by the worker's resolver, TTLs kept, remembered in
// Shared::dns_memory) for names its policy allows, and REFUSED with an RFC 8914 Extended DNS
// Error naming SANDBOX_NETWORK_DENIED for everything else, without any upstream query.
// Both loops run on one worker's io_context, as does everything they spawn; the worker owns
// the socket and acceptor and outlives them. See docs/dns.md.

// Serves sandbox DNS on one UDP socket until it is closed.
asio::awaitable<void> dns_udp_loop(asio::ip::udp::socket& socket, WorkerDeps deps);
// Accepts DNS-over-TCP clients (RFC 7766 framing) on one acceptor until it is closed.
asio::awaitable<void> dns_tcp_accept_loop(tcp::acceptor& acceptor, WorkerDeps deps);

}  // namespace sandgate::proxy
