// Fuzz target: the registry's request handling (registry/registry_service.h,
// RegistryService::handle) with fuzzed methods, paths, queries and bodies, in process.
//
// The input is a sequence of requests separated by the byte 0x1E; each request is a line
// "METHOD PATH[?QUERY]" and the body after it. Every input gets a fresh service (so a finding
// replays from its input alone) whose clock advances one second per request: peers expire and the
// rebalancer runs within an input. handle() must answer every request: a 500 (a bug, by its
// contract), an exception, or a JSON reply that does not parse is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "registry/registry_service.h"
#include "tests/fuzz/fuzz_util.h"

using namespace swarm;

namespace {

constexpr char kSeparator = '\x1e';
constexpr size_t kMaxRequests = 32;

struct Request {
  std::string method, path, query, body;
};

Request parse_request(std::string_view text) {
  Request r;
  size_t eol = text.find('\n');
  std::string_view line = text.substr(0, eol);
  r.body = eol == std::string_view::npos ? "" : std::string(text.substr(eol + 1));
  size_t sp = line.find(' ');
  r.method = std::string(line.substr(0, sp));
  std::string_view target = sp == std::string_view::npos ? "" : line.substr(sp + 1);
  size_t q = target.find('?');
  r.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) r.query = std::string(target.substr(q + 1));
  return r;
}

void check_reply(const Request& r, const registry::HttpReply& reply) {
  std::string what = r.method + " " + r.path + (r.query.empty() ? "" : "?" + r.query);
  if (reply.status >= 500) {
    fuzz::finding(what + " answered " + std::to_string(reply.status) + ": " + reply.body);
  }
  if (reply.content_type == "application/json" && !nlohmann::json::accept(reply.body)) {
    fuzz::finding(what + " answered a body that is not JSON: " + reply.body);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (spdlog::set_level(spdlog::level::off), true);
  (void)quiet;
  double t = 1000;
  registry::RegistryOptions options;
  options.peer_expiry_seconds = 4;
  options.clock = [&t] { return t; };
  options.num_stages = 3;
  options.rebalance = planner::RebalanceOptions{};
  options.rebalance->period_seconds = 2;
  options.rebalance->cooldown_seconds = 3;
  registry::RegistryService service(options);

  std::string_view input(reinterpret_cast<const char*>(data), size);
  for (size_t n = 0; n < kMaxRequests && !input.empty(); ++n) {
    size_t end = input.find(kSeparator);
    Request r = parse_request(input.substr(0, end));
    input = end == std::string_view::npos ? std::string_view() : input.substr(end + 1);
    try {
      check_reply(r, service.handle(r.method, r.path, r.query, r.body));
    } catch (const std::exception& e) {
      fuzz::unexpected("RegistryService::handle", e);
    }
    t += 1;
  }
  return 0;
}
