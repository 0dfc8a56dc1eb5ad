#include "secrets/tripwire.hpp"

namespace sandgate::secrets {

PlaceholderCheck check_placeholders(const PlaceholderIndex& index, const InjectionRules* rules,
                                    std::string_view sandbox, const policy::Host& host,
                                    std::uint16_t port, bool intercepted,
                                    std::span<const std::string_view> texts) {
  PlaceholderCheck out;
  for (const std::string_view text : texts) {
    if (!may_contain_placeholder(text)) continue;
    for (const PlaceholderHit& hit : index.find_all(text)) {
      out.found = true;
      const auto refuse = [&](std::string why) {
        out.allowed = false;
        out.credential = hit.known() ? *hit.credential : std::string();
        out.why = std::move(why);
      };
      if (!hit.known()) {
        refuse("a placeholder sandgate did not make (stale or forged)");
      } else if (*hit.sandbox != sandbox) {
        refuse("another sandbox's placeholder for credential " + *hit.credential);
      } else if (!intercepted) {
        refuse("the placeholder of credential " + *hit.credential +
               " on a request sandgate cannot see into (plain HTTP)");
      } else if (rules == nullptr || !rules->binds(*hit.credential, host, port)) {
        refuse("the placeholder of credential " + *hit.credential + " sent to " + host.display() +
               ":" + std::to_string(port) + ", which it is not bound to");
      }
      if (!out.allowed) return out;
    }
  }
  return out;
}

namespace {

// Whether `text` starts with "sgph_" and 40 lowercase hex digits not followed by another.
bool placeholder_shaped(std::string_view text) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  if (text.size() < kPlaceholderLength) return false;
  for (std::size_t i = kPlaceholderPrefix.size(); i < kPlaceholderLength; ++i) {
    if (!hex(text[i])) return false;
  }
  return text.size() == kPlaceholderLength || !hex(text[kPlaceholderLength]);
}

// Whether `tail` (at most kPlaceholderLength bytes, the end of what arrived) could be the
// start of a placeholder that the next bytes complete.
bool may_begin_placeholder(std::string_view tail) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  for (std::size_t i = 0; i < tail.size(); ++i) {
    const bool ok = i < kPlaceholderPrefix.size() ? tail[i] == kPlaceholderPrefix[i] : hex(tail[i]);
    if (!ok) return false;
  }
  return true;
}

}  // namespace

BodyTripwire::BodyTripwire(const PlaceholderIndex& index, const InjectionRules* rules,
                           std::string_view sandbox, const policy::Host& host, std::uint16_t port,
                           bool intercepted)
    : index_(&index),
      rules_(rules),
      sandbox_(sandbox),
      host_(&host),
      port_(port),
      intercepted_(intercepted) {}

std::size_t BodyTripwire::feed(std::string_view data, bool last) {
  if (refused()) return 0;
  // A placeholder starting at p is known to end there once byte p + kPlaceholderLength is
  // here (or the body ended). Of the last kHoldBack bytes, only those from the first that may
  // begin one wait for the next chunk: a body that pauses (a client waiting for an answer)
  // is held back only while its end looks like a placeholder.
  std::size_t decided = data.size();
  if (!last) {
    for (std::size_t p = data.size() > kHoldBack ? data.size() - kHoldBack : 0; p < data.size();
         ++p) {
      if (data[p] == kPlaceholderPrefix[0] && may_begin_placeholder(data.substr(p))) {
        decided = p;
        break;
      }
    }
  }
  for (auto at = data.find(kPlaceholderPrefix); at != std::string_view::npos && at < decided;
       at = data.find(kPlaceholderPrefix, at + 1)) {
    // The candidate and the byte after it, if any. Near misses ("sgph_" and no 40 digits)
    // are the common case in text that has the prefix at all: dismissed here, without a
    // lookup.
    const std::string_view text = data.substr(at, kPlaceholderLength + 1);
    if (!placeholder_shaped(text)) continue;
    PlaceholderCheck one = check_placeholders(*index_, rules_, sandbox_, *host_, port_,
                                              intercepted_, std::span(&text, 1));
    check_.found = check_.found || one.found;
    if (!one.allowed) {
      check_ = std::move(one);
      return 0;
    }
  }
  return decided;
}

bool BodyTripwire::pass_trailers(std::span<const std::string_view> texts) {
  if (refused()) return false;
  PlaceholderCheck one =
      check_placeholders(*index_, rules_, sandbox_, *host_, port_, intercepted_, texts);
  check_.found = check_.found || one.found;
  if (!one.allowed) check_ = std::move(one);
  return !refused();
}

}  // namespace sandgate::secrets
