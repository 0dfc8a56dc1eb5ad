#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/udp.hpp>

#include "proxy/runtime.hpp"

namespace sandgate::proxy {

// The sandbox DNS listener. A client is the sandbox its source address names; it gets A and
// AAAA answers (resolved upstream by the worker's resolver, TTLs kept, remembered in
// Shared::dns_memory) for names its policy allows, and REFUSED with an RFC 8914 Extended DNS
// Error naming SANDBOX_NETWORK_DENIED for everything else, without any upstream query.
// Answers the cache has are sent at once; a query that needs upstream takes a slot of its
// sandbox's budget (limits.max_dns_queries_per_sandbox) or is refused TOO_MANY_DNS_QUERIES,
// and a TCP client is one of its sandbox's connections (limits.max_connections_per_sandbox).
// Both loops run on one worker's io_context, as does everything they spawn; the worker owns
// the socket and acceptor and outlives them. See docs/dns.md.

// Serves sandbox DNS on one UDP socket until it is closed.
asio::awaitable<void> dns_udp_loop(asio::ip::udp::socket& socket, WorkerDeps deps);
// Accepts DNS-over-TCP clients (RFC 7766 framing) on one acceptor until it is closed.
asio::awaitable<void> dns_tcp_accept_loop(tcp::acceptor& acceptor, WorkerDeps deps);

// Writes the summary line of every audit burst (AuditBursts) that has ended by now with lines
// left out (every one with lines left out, at shutdown: now = time_point::max()). Called about
// once a second from any thread.
void write_burst_summaries(Shared& shared,
                           AuditBursts::Clock::time_point now = AuditBursts::Clock::now());

}  // namespace sandgate::proxy
