// libFuzzer target for the request body's placeholder tripwire (secrets::BodyTripwire) as the
// relays drive it: each feed() gets the bytes the last one held back, then the new chunk, as
// HTTP/2 DATA frames or HTTP/1.1 reads bring them (some empty, the last one possibly empty,
// as an END_STREAM frame without data). The input builds a body from literal bytes and
// placeholders (the sandbox's own bound and unbound ones, another sandbox's, a forged one,
// near misses: a digit short, a digit too many, uppercase), picks the destination and
// whether the stream is intercepted, and splits the body. A reference written plainly here
// searches the whole body for what placeholder.hpp calls a placeholder ("sgph_" and 40
// lowercase hex digits not followed by another) and decides each as tripwire.hpp says.
// Aborts unless the tripwire refuses exactly when the reference finds a placeholder that may
// not go, names the first such one's credential, releases no byte from that placeholder's
// first on, holds back at most kHoldBack bytes, and releases everything when nothing is
// refused.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_input.hpp"
#include "policy/host.hpp"
#include "policy/host_pattern.hpp"
#include "secrets/injection.hpp"
#include "secrets/placeholder.hpp"
#include "secrets/tripwire.hpp"

namespace {

namespace secrets = sandgate::secrets;
namespace policy = sandgate::policy;

using sandgate::fuzz::check;
using sandgate::fuzz::Input;

struct Owner {
  std::string sandbox;
  std::string credential;
};

struct World {
  secrets::PlaceholderKey key = secrets::PlaceholderKey::from_bytes(std::string(32, '\x5a'));
  std::vector<std::pair<std::string, std::string>> pairs = {
      {"ci", "github"}, {"ci", "npm"}, {"other", "github"}, {"ci", "unbound"}};
  secrets::PlaceholderIndex index{key, pairs};
  std::map<std::string, Owner> owners;  // placeholder -> its pair
  std::vector<std::string> placeholders;
  secrets::InjectionRules rules{{rule("api.github.com", "github"), rule("*.npmjs.org", "npm"),
                                 rule("registry.npmjs.org:8443", "github")},
                                {443}};

  World() {
    for (const auto& [sandbox, credential] : pairs) {
      placeholders.push_back(key.placeholder_for(sandbox, credential));
      owners[placeholders.back()] = {sandbox, credential};
    }
  }

  static secrets::InjectRule rule(std::string_view host, std::string credential) {
    secrets::InjectRule r;
    r.hosts.push_back(*policy::parse_host_pattern(host));
    r.credential = std::move(credential);
    r.origin = "fuzz";
    return r;
  }
};

// Destinations, and the credentials the rules bind to each.
struct Destination {
  std::string_view host;
  std::uint16_t port;
  std::vector<std::string_view> bound;
};
const Destination kDestinations[] = {{"api.github.com", 443, {"github"}},
                                     {"registry.npmjs.org", 443, {"npm"}},
                                     {"registry.npmjs.org", 8443, {"github"}},
                                     {"example.com", 443, {}}};

bool lower_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const World world;
  Input in{{reinterpret_cast<const char*>(data), size}};
  const std::uint8_t shape = in.byte();
  const Destination& dest = kDestinations[shape % std::size(kDestinations)];
  const bool intercepted = (shape & 4) == 0;
  const std::string sandbox = (shape & 8) == 0 ? "ci" : "other";

  // The chunk sizes (0 to 127, in turn): 1 to 8 of them.
  std::vector<std::size_t> steps;
  for (int i = 0, count = 1 + (shape >> 5); i < count; ++i) steps.push_back(in.byte() % 128);
  if (std::all_of(steps.begin(), steps.end(), [](std::size_t s) { return s == 0; })) {
    steps.push_back(1);
  }

  // The body: pieces until the input ends. A piece is literal bytes, or a placeholder.
  std::string body;
  while (!in.rest.empty()) {
    const std::uint8_t op = in.byte();
    if (op < 128) {
      body += in.take(op % 48);
      continue;
    }
    const std::string& known = world.placeholders[op % world.placeholders.size()];
    switch ((op >> 2) % 8) {
      case 0:
      case 1:
      case 2:
        body += known;
        break;
      case 3: {  // forged: hex digits from the input
        std::string forged(secrets::kPlaceholderPrefix);
        for (std::size_t i = 0; i < secrets::kPlaceholderDigits; ++i) {
          forged += "0123456789abcdef"[in.byte() % 16];
        }
        body += forged;
        break;
      }
      case 4:  // a digit short
        body += known.substr(0, known.size() - 1);
        break;
      case 5:  // a digit too many
        body += known + "0";
        break;
      case 6: {  // one digit in uppercase (when it is a letter)
        std::string upper = known;
        for (std::size_t i = secrets::kPlaceholderPrefix.size(); i < upper.size(); ++i) {
          if (upper[i] >= 'a' && upper[i] <= 'f') {
            upper[i] = static_cast<char>(upper[i] - 'a' + 'A');
            break;
          }
        }
        body += upper;
        break;
      }
      default:  // the prefix alone
        body += secrets::kPlaceholderPrefix;
        break;
    }
  }

  // The reference: every placeholder of the whole body, and the first that may not go.
  bool found = false;
  std::optional<std::size_t> refused_at;
  std::string refused_credential;
  const std::string_view prefix = secrets::kPlaceholderPrefix;
  for (std::size_t i = 0; i + secrets::kPlaceholderLength <= body.size(); ++i) {
    if (body.compare(i, prefix.size(), prefix) != 0) continue;
    bool shaped = true;
    for (std::size_t j = i + prefix.size(); j < i + secrets::kPlaceholderLength; ++j) {
      shaped = shaped && lower_hex(body[j]);
    }
    const std::size_t after = i + secrets::kPlaceholderLength;
    if (!shaped || (after < body.size() && lower_hex(body[after]))) continue;
    found = true;
    const auto owner = world.owners.find(body.substr(i, secrets::kPlaceholderLength));
    const bool allowed =
        owner != world.owners.end() && owner->second.sandbox == sandbox && intercepted &&
        std::find(dest.bound.begin(), dest.bound.end(), owner->second.credential) !=
            dest.bound.end();
    if (!allowed) {
      refused_at = i;
      refused_credential = owner == world.owners.end() ? "" : owner->second.credential;
      break;
    }
  }

  // The stream, as the relays drive it.
  const policy::Host host = policy::normalize_host(dest.host);
  secrets::BodyTripwire trip(world.index, &world.rules, sandbox, host, dest.port, intercepted);
  std::string joined;    // held back, then the new chunk
  std::size_t sent = 0;  // of joined, released by the last feed
  std::size_t released = 0;
  std::size_t at = 0;
  for (std::size_t i = 0;; ++i) {
    const std::size_t n = std::min(steps[i % steps.size()], body.size() - at);
    const bool last = at + n == body.size() && i % 3 != 0;
    joined.erase(0, sent);
    joined.append(body, at, n);
    at += n;
    sent = trip.feed(joined, last);
    check(sent <= joined.size());
    if (trip.refused()) {
      check(sent == 0);
      break;
    }
    released += sent;
    if (last) {
      check(sent == joined.size());
      break;
    }
    check(joined.size() - sent <= secrets::BodyTripwire::kHoldBack);
  }
  check(trip.refused() == refused_at.has_value());
  if (refused_at) {
    check(released <= *refused_at);
    check(trip.found());
    check(trip.check().credential == refused_credential);
  } else {
    check(released == body.size());
    check(trip.found() == found);
  }
  return 0;
}
