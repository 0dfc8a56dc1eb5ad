#pragma once

// Pure naming and address arithmetic for launcher sandboxes: which slot a sandbox takes in the
// pool, its /30 link addresses, and the names of its interfaces, nft table and netns.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "policy/ip_address.hpp"

namespace sandgate::launcher {

// How many /30 links an IPv4 pool holds (0 for IPv6 or a pool smaller than a /30). Capped at
// kMaxSlots so interface names stay short.
inline constexpr unsigned kMaxSlots = 1U << 20;
unsigned pool_capacity(const policy::Cidr& pool);

// The lowest index in [0, capacity) not in `used`; nullopt when the pool is full.
std::optional<unsigned> lowest_free_slot(const std::set<unsigned>& used, unsigned capacity);

// Slots that something else on the host already uses, whatever the state directory: a link
// named sg<k>h or sg<k>s, a table sandgate_<k> (inet), or an address in slot k's /30 on any
// interface. `links`, `tables` and `addresses` are what the current network namespace has.
// Another config's sandboxes (other state_dir, same or overlapping pool) are skipped this way.
std::set<unsigned> slots_taken_on_host(const policy::Cidr& pool, const std::set<std::string>& links,
                                       const std::set<std::string>& tables,
                                       const std::vector<policy::IpAddress>& addresses);

// Slot k is the /30 at pool.network + 4k: the host side is .+1, the sandbox side .+2.
policy::IpAddress host_address(const policy::Cidr& pool, unsigned slot);
policy::IpAddress sandbox_address(const policy::Cidr& pool, unsigned slot);

std::string host_if_name(unsigned slot);      // "sg<k>h", stays on the host
std::string sandbox_if_name(unsigned slot);   // "sg<k>s", moved into the sandbox netns
std::string table_name(unsigned slot);        // "sandgate_<k>", in family inet
std::string netns_name(std::string_view id);  // "sg-<id>", under /run/netns

// 1-64 characters of [A-Za-z0-9_.-] (the daemon's rule) that do not start with '.' or '-',
// because the id also names a netns, a file and a directory.
bool valid_sandbox_id(std::string_view id);
inline constexpr std::string_view kSandboxIdRule =
    "use 1-64 characters of A-Z a-z 0-9 _ . - not starting with '.' or '-'";

}  // namespace sandgate::launcher
