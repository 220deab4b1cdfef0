// Exceptions of swarm_net.
//
//   WireError   a frame breaks the wire contract (docs/architecture.md, "Wire format"); the message
//               names the field and the value, e.g. "tensor[1].ndim: 12 exceeds limit 8".
//   AuthError   a WireError for a wrong or missing MAC: "frame.mac: authentication failed".
//   NetError    a call or connection failed: says host:port, what happened, and timed_out().
//   RemoteError the peer answered with an Error message; remote_message() is its text, code() its
//               ErrorCode.
//   CodedError  what a handler throws to answer with an Error message of a given code (any other
//               exception answers with ErrorCode::Generic).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace swarm::net {

// The machine-readable kind of an Error message, carried on the wire as "code" next to its text
// (docs/architecture.md, "Wire format"). Callers branch on the code, never on the text.
enum class ErrorCode : uint8_t {
  Generic,            // "error": any other failure; also an Error message without a code
  BadFrame,           // "bad_frame": the request broke the wire contract (the server closes)
  Unauthenticated,    // "unauthenticated": wrong or missing MAC (the server closes)
  Busy,               // "busy": the server is at max_connections (it closes)
  ActivationMissing,  // "activation_missing": the peer no longer holds the forward's activations
  StepClosed,         // "step_closed": that step is over on that peer
};

// Every code, in declaration order.
inline constexpr ErrorCode kErrorCodes[] = {ErrorCode::Generic,           ErrorCode::BadFrame,
                                            ErrorCode::Unauthenticated,   ErrorCode::Busy,
                                            ErrorCode::ActivationMissing, ErrorCode::StepClosed};

// The wire name ("error", "bad_frame", ...).
const char* to_string(ErrorCode code);
// The wire names of every code, comma separated.
const std::string& error_code_names();
// The code named `text`, or nothing.
std::optional<ErrorCode> find_error_code(std::string_view text) noexcept;

class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AuthError : public WireError {
 public:
  using WireError::WireError;
};

class NetError : public std::runtime_error {
 public:
  NetError(const std::string& endpoint, const std::string& what, bool timed_out = false)
      : std::runtime_error(endpoint + ": " + what + (timed_out ? " [timed out]" : "")),
        endpoint_(endpoint),
        timed_out_(timed_out) {}

  const std::string& endpoint() const noexcept { return endpoint_; }
  bool timed_out() const noexcept { return timed_out_; }
  // False when the call failed before its request left (connect, handshake): the peer cannot have
  // acted on it, so the caller may send it elsewhere without doing it twice. True otherwise, also
  // when unsure (the request may have been acted on though no answer came).
  bool request_sent() const noexcept { return request_sent_; }
  // The same error, marked as failed before the request left.
  NetError unsent() const {
    NetError e(*this);
    e.request_sent_ = false;
    return e;
  }

 private:
  std::string endpoint_;
  bool timed_out_;
  bool request_sent_ = true;
};

class RemoteError : public NetError {
 public:
  RemoteError(const std::string& endpoint, const std::string& remote_message,
              ErrorCode code = ErrorCode::Generic)
      : NetError(endpoint, "remote error: " + remote_message), remote_message_(remote_message), code_(code) {}

  const std::string& remote_message() const noexcept { return remote_message_; }
  ErrorCode code() const noexcept { return code_; }

 private:
  std::string remote_message_;
  ErrorCode code_;
};

// Thrown by a request handler: the caller gets an Error message with this code and text, and its
// Client throws RemoteError with code() == code.
class CodedError : public std::runtime_error {
 public:
  CodedError(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace swarm::net
