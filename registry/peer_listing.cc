#include "registry/peer_listing.h"

#include <stdexcept>

#include "registry/wire.h"

namespace swarm::registry {
namespace {

using wire::json;

// How RegistryService serializes a reply body (invalid UTF-8 replaced, not thrown on).
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

constexpr char kLastSeenKey[] = "\"lastSeen\":";

}  // namespace

void PeerListing::put(const planner::PeerRecord& rec, double now) {
  // The record's text with lastSeen 0, split around that value. The key's text occurs once: the
  // record is a flat object, and in a string value every '"' is escaped.
  json j = wire::to_json(rec);
  j["lastSeen"] = 0;
  const std::string text = dump(j);
  const std::string marker = std::string(kLastSeenKey) + "0";
  const size_t at = text.find(marker);
  if (at == std::string::npos) throw std::logic_error("peer listing: no lastSeen in " + text);
  auto [it, added] = all_.try_emplace(rec.peer_id);
  Entry& e = it->second;
  if (!added && e.stage != rec.stage) {
    auto bucket = by_stage_.find(e.stage);
    bucket->second.erase(rec.peer_id);
    if (bucket->second.empty()) by_stage_.erase(bucket);
  }
  e.role = rec.role;
  e.stage = rec.stage;
  e.last_seen = now;
  e.head = text.substr(0, at + sizeof(kLastSeenKey) - 1);
  e.tail = text.substr(at + marker.size());
  by_stage_[e.stage][rec.peer_id] = &e;
}

void PeerListing::erase(const std::string& peer_id) {
  auto it = all_.find(peer_id);
  if (it == all_.end()) return;
  auto bucket = by_stage_.find(it->second.stage);
  bucket->second.erase(peer_id);
  if (bucket->second.empty()) by_stage_.erase(bucket);
  all_.erase(it);
}

void PeerListing::append(std::string& out, const Entry& e, double now, double unix_now) const {
  if (out.back() != '[') out += ',';
  out += e.head;
  out += dump(json(unix_now - (now - e.last_seen)));
  out += e.tail;
}

std::string PeerListing::render(const std::string& role, int stage, double now, double unix_now) const {
  std::string out = "{\"peers\":[";
  if (stage == -1) {
    for (const auto& [id, e] : all_)
      if (role.empty() || e.role == role) append(out, e, now, unix_now);
  } else if (auto bucket = by_stage_.find(stage); bucket != by_stage_.end()) {
    out.reserve(bucket->second.size() * (bucket->second.begin()->second->head.size() + 160));
    for (const auto& [id, e] : bucket->second)
      if (role.empty() || e->role == role) append(out, *e, now, unix_now);
  }
  out += "]}";
  return out;
}

}  // namespace swarm::registry
