#include "policy/address_class.hpp"

#include <array>
#include <cstdint>

namespace sandgate::policy {

namespace {

using C = AddressClass;

struct V4Range {
  std::uint32_t base;
  unsigned prefix;
  AddressClass cls;
};

constexpr std::uint32_t quad(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

// IANA IPv4 Special-Purpose Address Registry. First match wins, so single addresses that
// matter more than their block (metadata, broadcast) come before it.
constexpr std::array kV4Ranges{
    V4Range{quad(169, 254, 169, 254), 32, C::metadata},  // AWS, GCP, Azure, OpenStack, ...
    V4Range{quad(100, 100, 100, 200), 32, C::metadata},  // Alibaba Cloud, inside 100.64/10
    V4Range{quad(192, 0, 0, 192), 32, C::metadata},      // Oracle Cloud, inside 192.0.0/24
    V4Range{quad(255, 255, 255, 255), 32, C::broadcast},
    V4Range{quad(0, 0, 0, 0), 8, C::unspecified},
    V4Range{quad(10, 0, 0, 0), 8, C::private_net},
    V4Range{quad(100, 64, 0, 0), 10, C::cgnat},
    V4Range{quad(127, 0, 0, 0), 8, C::loopback},
    V4Range{quad(169, 254, 0, 0), 16, C::link_local},
    V4Range{quad(172, 16, 0, 0), 12, C::private_net},
    V4Range{quad(192, 0, 0, 0), 24, C::reserved},  // IETF protocol assignments
    V4Range{quad(192, 0, 2, 0), 24, C::documentation},
    V4Range{quad(192, 88, 99, 0), 24, C::reserved},  // deprecated 6to4 relay anycast
    V4Range{quad(192, 168, 0, 0), 16, C::private_net},
    V4Range{quad(198, 18, 0, 0), 15, C::benchmarking},
    V4Range{quad(198, 51, 100, 0), 24, C::documentation},
    V4Range{quad(203, 0, 113, 0), 24, C::documentation},
    V4Range{quad(224, 0, 0, 0), 4, C::multicast},
    V4Range{quad(240, 0, 0, 0), 4, C::reserved},
};

struct V6Range {
  std::array<std::uint8_t, 16> base;
  unsigned prefix;
  AddressClass cls;
};

// Builds the bytes of an IPv6 address from its first groups; the rest are zero.
template <class... Groups>
constexpr std::array<std::uint8_t, 16> groups(Groups... g) {
  std::array<std::uint8_t, 16> b{};
  std::size_t i = 0;
  for (const unsigned group : {static_cast<unsigned>(g)...}) {
    b[i++] = static_cast<std::uint8_t>(group >> 8);
    b[i++] = static_cast<std::uint8_t>(group);
  }
  return b;
}

// IANA IPv6 Special-Purpose Address Registry, after ::, ::1 and the IPv4-embedding forms are
// handled. First match wins: narrower entries come before the blocks that contain them.
constexpr std::array kV6Ranges{
    V6Range{groups(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254), 128, C::metadata},  // AWS
    V6Range{groups(0xfc00), 7, C::unique_local},
    V6Range{groups(0xfe80), 10, C::link_local},
    V6Range{groups(0xfec0), 10, C::reserved},  // deprecated site-local
    V6Range{groups(0xff00), 8, C::multicast},
    V6Range{groups(0x2001, 0x0db8), 32, C::documentation},
    V6Range{groups(0x3fff), 20, C::documentation},
    V6Range{groups(0x2001, 0x0002), 48, C::benchmarking},
    V6Range{groups(0x2001, 0x0010), 28, C::reserved},        // ORCHID (deprecated)
    V6Range{groups(0x2001, 0x0020), 28, C::reserved},        // ORCHIDv2
    V6Range{groups(0x2001), 23, C::reserved},                // IETF protocol assignments
    V6Range{groups(0x0100), 64, C::reserved},                // discard-only
    V6Range{groups(0x0100, 0, 0, 0x0001), 64, C::reserved},  // dummy prefix (RFC 9780)
    V6Range{groups(0x5f00), 16, C::reserved},                // SRv6 SIDs
};

bool v6_prefix_match(const std::array<std::uint8_t, 16>& a, const std::array<std::uint8_t, 16>& net,
                     unsigned prefix) {
  const unsigned full = prefix / 8;
  for (unsigned i = 0; i < full; ++i) {
    if (a[i] != net[i]) return false;
  }
  const unsigned rest = prefix % 8;
  if (rest == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (net[full] & mask);
}

AddressClass classify_v4(std::uint32_t v) {
  for (const V4Range& r : kV4Ranges) {
    const std::uint32_t mask = r.prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - r.prefix);
    if ((v & mask) == r.base) return r.cls;
  }
  return C::global;
}

AddressClass classify_v6(const IpAddress& a) {
  constexpr auto kUnspecified = groups(0);
  constexpr auto kLoopback = groups(0, 0, 0, 0, 0, 0, 0, 1);
  if (a.bytes == kUnspecified) return C::unspecified;
  if (a.bytes == kLoopback) return C::loopback;
  // The destination that matters is the IPv4 one a translator or tunnel will reach.
  if (const auto inner = embedded_ipv4(a)) return classify_v4(inner->v4_value());
  for (const V6Range& r : kV6Ranges) {
    if (v6_prefix_match(a.bytes, r.base, r.prefix)) return r.cls;
  }
  return C::global;
}

}  // namespace

AddressClass classify(const IpAddress& a) {
  return a.is_v4() ? classify_v4(a.v4_value()) : classify_v6(a);
}

std::string_view class_name(AddressClass c) {
  switch (c) {
    case C::global:
      return "global";
    case C::loopback:
      return "loopback";
    case C::unspecified:
      return "unspecified";
    case C::private_net:
      return "private";
    case C::cgnat:
      return "cgnat";
    case C::link_local:
      return "link_local";
    case C::metadata:
      return "metadata";
    case C::unique_local:
      return "unique_local";
    case C::multicast:
      return "multicast";
    case C::broadcast:
      return "broadcast";
    case C::documentation:
      return "documentation";
    case C::benchmarking:
      return "benchmarking";
    case C::reserved:
      return "reserved";
  }
  return "unknown";
}

bool always_denied(AddressClass c) {
  switch (c) {
    case C::link_local:
    case C::metadata:
    case C::unspecified:
    case C::multicast:
    case C::broadcast:
      return true;
    default:
      return false;
  }
}

}  // namespace sandgate::policy
