// JSON (camelCase) encodings of the registry's REST bodies, shared by RegistryServer and
// RegistryClient. Decoders validate every field and throw BadField, whose message has the form
// "<field>: <problem>, got <value>" — the server returns it verbatim as {"error": ...}.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/peer_table.h"
#include "planner/step_book.h"

namespace swarm::registry::wire {

using nlohmann::json;

class BadField : public std::invalid_argument {
 public:
  BadField(const std::string& field, const std::string& problem, const std::string& got);
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// A JSON value rendered for an error message (compact, at most ~80 characters).
std::string describe(const json& v);

// Parses a request/response body; throws BadField("body", ...) unless it is a JSON object.
json parse_object(const std::string& text);

// Peer ids: 1..128 characters of [A-Za-z0-9._-]. Used for paths and bodies alike.
bool valid_peer_id(const std::string& id);
// Regions: 0..63 characters of [A-Za-z0-9._-] (a Kubernetes label value, as the node pools' are;
// "" = none). Used for peer records and the --region option alike.
bool valid_region(const std::string& region);
// A path segment that must be a non-negative integer (stage, step, attempt); `field` names it.
int64_t parse_path_int(const std::string& segment, const std::string& field, int64_t max);

// PeerRecord: {"peerId","role","stage","host","port","metricsPort","state","step",
// "queueLength","samplesPerSecond","lastSeen"} and "region" when it is not "". lastSeen is Unix time
// (seconds) on the wire. "region" is optional both ways: a peer or registry that predates regions
// neither sends nor reads it, and a record without one is in region "".
// Required: role, host; a worker also needs stage >= 0 and port in 1..65535. peerId may be left
// out when `path_peer_id` is given (it must match if present). lastSeen is read only if present.
json to_json(const planner::PeerRecord& rec);
planner::PeerRecord peer_from_json(const json& j, const std::string& path_peer_id = "");

// Member: {"peerId","host","port","samples"}; `prefix` qualifies field names in errors.
json to_json(const planner::Member& m);
planner::Member member_from_json(const json& j, const std::string& prefix = "");

// ProgressView: {"step","samplesTotal","target","targetReached","granted"} ("granted" read as 0
// when absent; readmitted is the registry's own count, not sent).
json to_json(const planner::ProgressView& v);
planner::ProgressView progress_from_json(const json& j);

// The counts and the claim of a progress report (planner/step_book.h, Claims):
// {"samples" (done), "admitted" (used; default samples), "want" (-1 or absent: none), "unit",
//  "transfers": [{"from": peerId, "samples": n}...] (at most kMaxTransfers)}.
inline constexpr size_t kMaxTransfers = 1024;
json to_json(const planner::ClaimRequest& r);
planner::ClaimRequest claim_from_json(const json& j);

// "members": [Member...] of `j` (required). With `restore` (the body of a group re-told after a
// registry restart): at least one, at most kMaxGroupMembers, no peerId twice.
inline constexpr size_t kMaxGroupMembers = 4096;
std::vector<planner::Member> members_from_json(const json& j, bool restore = false);

// GroupView: {"state": "gathering"|"ready"|"unknown", "members": [Member...], "leader",
// "stepFull", "awaiting": [peerId...]} (the last two read as true and [] when absent).
json to_json(const planner::GroupView& v);
planner::GroupView group_from_json(const json& j);

// Field readers. A missing field throws unless a default is given.
int64_t get_int(const json& obj, const std::string& name, int64_t lo, int64_t hi,
                const std::string& prefix = "");
int64_t get_int_or(const json& obj, const std::string& name, int64_t lo, int64_t hi,
                   int64_t dflt, const std::string& prefix = "");
double get_number(const json& obj, const std::string& name, double lo, double hi,
                  const std::string& prefix = "");
double get_number_or(const json& obj, const std::string& name, double lo, double hi, double dflt,
                     const std::string& prefix = "");
std::string get_peer_id(const json& obj, const std::string& name, const std::string& prefix = "");
std::string get_host(const json& obj, const std::string& name, const std::string& prefix = "");

}  // namespace swarm::registry::wire
