#include "http/client/event_stream.hpp"

namespace sandgate::http {

std::vector<ServerEvent> EventStreamReader::feed(std::string_view bytes) {
  std::vector<ServerEvent> out;
  for (const char c : bytes) {
    // Lines end with "\r\n", "\n" or "\r" (the spec's three).
    if (c == '\n' && after_cr_) {
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      end_line(out);
      continue;
    }
    if (line_.size() >= kMaxLine) {
      line_too_long_ = true;
      continue;
    }
    line_ += c;
  }
  return out;
}

void EventStreamReader::end_line(std::vector<ServerEvent>& out) {
  const std::string line = line_;  // a copy: GCC 12 warns wrongly about a moved-from member
  line_.clear();
  if (line_too_long_) {
    line_too_long_ = false;
    event_too_long_ = true;
    return;
  }
  if (line.empty()) {  // the event is complete
    if (has_data_ && !event_too_long_) out.push_back(std::move(event_));
    event_ = ServerEvent{};
    has_data_ = false;
    event_too_long_ = false;
    return;
  }
  if (line.starts_with(':')) return;  // a comment
  const std::size_t colon = line.find(':');
  const std::string_view field = std::string_view(line).substr(0, colon);
  std::string_view value;
  if (colon != std::string::npos) {
    value = std::string_view(line).substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) event_.data += '\n';
    event_.data += value;
    has_data_ = true;
  } else if (field == "event") {
    event_.event = std::string(value);
  } else if (field == "id") {
    event_.id = std::string(value);
  }
}

}  // namespace sandgate::http
