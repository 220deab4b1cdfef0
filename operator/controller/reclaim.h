// Reclaim notices: is this Node (or Pod) about to disappear? Pure functions over the objects as
// the API server returns them; no I/O, no clock.
//
//  signal                                                   reason                  grace
//  taint cloud.google.com/impending-node-termination        GKESpotTermination      30 s
//  spot node (cloud.google.com/gke-spot=true) cordoned or being deleted
//                                                           GKESpotShutdown         30 s
//  taint karpenter.sh/disrupted (and karpenter.sh/disruption=disrupting)
//                                                           KarpenterDisruption     120 s
//  taint aws-node-termination-handler/spot-itn              AWSSpotInterruption     120 s
//  taint remediator.kubernetes.azure.com/unschedulable on an AKS spot node
//                                                           AKSSpotEviction         30 s
//  node being deleted (deletionTimestamp)                   NodeDeleting            30 s
//  node condition Ready False/Unknown                       NodeNotReady            lost
//  node gone from the API                                   NodeDeleted             lost
//  pod condition DisruptionTarget=True                      DisruptionTarget        30 s
//  pod phase Failed / Succeeded (a worker never ends)       PodFailed               lost
// "lost": the node is already dead, nothing to hand off; pods are deleted at once.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "planner/placement.h"

namespace swarm::op {

using json = nlohmann::json;

using planner::Notice;  // the placement planner acts on it

inline constexpr int kDefaultGraceSeconds = 30;  // GKE and AKS spot
inline constexpr int kAwsGraceSeconds = 120;     // EC2 spot interruption notice

std::optional<Notice> node_notice(const json& node);
std::optional<Notice> pod_notice(const json& pod);
// The notice for a node missing from the API.
Notice node_deleted_notice();

}  // namespace swarm::op
