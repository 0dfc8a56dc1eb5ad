// EventStreamReader: Server-Sent Events from a byte stream, however the bytes are split.
#include "http/client/event_stream.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sandgate::http {
namespace {

// Feeds `stream` in pieces of `step` bytes and returns every event read.
std::vector<ServerEvent> read_all(const std::string& stream, std::size_t step) {
  EventStreamReader reader;
  std::vector<ServerEvent> out;
  for (std::size_t at = 0; at < stream.size(); at += step) {
    for (ServerEvent& e : reader.feed(std::string_view(stream).substr(at, step))) {
      out.push_back(std::move(e));
    }
  }
  return out;
}

struct Case {
  const char* name;
  std::string stream;
  std::vector<ServerEvent> events;
};

TEST(EventStreamReader, ReadsEveryEventHoweverTheBytesAreSplit) {
  const std::vector<Case> cases = {
      {"OneEvent", "id: 7\nevent: held\ndata: {\"id\":1}\n\n", {{"7", "held", "{\"id\":1}"}}},
      {"TwoEventsAndAKeepAlive",
       ": keep-alive\n\nevent: held\ndata: a\n\n: keep-alive\n\nevent: answered\ndata: b\n\n",
       {{"", "held", "a"}, {"", "answered", "b"}}},
      {"CrLfLineEnds", "event: held\r\ndata: x\r\n\r\n", {{"", "held", "x"}}},
      {"CrLineEnds", "event: held\rdata: x\r\r", {{"", "held", "x"}}},
      {"DataLinesJoined", "data: one\ndata: two\n\n", {{"", "message", "one\ntwo"}}},
      {"NoSpaceAfterColon", "event:held\ndata:x\n\n", {{"", "held", "x"}}},
      {"NoDataNoEvent", "event: held\n\n", {}},
      {"UnfinishedEventWaits", "event: held\ndata: x\n", {}},
      {"UnknownFieldsIgnored", "retry: 10\nfoo\nevent: held\ndata: x\n\n", {{"", "held", "x"}}},
  };
  for (const Case& c : cases) {
    for (const std::size_t step : {1u, 2u, 5u, 4096u}) {
      EXPECT_EQ(read_all(c.stream, step), c.events) << c.name << " in pieces of " << step;
    }
  }
}

TEST(EventStreamReader, DropsTheEventOfALineTooLong) {
  const std::string huge(EventStreamReader::kMaxLine + 10, 'x');
  const std::string stream = "event: held\ndata: " + huge + "\n\nevent: answered\ndata: ok\n\n";
  EXPECT_EQ(read_all(stream, 4096), (std::vector<ServerEvent>{{"", "answered", "ok"}}));
}

}  // namespace
}  // namespace sandgate::http
