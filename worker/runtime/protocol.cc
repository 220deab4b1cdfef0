#include "worker/runtime/protocol.h"

#include <stdexcept>

namespace swarm::runtime {

nlohmann::json parse_meta(const net::Message& m) {
  if (m.meta.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(m.meta, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw std::invalid_argument("meta: not a JSON object (message type " + std::to_string(m.type) + ")");
  return j;
}

namespace {
const nlohmann::json& field(const nlohmann::json& meta, const char* name) {
  auto it = meta.find(name);
  if (it == meta.end()) throw std::invalid_argument(std::string("meta.") + name + ": missing");
  return *it;
}
}  // namespace

int64_t meta_int(const nlohmann::json& meta, const char* name) {
  const auto& v = field(meta, name);
  if (!v.is_number_integer())
    throw std::invalid_argument(std::string("meta.") + name + ": expected an integer, got " + v.dump());
  return v.get<int64_t>();
}

int64_t meta_int(const nlohmann::json& meta, const char* name, int64_t fallback) {
  if (!meta.contains(name)) return fallback;
  return meta_int(meta, name);
}

double meta_double(const nlohmann::json& meta, const char* name) {
  const auto& v = field(meta, name);
  if (!v.is_number())
    throw std::invalid_argument(std::string("meta.") + name + ": expected a number, got " + v.dump());
  return v.get<double>();
}

std::string meta_string(const nlohmann::json& meta, const char* name) {
  const auto& v = field(meta, name);
  if (!v.is_string())
    throw std::invalid_argument(std::string("meta.") + name + ": expected a string, got " + v.dump());
  return v.get<std::string>();
}

bool meta_bool(const nlohmann::json& meta, const char* name, bool fallback) {
  auto it = meta.find(name);
  if (it == meta.end()) return fallback;
  if (!it->is_boolean())
    throw std::invalid_argument(std::string("meta.") + name + ": expected true/false, got " + it->dump());
  return it->get<bool>();
}

net::Message make_message(uint16_t type, const nlohmann::json& meta) {
  net::Message m;
  m.type = type;
  m.meta = meta.dump();
  return m;
}

}  // namespace swarm::runtime
