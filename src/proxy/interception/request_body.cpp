#include "proxy/interception/request_body.hpp"

#include "proxy/session.hpp"

namespace sandgate::proxy {

void RequestBody::scan(const Session& s, const policy::Host& host, std::uint16_t port,
                       bool intercepted) {
  if (!s.snap->placeholders) return;
  trip_.emplace(*s.snap->placeholders,
                s.snap->injection ? s.snap->injection->for_sandbox(s.sandbox) : nullptr, s.sandbox,
                host, port, intercepted);
}

std::string_view RequestBody::pass(std::string_view chunk, bool last) {
  if (broken() || refused()) return {};
  if (resign_ != nullptr) {
    rewritten_.clear();
    if (!resign_->feed(chunk, rewritten_)) {
      why_ = resign_->error();
      return {};
    }
    if (last && !resign_->finished()) {
      why_ = "the body ended before the upload's last chunk";
      return {};
    }
    chunk = rewritten_;
  }
  if (!trip_) return chunk;
  joined_.erase(0, sent_);
  joined_.append(chunk);
  sent_ = trip_->feed(joined_, last);
  if (trip_->refused()) return {};
  return std::string_view(joined_).substr(0, sent_);
}

}  // namespace sandgate::proxy
