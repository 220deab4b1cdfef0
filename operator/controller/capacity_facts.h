// Kubernetes objects as the capacity planner's facts (planner/capacity.h): Nodes -> NodeFacts,
// bound Pods -> BoundPod, spec.nodePools[] -> PoolSelector, the worker pod's requests. Pure: the
// reconciler reads the objects from the watch caches and passes them through here.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "operator/api/swarmjob.h"
#include "planner/capacity.h"

namespace swarm::op {

// {"cpu": "500m", "memory": "1Gi", ...} -> amounts. A quantity that does not parse throws
// std::invalid_argument naming `field` and the value.
planner::Resources resources_of(const json& list, const std::string& field);

// What a pod asks the scheduler for: per resource, the larger of the containers' sum and the
// largest init container, plus spec.overhead; a container's limit stands in for a missing request
// (as the API server defaults it). Unparsable quantities count as 0 (the API server validated them).
planner::Resources pod_requests(const json& pod);

// The pod when it holds a node's resources: bound (spec.nodeName) and not Succeeded / Failed.
// Reads a full pod or its capacity_view().
std::optional<planner::BoundPod> bound_pod(const json& pod);

// What the capacity cache keeps of a pod (the watch of every bound pod in the cluster): name,
// namespace, uid, resourceVersion, deletionTimestamp, our managed-by label (when ours),
// spec.nodeName, status.phase and its requests computed once ("requests": {name: number}).
json capacity_view(const json& pod);

// Ready (condition Ready=True), cordoned (spec.unschedulable), being deleted, under a reclaim
// notice (operator/controller/reclaim.h, the signals that still give time), labels, taints,
// allocatable.
planner::NodeFacts node_facts(const json& node);

// The pool as the scheduler sees the worker pods it makes (manifests.cc): nodeSelector plus the
// region and zone labels, tolerations. nullptr = the implicit whole-cluster pool.
planner::PoolSelector pool_selector(const NodePool* pool);

// One worker pod's requests (spec.workers.resources; limits stand in for missing requests).
planner::Resources worker_request(const SwarmJob& job);

}  // namespace swarm::op
