// libFuzzer target for `sandgate audit verify`'s reader: the input is cut into lines, the
// lines before the first empty one are a rotated file and the rest the current one, and
// audit::ChainVerifier follows them (no key, and a head taken from the input's last line when
// it is chained). Besides "no crash, no sanitizer report" it checks that the verdict is the
// same when the same lines are given again, that an intact verdict's range is ordered, and
// that a bad line is named within the input.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audit/verify.hpp"
#include "telemetry/audit_chain.hpp"

namespace {

namespace audit = sandgate::audit;
namespace tel = sandgate::telemetry;

void check(bool ok) {
  if (!ok) std::abort();
}

audit::VerifyResult verify(const std::vector<std::string_view>& lines,
                           std::optional<tel::ChainHead> head) {
  audit::ChainVerifier v(nullptr, head);
  v.begin_file("rotated");
  bool current = false;
  for (const std::string_view line : lines) {
    if (line.empty() && !current) {
      current = true;
      v.begin_file("current");
      continue;
    }
    v.line(line);
  }
  return v.finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> lines;
  while (!input.empty()) {
    const std::size_t nl = input.find('\n');
    lines.push_back(input.substr(0, nl));
    input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
  }
  std::optional<tel::ChainHead> head;
  if (!lines.empty()) {
    if (const auto last = tel::parse_chained_line(lines.back())) {
      head = tel::ChainHead{last->seq, tel::chain_hash(lines.back())};
    }
  }
  const audit::VerifyResult first = verify(lines, head);
  const audit::VerifyResult again = verify(lines, head);
  check(first.tamper == again.tamper && first.where.text() == again.where.text() &&
        first.detail == again.detail);
  if (first.tamper == audit::Tamper::none) {
    check(first.last_seq == 0 || first.first_seq <= first.last_seq);
  } else {
    check(first.where.line >= 1 && first.where.line <= lines.size());
  }
  return 0;
}
