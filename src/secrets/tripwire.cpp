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

}  // namespace sandgate::secrets
