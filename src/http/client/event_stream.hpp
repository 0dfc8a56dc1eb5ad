#pragma once

// Reading Server-Sent Events (text/event-stream, as GET /holds/events writes them) from the
// pieces a PlainStream gives: lines `event:`, `data:` and `id:`, an event ended by a blank
// line, comment lines (": keep-alive") skipped. Pure: bytes in, events out.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sandgate::http {

struct ServerEvent {
  std::string id;
  std::string event = "message";  // the spec's default type
  std::string data;               // its data lines joined by '\n'
  bool operator==(const ServerEvent&) const = default;
};

class EventStreamReader {
 public:
  // A line longer than this (a broken or hostile server) is dropped with its event.
  static constexpr std::size_t kMaxLine = 64 * 1024;

  // The events `bytes` completes; what is left of a line or event waits for the next piece.
  std::vector<ServerEvent> feed(std::string_view bytes);

 private:
  void end_line(std::vector<ServerEvent>& out);

  std::string line_;
  bool line_too_long_ = false;
  bool event_too_long_ = false;
  bool after_cr_ = false;  // the last piece ended with '\r' (a "\r\n" split in two)
  ServerEvent event_;
  bool has_data_ = false;
};

}  // namespace sandgate::http
