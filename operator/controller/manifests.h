// The objects a SwarmJob owns, as JSON manifests. Pure: the same job and inputs give the same
// object, so a reconcile after a restart recognizes (by name and labels) what it made before.
//
//   ConfigMap <job>-spec          job.yaml: the job spec as `swarm worker/trainer --job` reads it
//   Secret    <job>-secret        token: the data-plane secret (unless spec.secret.secretRef)
//   Pod       <job>-registry-<n>  `swarm registry`: discovery, progress, matchmaking
//   Service   <job>-registry      ClusterIP in front of it (what workers/trainers dial)
//   Service   <job>-stage-<s>     headless, the stage's worker pods (DNS view of the stage)
//   Pod       <job>-w-<slot>      `swarm worker --stage S`, placed in a node pool
//   Pod       <job>-t-<slot>      `swarm trainer`
//   NetworkPolicy <job>-swarm     ingress to the job's pods (only with --network-policies)
// Every object carries the job's owner reference (controller=true) and these labels.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "operator/api/swarmjob.h"
#include "operator/kueue/workload.h"

namespace swarm::op {

inline constexpr const char* kLabelManagedBy = "app.kubernetes.io/managed-by";
inline constexpr const char* kManagedByValue = "swarm-operator";
inline constexpr const char* kLabelJob = "swarm-operator.io/job";
inline constexpr const char* kLabelRole = "swarm-operator.io/role";    // worker | trainer | registry
inline constexpr const char* kLabelStage = "swarm-operator.io/stage";
inline constexpr const char* kLabelPool = "swarm-operator.io/pool";
inline constexpr const char* kLabelSlot = "swarm-operator.io/slot";
inline constexpr const char* kAnnotationReason = "swarm-operator.io/created-for";

inline constexpr int kRegistryPort = 7400;
inline constexpr int kWorkerPort = 7500;
inline constexpr int kMetricsPort = 9400;
// The user and group every process of a job runs as (the images' USER, Dockerfile.worker).
inline constexpr int kPodUser = 65532;

std::string spec_configmap_name(const std::string& job);
std::string secret_name(const std::string& job);
// Where a job's pods get the job secret: {Secret name, key} — secret_name(job) and "token", or
// spec.secret.secretRef's name and key.
std::pair<std::string, std::string> secret_source(const SwarmJob& job);
std::string registry_service_name(const std::string& job);
std::string stage_service_name(const std::string& job, int stage);
std::string worker_pod_name(const std::string& job, int slot);
std::string trainer_pod_name(const std::string& job, int slot);
std::string registry_pod_name(const std::string& job, int slot);
std::string network_policy_name(const std::string& job);

json owner_reference(const SwarmJob& job);
json object_labels(const SwarmJob& job, const std::string& role);

json spec_configmap(const SwarmJob& job);
// The generated data-plane secret. A job with a checkpoint location (spec.checkpoint.path) keeps
// its checkpoints past its deletion, and so its Secret: that one has no owner reference (the
// garbage collector leaves it) and the annotations kAnnotationKeptFor (the checkpoint location)
// and kAnnotationJobUid (the job that uses it now); a job re-created under the name takes it up
// again and resumes from its checkpoints. Without checkpoints the Secret is owned by the job and
// goes with it.
json data_plane_secret(const SwarmJob& job, const std::string& token);
inline constexpr const char* kAnnotationKeptFor = "swarm-operator.io/kept-for-checkpoints";
inline constexpr const char* kAnnotationJobUid = "swarm-operator.io/job-uid";
json registry_service(const SwarmJob& job);
json stage_service(const SwarmJob& job, int stage);

// `avoid_nodes`: nodes under a reclaim notice; the pod is kept off them by node affinity.
json worker_pod(const SwarmJob& job, int slot, int stage, const NodePool* pool,
                const std::vector<std::string>& avoid_nodes, const std::string& reason);
json trainer_pod(const SwarmJob& job, int slot, const NodePool* pool, const std::vector<std::string>& avoid_nodes);
json registry_pod(const SwarmJob& job, int slot, const NodePool* pool, const std::vector<std::string>& avoid_nodes);

// Who else may reach a job's pods when the operator makes NetworkPolicies (--network-policies).
struct NetworkPolicyOptions {
  std::string monitoring_namespace = "monitoring";  // Prometheus: metrics and the registry's /metrics; "" = none
  std::string operator_namespace;                   // the operator: the registry's /v1/stats; "" = none
};

// Ingress to the job's pods (label swarm-operator.io/job=<job>) only from: the job's own pods (data,
// registry and metrics ports), the monitoring namespace (metrics and registry ports: the registry
// serves /metrics) and the operator's namespace (registry port). One rule per namespace: when the
// operator's namespace is the monitoring namespace, the monitoring rule covers it. Egress is not
// restricted.
json network_policy(const SwarmJob& job, const NetworkPolicyOptions& options);

// The pool trainers and the registry go to: the most preferred non-preemptible pool, else none
// (anywhere).
const NodePool* stable_pool(const SwarmJob& job);

// The pods the job would run, for its Kueue Workloads' podSet templates: a registry and a trainer
// pod in the stable pool, and a worker pod of each stage with no pool's placement (the Workloads
// add what every pool shares; operator/kueue/workload.h).
kueue::JobTemplates kueue_templates(const SwarmJob& job);

}  // namespace swarm::op
