// What server.cpp relies on the kernel for: the proxy's listeners set TCP_NODELAY once and
// every accepted session has it without a setsockopt of its own (Session's constructor).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "gtest/gtest.h"

namespace sandgate::proxy {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

bool accepted_has_no_delay(bool listener_no_delay) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  acceptor.set_option(tcp::no_delay(listener_no_delay));
  tcp::socket client(io);
  client.connect(acceptor.local_endpoint());
  tcp::endpoint peer;
  tcp::socket accepted = acceptor.accept(peer);
  EXPECT_EQ(peer, client.local_endpoint());  // accept(2) fills the peer, as getpeername would
  tcp::no_delay option;
  accepted.get_option(option);
  return option.value();
}

TEST(Server, AcceptedSocketInheritsTheListenersNoDelay) {
  EXPECT_TRUE(accepted_has_no_delay(true));
  EXPECT_FALSE(accepted_has_no_delay(false));
}

}  // namespace
}  // namespace sandgate::proxy
