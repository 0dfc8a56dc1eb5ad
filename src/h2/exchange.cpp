#include "h2/exchange.hpp"

#include "h2/core.hpp"

namespace sandgate::h2 {

Exchange::Exchange(std::shared_ptr<detail::StreamState> s) : s_(std::move(s)) {}

Exchange::~Exchange() {
  drop();
}

Exchange& Exchange::operator=(Exchange&& other) noexcept {
  if (this != &other) {
    drop();
    s_ = std::move(other.s_);
    reset_on_drop_ = other.reset_on_drop_;
  }
  return *this;
}

void Exchange::drop() {
  if (!s_ || !s_->core) return;
  if (reset_on_drop_ && !s_->closed) s_->core->reset(*s_, ResetCode::cancel);
  s_->core->release(*s_);
}

std::int32_t Exchange::stream_id() const {
  return s_->id;
}

boost::asio::awaitable<std::pair<error_code, std::size_t>> Exchange::read_body(
    std::span<std::uint8_t> buf) {
  return detail::read_body(*s_, buf);
}

bool Exchange::body_ended() const {
  return s_->remote_ended && s_->unread() == 0;
}

const Fields& Exchange::trailers() const {
  return s_->trailers;
}

boost::asio::awaitable<error_code> Exchange::send_data(std::span<const std::uint8_t> bytes,
                                                       bool end_stream) {
  return detail::send_data(*s_, bytes, end_stream);
}

boost::asio::awaitable<error_code> Exchange::send_trailers(const Fields& fields) {
  return detail::send_trailers(*s_, fields);
}

void Exchange::reset(ResetCode code) {
  if (s_->core) s_->core->reset(*s_, code);
}

bool Exchange::closed() const {
  return s_->closed;
}

std::uint32_t Exchange::reset_code() const {
  return s_->close_code;
}

const RequestHead& ServerExchange::request() const {
  return s_->request;
}

boost::asio::awaitable<error_code> ServerExchange::send_response_head(int status,
                                                                      const Fields& fields,
                                                                      bool end_stream) {
  if (!s_->core) co_return detail::stream_error(*s_);
  co_return s_->core->submit_response(*s_, status, fields, end_stream);
}

bool ServerExchange::response_ended() const {
  return s_->local_ended;
}

boost::asio::awaitable<error_code> ClientExchange::read_response_head() {
  return detail::read_response_head(*s_, std::chrono::steady_clock::time_point::max());
}

boost::asio::awaitable<error_code> ClientExchange::read_response_head(
    std::chrono::steady_clock::time_point deadline) {
  return detail::read_response_head(*s_, deadline);
}

Fields ClientExchange::take_response_fields() {
  return std::move(s_->response.fields);
}

const ResponseHead& ClientExchange::response() const {
  return s_->response;
}

}  // namespace sandgate::h2
