#include "planner/peer_table.h"

#include <utility>

namespace swarm::planner {

PeerTable::PeerTable(double expiry_seconds) : expiry_seconds_(expiry_seconds) {}

bool PeerTable::alive(const PeerRecord& rec, double now) const {
  return now - rec.last_seen <= expiry_seconds_;
}

void PeerTable::upsert(PeerRecord rec, double now) {
  rec.last_seen = now;
  std::string id = rec.peer_id;
  peers_[std::move(id)] = std::move(rec);
}

bool PeerTable::remove(const std::string& id) { return peers_.erase(id) > 0; }

std::vector<PeerRecord> PeerTable::live(double now, const std::string& role, int stage) const {
  std::vector<PeerRecord> out;
  for (const auto& [id, rec] : peers_) {
    if (!alive(rec, now)) continue;
    if (!role.empty() && rec.role != role) continue;
    if (stage != -1 && rec.stage != stage) continue;
    out.push_back(rec);
  }
  return out;
}

bool PeerTable::is_live(const std::string& id, double now) const {
  auto it = peers_.find(id);
  return it != peers_.end() && alive(it->second, now);
}

std::optional<PeerRecord> PeerTable::find(const std::string& id, double now) const {
  auto it = peers_.find(id);
  if (it == peers_.end() || !alive(it->second, now)) return std::nullopt;
  return it->second;
}

std::optional<PeerRecord> PeerTable::stored(const std::string& id) const {
  auto it = peers_.find(id);
  if (it == peers_.end()) return std::nullopt;
  return it->second;
}

std::vector<PeerRecord> PeerTable::expire(double now) {
  std::vector<PeerRecord> dropped;
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (alive(it->second, now)) {
      ++it;
    } else {
      dropped.push_back(std::move(it->second));
      it = peers_.erase(it);
    }
  }
  return dropped;
}

}  // namespace swarm::planner
