// Pool capacity: how many more workers each node pool can take right now, from what the
// operator's watch caches already hold (nodes, and the pods bound to them). Pure: no I/O, no
// Kubernetes types; the operator turns Node and Pod objects into NodeFacts and BoundPod
// (operator/controller/capacity_facts.h) and hands the result to the placement planner
// (placement.h: PlacementInput::capacity).
//
// A pool admits a node when the node carries every label of the pool's selector (region and zone
// included) and the pool tolerates every NoSchedule / NoExecute taint of the node. A node under a
// reclaim notice counts as its pool's (under notice) on its labels alone: the notice is often a
// taint the pool does not tolerate. An admitted
// node is usable when it is Ready, not cordoned, not being deleted and under no reclaim notice;
// only usable nodes count. A node's free room is its allocatable minus the requests of every pod
// bound to it (any owner, terminating ones included: they hold their resources until they are
// gone); a worker slot is one worker's requests (plus one of the node's "pods").
#pragma once

#include <map>
#include <string>
#include <vector>

namespace swarm::planner {

// Resource amounts by name: "cpu" in cores, "memory" in bytes, "pods", "nvidia.com/gpu", ...
using Resources = std::map<std::string, double>;

struct Taint {
  std::string key, value, effect;  // effect: NoSchedule | PreferNoSchedule | NoExecute
};

struct Toleration {
  std::string key;              // "" with Exists: every taint
  std::string op = "Equal";     // Equal | Exists
  std::string value;
  std::string effect;           // "" = every effect
};

struct NodeFacts {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  Resources allocatable;
  bool ready = true;
  bool cordoned = false;      // spec.unschedulable
  bool deleting = false;      // metadata.deletionTimestamp
  bool under_notice = false;  // a reclaim notice (spot termination, Karpenter disruption, ...)
};

// A pod bound to a node (spec.nodeName set, not Succeeded or Failed): its effective requests.
struct BoundPod {
  std::string node;
  Resources requests;
};

struct PoolSelector {
  std::string name;
  std::map<std::string, std::string> node_selector;  // the pool's labels, region and zone included
  std::vector<Toleration> tolerations;
  int max_workers = -1;  // -1 = no limit
};

// A usable node, the worker slots free on it now, and the pools that admit it.
struct NodeSlots {
  std::string name;
  int free = 0;
  std::vector<std::string> pools;
};

// What a pool has, for status and events.
struct PoolCapacity {
  std::string name;
  int nodes = 0;          // admitted by selector and tolerations
  int under_notice = 0;   // of those: under a reclaim notice
  int unusable = 0;       // of those (without a notice): NotReady, cordoned or being deleted
  int free_slots = 0;     // workers that fit now on its usable nodes
  int used_slots = 0;     // slots of its usable nodes taken by pods (anyone's)
  int max_workers = -1;
};

struct ClusterCapacity {
  std::vector<NodeSlots> nodes;      // usable nodes admitted by at least one pool, by name
  std::vector<PoolCapacity> pools;   // in the order of the selectors
};

// Slots per node are capped here (a worker without requests on a node without a pod limit).
inline constexpr int kMaxSlotsPerNode = 1024;

bool tolerates(const std::vector<Toleration>& tolerations, const Taint& taint);
bool selects(const PoolSelector& pool, const NodeFacts& node);  // labels only
bool admits(const PoolSelector& pool, const NodeFacts& node);   // labels and taints
bool usable(const NodeFacts& node);
// How many times `request` (plus one pod) fits into `free`; a resource missing from `free` counts
// as 0 when requested, except "pods" (a node that states no pod limit has none).
int slots_in(const Resources& free, const Resources& request);

ClusterCapacity cluster_capacity(const std::vector<NodeFacts>& nodes, const std::vector<BoundPod>& pods,
                                 const std::vector<PoolSelector>& pools, const Resources& worker_request);

}  // namespace swarm::planner
