// libFuzzer target for dns::parse_query and the response builders. Besides "no crash, no
// sanitizer report" it checks the properties the DNS listener relies on and aborts when one
// fails.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <variant>
#include <vector>

#include "dns/message.hpp"

namespace {

namespace dns = sandgate::dns;

void check(bool ok) {
  if (!ok) std::abort();
}

// Every response starts with the query's id, has QR set and one question (or none for a
// header-only error), and fits the limit it was built for.
void check_response(const std::vector<std::uint8_t>& r, const dns::Query& q, std::size_t limit) {
  check(r.size() >= dns::kHeaderBytes && r.size() <= limit);
  check((r[0] << 8 | r[1]) == q.header.id);
  check((r[2] & 0x80) != 0);
  check(r[4] == 0 && r[5] == 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  const auto parsed = dns::parse_query(in);
  if (const auto* e = std::get_if<dns::ParseError>(&parsed)) {
    check(e->rcode == dns::Rcode::formerr);
    check(e->header.has_value() == (size >= dns::kHeaderBytes));
    if (e->header) check(dns::build_header_error(*e->header, e->rcode).size() == dns::kHeaderBytes);
    return 0;
  }
  const dns::Query& q = std::get<dns::Query>(parsed);
  check(!q.name.empty() && q.name.size() <= 4 * 255);
  check(q.question.size() >= 5 && q.question.size() <= 255 + 4);
  for (const char c : q.name) check(c > 0x20 && c < 0x7f);

  const std::size_t limit = dns::udp_limit(q);
  check(limit >= dns::kClassicUdpBytes && limit <= dns::kMaxUdpBytes);
  const std::vector<sandgate::policy::IpAddress> addresses = {
      sandgate::policy::IpAddress::v4(0xC0000201),
      sandgate::policy::IpAddress::v6({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}),
  };
  check_response(dns::build_answer(q, addresses, 60, limit), q, limit);
  check_response(dns::build_refusal(q, std::string(600, 'x'), limit), q, limit);
  check_response(dns::build_error(q, dns::Rcode::servfail), q, dns::kMaxMessageBytes);
  return 0;
}
