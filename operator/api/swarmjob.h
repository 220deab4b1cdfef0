// The SwarmJob custom resource (group swarm-operator.io, version v1alpha1) as the operator reads
// it: the job spec of `swarm local` (swarm::JobSpec, parsed by common/ with the same rules) plus
// the fields only a cluster needs (OperatorSpec). The CRD (crds/) carries the same bounds, so the
// API server refuses bad manifests first; parse_swarmjob checks again, field by field, because an
// older CRD or a hand-edited object may still reach the operator.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/job_spec.h"

namespace swarm::op {

using json = nlohmann::json;

inline constexpr const char* kGroup = "swarm-operator.io";
inline constexpr const char* kGroupVersion = "swarm-operator.io/v1alpha1";
inline constexpr const char* kPlural = "swarmjobs";
inline constexpr const char* kDefaultImage = "ghcr.io/swarm-operator/swarm:latest";

// spec.nodePools[]: where workers may run.
struct NodePool {
  std::string name;
  std::string region;                              // -> nodeSelector topology.kubernetes.io/region
  std::string zone;                                // -> nodeSelector topology.kubernetes.io/zone
  std::map<std::string, std::string> node_selector;
  json tolerations = json::array();                // core/v1 Toleration objects, passed through
  int max_workers = -1;                            // -1 = no limit
  bool preemptible = false;
  bool autoscaled = false;                         // a cluster autoscaler / Karpenter adds nodes on demand
  int priority = 0;                                // higher is preferred
  int reclaim_grace_seconds = -1;                  // -1 = by signal (30 s, 120 s on AWS)
};

// Image and resources of one kind of pod.
struct PodResources {
  std::string image;
  json resources = json::object();  // {requests: {...}, limits: {...}}, passed through
};

struct OperatorSpec {
  PodResources workers;
  PodResources trainers;           // image defaults to workers.image
  int min_per_stage = 1;           // below: the stage is degraded
  int max_per_stage = 0;           // surge bound while replacing/moving; 0 = perStage + 1
  int unschedulable_seconds = 60;  // placement.unschedulableSeconds
  int retry_pool_seconds = 300;    // placement.retryPoolSeconds
  std::vector<NodePool> pools;     // empty: one implicit pool, the whole cluster
  // spec.checkpoint.volumeClaimName: a PersistentVolumeClaim mounted at spec.checkpoint.path in
  // every worker pod, so checkpoints outlive the node (ReadWriteMany when workers span nodes).
  // Empty: the path is a folder inside each worker's container, lost with the pod. Not with an
  // s3:// path (object storage needs no volume).
  std::string checkpoint_claim;
  // spec.checkpoint.s3.credentialsSecret: a Secret in the job's namespace with the keys
  // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and optionally AWS_SESSION_TOKEN), set as those
  // environment variables in every worker and trainer pod. Only with an s3:// checkpoint path.
  std::string s3_credentials_secret;
  // spec.suspend: run no pods (those running drain: trainers, then workers with their hand-off,
  // then the registry). For a job in a Kueue queue the operator itself sets it while the job waits
  // for admission and clears it once admitted (docs/operator.md, "With Kueue").
  bool suspend = false;
};

struct SwarmJob {
  std::string name, namespace_, uid, resource_version;
  std::int64_t generation = 0;
  std::string creation_timestamp;
  std::map<std::string, std::string> labels;  // metadata.labels (kueue.x-k8s.io/queue-name, ...)
  JobSpec spec;
  OperatorSpec op;
  json status = json::object();  // as read (the operator rebuilds it)
};

// Decodes a SwarmJob object as the API server returns it. Throws swarm::SpecError listing every
// problem with its field path (e.g. "spec.nodePools[1].maxWorkers: must be >= 0, got -1").
SwarmJob parse_swarmjob(const json& obj);

// The manifest handed to workers and trainers (ConfigMap job.yaml): the JobSpec alone, in the
// shape `swarm worker --job` reads. With a checkpoint claim or an s3:// path, its checkpoint.path
// is the job's own folder (checkpoint_folder), so jobs sharing a claim or a bucket never see each
// other's stages;
// its security.transport is always set (resolved_transport), so every pod protects alike.
json process_manifest(const SwarmJob& job);

// Where the workers write checkpoints: spec.checkpoint.path, or with a claim mounted there, the
// folder named after the job inside it (<path>/<job name>; a worker creates it on its first
// checkpoint, as the user it runs as, which a kubelet-made subPath folder would not let it do),
// or with an s3://bucket[/prefix] path, s3://bucket[/prefix]/<job name> (a bucket is shared by
// nature). A job re-created under the same name resumes from that folder.
std::string checkpoint_folder(const SwarmJob& job);

// spec.checkpoint.path names object storage (s3://), not a folder to mount.
bool checkpoints_in_object_storage(const SwarmJob& job);

// spec.security.transport, or when left out: "encrypted" when the job's nodePools name more than
// one region (its frames cross networks between regions), "authenticated" otherwise.
Transport resolved_transport(const SwarmJob& job);

// max_per_stage with its default applied.
int effective_max_per_stage(const SwarmJob& job);

}  // namespace swarm::op
