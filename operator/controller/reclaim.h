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
// "lost": the node is already dead, nothing to hand off; pods are deleted at once. Except a node
// whose Ready is Unknown in the kApiBackGraceSeconds after the API server answered the operator
// again (unknown_after_api_outage): the node controller marks Unknown every node whose kubelet
// could not renew while the API server was away, and those kubelets post again within seconds.
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

// How long after the API server answers again a Ready=Unknown node is not taken for lost: longer
// than a kubelet's lease renewal (10 s by default), shorter than the node controller's grace
// before it marks a silent node Unknown (40 s by default).
inline constexpr double kApiBackGraceSeconds = 20;
// Whether `node` is NotReady only as far as the API server's absence tells: its Ready condition
// is Unknown (no kubelet report, not a kubelet saying False) and the API server answered again
// `seconds_since_api_back` seconds ago, under kApiBackGraceSeconds (< 0: it never went away).
// Found on the kubelet cluster: after an API server restart, a healthy node went Unknown for a
// moment and the operator deleted its workers at once (issue 29).
bool unknown_after_api_outage(const json& node, double seconds_since_api_back);

}  // namespace swarm::op
