#include "worker/net/errors.h"

namespace swarm::net {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::Generic: return "error";
    case ErrorCode::BadFrame: return "bad_frame";
    case ErrorCode::Unauthenticated: return "unauthenticated";
    case ErrorCode::Busy: return "busy";
    case ErrorCode::ActivationMissing: return "activation_missing";
    case ErrorCode::StepClosed: return "step_closed";
  }
  return "error";
}

const std::string& error_code_names() {
  static const std::string names = [] {
    std::string s;
    for (ErrorCode c : kErrorCodes) s += (s.empty() ? "" : ", ") + std::string(to_string(c));
    return s;
  }();
  return names;
}

std::optional<ErrorCode> find_error_code(std::string_view text) noexcept {
  for (ErrorCode c : kErrorCodes) {
    if (text == to_string(c)) return c;
  }
  return std::nullopt;
}

}  // namespace swarm::net
