#include "operator/controller/manifests.h"

#include <algorithm>

namespace swarm::op {
namespace {

json metadata(const SwarmJob& job, const std::string& name, const std::string& role) {
  return {{"name", name},
          {"namespace", job.namespace_},
          {"labels", object_labels(job, role)},
          {"ownerReferences", json::array({owner_reference(job)})}};
}

json secret_env(const SwarmJob& job) {
  const auto [name, key] = secret_source(job);
  return {{"name", job.spec.secret.env}, {"valueFrom", {{"secretKeyRef", {{"name", name}, {"key", key}}}}}};
}

// The job's previous secret during a rotation (key "<key>.previous" of the same Secret, optional):
// workers accept checkpoints written with it (docs/security.md).
json previous_secret_env(const SwarmJob& job) {
  const auto& s = job.spec.secret;
  const std::string name = s.secret_ref_name.empty() ? secret_name(job.name) : s.secret_ref_name;
  const std::string key = (s.secret_ref_name.empty() ? std::string("token") : s.secret_ref_key) + ".previous";
  return {{"name", s.env + "_PREVIOUS"},
          {"valueFrom", {{"secretKeyRef", {{"name", name}, {"key", key}, {"optional", true}}}}}};
}

// Object-storage credentials (spec.checkpoint.s3.credentialsSecret) for the processes that read and
// write checkpoints: keys of the same names as the variables; a session token only when the Secret
// has one. Nothing without an s3:// path and a Secret.
json s3_credentials_env(const SwarmJob& job) {
  json env = json::array();
  const std::string& secret = job.op.s3_credentials_secret;
  if (secret.empty() || !checkpoints_in_object_storage(job)) return env;
  for (const char* key : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"})
    env.push_back({{"name", key}, {"valueFrom", {{"secretKeyRef", {{"name", secret}, {"key", key}}}}}});
  env.push_back({{"name", "AWS_SESSION_TOKEN"},
                 {"valueFrom", {{"secretKeyRef", {{"name", secret}, {"key", "AWS_SESSION_TOKEN"}, {"optional", true}}}}}});
  return env;
}

// The checkpoint folder of workers and trainers (trainer 0 exports the model under it): the claim
// of spec.checkpoint.volumeClaimName mounted at spec.checkpoint.path, else an emptyDir there (the
// root filesystem is read-only), which outlives a container restart, not the pod. No volume without
// a path or with an s3:// path (object storage).
void add_checkpoint_volume(const SwarmJob& job, json& pod) {
  if (job.spec.checkpoint.path.empty() || checkpoints_in_object_storage(job)) return;
  pod["spec"]["containers"][0]["volumeMounts"].push_back(
      {{"name", "checkpoints"}, {"mountPath", job.spec.checkpoint.path}});
  if (!job.op.checkpoint_claim.empty())
    pod["spec"]["volumes"].push_back(
        {{"name", "checkpoints"}, {"persistentVolumeClaim", {{"claimName", job.op.checkpoint_claim}}}});
  else
    pod["spec"]["volumes"].push_back({{"name", "checkpoints"}, {"emptyDir", json::object()}});
}

json field_env(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

std::string registry_url(const SwarmJob& job) {
  return "http://" + registry_service_name(job.name) + "." + job.namespace_ + ".svc:" + std::to_string(kRegistryPort);
}

// Pool placement: nodeSelector (pool's own + region/zone), tolerations, and a required node
// affinity that keeps new pods off nodes that are being reclaimed.
void place(json& spec, const NodePool* pool, const std::vector<std::string>& avoid_nodes) {
  json selector = json::object();
  if (pool) {
    for (const auto& [k, v] : pool->node_selector) selector[k] = v;
    if (!pool->region.empty()) selector["topology.kubernetes.io/region"] = pool->region;
    if (!pool->zone.empty()) selector["topology.kubernetes.io/zone"] = pool->zone;
    if (!pool->tolerations.empty()) spec["tolerations"] = pool->tolerations;
  }
  if (!selector.empty()) spec["nodeSelector"] = selector;
  if (!avoid_nodes.empty()) {
    std::vector<std::string> nodes = avoid_nodes;
    std::sort(nodes.begin(), nodes.end());
    spec["affinity"] = {{"nodeAffinity",
                         {{"requiredDuringSchedulingIgnoredDuringExecution",
                           {{"nodeSelectorTerms",
                             json::array({{{"matchExpressions",
                                            json::array({{{"key", "kubernetes.io/hostname"},
                                                          {"operator", "NotIn"},
                                                          {"values", nodes}}})}}})}}}}}};
  }
}

// SWARM_REGION: the region of the pod's node pool, which the worker or trainer announces (trainers
// prefer workers of their own region). Nothing for a pool without a region: the peer is in region "".
void add_region_env(json& container, const NodePool* pool) {
  if (pool && !pool->region.empty()) container["env"].push_back({{"name", "SWARM_REGION"}, {"value", pool->region}});
}

// Every pod of a job meets the restricted Pod Security Standard: a fixed non-root user (the images'
// 65532), the runtime's default seccomp profile, no service-account token (no process of a job calls
// the API server), and an emptyDir at /tmp, the one place a process may write besides its volumes
// (the container's root filesystem is read-only, see process_container).
json pod(const SwarmJob& job, const std::string& name, const std::string& role, json container,
         const std::string& restart_policy) {
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", metadata(job, name, role)},
            {"spec",
             {{"restartPolicy", restart_policy},
              {"terminationGracePeriodSeconds", 30},
              {"enableServiceLinks", false},
              {"automountServiceAccountToken", false},
              {"securityContext",
               {{"runAsNonRoot", true},
                {"runAsUser", kPodUser},
                {"runAsGroup", kPodUser},
                {"fsGroup", kPodUser},
                {"fsGroupChangePolicy", "OnRootMismatch"},
                {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
              {"containers", json::array({container})},
              {"volumes", json::array({{{"name", "job"}, {"configMap", {{"name", spec_configmap_name(job.name)}}}},
                                       {{"name", "tmp"}, {"emptyDir", json::object()}}})}}}};
  return p;
}

json process_container(const SwarmJob& job, const std::string& name, const PodResources& res,
                       std::vector<std::string> args) {
  json c = {{"name", name},
            {"image", res.image},
            {"command", json::array({"swarm"})},
            {"args", args},
            {"env", json::array({field_env("POD_NAME", "metadata.name"), field_env("POD_IP", "status.podIP"),
                                 secret_env(job), previous_secret_env(job)})},
            {"volumeMounts", json::array({{{"name", "job"}, {"mountPath", "/etc/swarm"}, {"readOnly", true}},
                                          {{"name", "tmp"}, {"mountPath", "/tmp"}}})},
            {"securityContext",
             {{"allowPrivilegeEscalation", false},
              {"readOnlyRootFilesystem", true},
              {"runAsNonRoot", true},
              {"capabilities", {{"drop", json::array({"ALL"})}}}}}};
  if (!res.resources.empty()) c["resources"] = res.resources;
  return c;
}

}  // namespace

std::string spec_configmap_name(const std::string& job) { return job + "-spec"; }
std::string secret_name(const std::string& job) { return job + "-secret"; }
std::pair<std::string, std::string> secret_source(const SwarmJob& job) {
  const auto& s = job.spec.secret;
  if (s.secret_ref_name.empty()) return {secret_name(job.name), "token"};
  return {s.secret_ref_name, s.secret_ref_key};
}
std::string registry_service_name(const std::string& job) { return job + "-registry"; }
std::string stage_service_name(const std::string& job, int stage) { return job + "-stage-" + std::to_string(stage); }
std::string worker_pod_name(const std::string& job, int slot) { return job + "-w-" + std::to_string(slot); }
std::string trainer_pod_name(const std::string& job, int slot) { return job + "-t-" + std::to_string(slot); }
std::string registry_pod_name(const std::string& job, int slot) { return job + "-registry-" + std::to_string(slot); }
std::string network_policy_name(const std::string& job) { return job + "-swarm"; }

json owner_reference(const SwarmJob& job) {
  return {{"apiVersion", kGroupVersion}, {"kind", "SwarmJob"}, {"name", job.name},
          {"uid", job.uid}, {"controller", true}, {"blockOwnerDeletion", true}};
}

json object_labels(const SwarmJob& job, const std::string& role) {
  json l = {{kLabelManagedBy, kManagedByValue}, {"app.kubernetes.io/name", "swarm"},
            {"app.kubernetes.io/instance", job.name}, {kLabelJob, job.name}};
  if (!role.empty()) l[kLabelRole] = role;
  return l;
}

json spec_configmap(const SwarmJob& job) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", metadata(job, spec_configmap_name(job.name), "")},
          {"data", {{"job.yaml", process_manifest(job).dump(2) + "\n"}}}};
}

json data_plane_secret(const SwarmJob& job, const std::string& token) {
  json md = metadata(job, secret_name(job.name), "");
  if (!job.spec.checkpoint.path.empty()) {
    md.erase("ownerReferences");
    md["annotations"] = {{kAnnotationKeptFor, job.spec.checkpoint.path}, {kAnnotationJobUid, job.uid}};
  }
  return {{"apiVersion", "v1"}, {"kind", "Secret"}, {"type", "Opaque"}, {"metadata", md}, {"stringData", {{"token", token}}}};
}

json registry_service(const SwarmJob& job) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", metadata(job, registry_service_name(job.name), "registry")},
          {"spec",
           {{"selector", {{kLabelJob, job.name}, {kLabelRole, "registry"}}},
            {"ports", json::array({{{"name", "http"}, {"port", kRegistryPort}, {"targetPort", kRegistryPort}}})}}}};
}

json stage_service(const SwarmJob& job, int stage) {
  json md = metadata(job, stage_service_name(job.name, stage), "worker");
  md["labels"][kLabelStage] = std::to_string(stage);
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", md},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", false},
            {"selector", {{kLabelJob, job.name}, {kLabelRole, "worker"}, {kLabelStage, std::to_string(stage)}}},
            {"ports", json::array({{{"name", "data"}, {"port", kWorkerPort}, {"targetPort", kWorkerPort}}})}}}};
}

json worker_pod(const SwarmJob& job, int slot, int stage, const NodePool* pool,
                const std::vector<std::string>& avoid_nodes, const std::string& reason) {
  const std::string name = worker_pod_name(job.name, slot);
  std::vector<std::string> args = {"worker", "--job", "/etc/swarm/job.yaml", "--stage", std::to_string(stage),
                                   "--peer-id", "$(POD_NAME)", "--registry", registry_url(job),
                                   "--host", "$(POD_IP)", "--port", std::to_string(kWorkerPort),
                                   "--metrics-bind", "0.0.0.0:" + std::to_string(kMetricsPort)};
  if (job.spec.workers.threads > 0) {
    args.push_back("--threads");
    args.push_back(std::to_string(job.spec.workers.threads));
  }
  json c = process_container(job, "worker", job.op.workers, args);
  c["ports"] = json::array({{{"name", "data"}, {"containerPort", kWorkerPort}},
                            {{"name", "metrics"}, {"containerPort", kMetricsPort}}});
  // Ready only while serving its stage (GET /readyz on the metrics port): a replacement counts once
  // it has joined and downloaded its state, a draining or stopped worker stops being Ready.
  c["readinessProbe"] = {{"httpGet", {{"path", "/readyz"}, {"port", kMetricsPort}}}, {"periodSeconds", 1}};
  for (const auto& e : s3_credentials_env(job)) c["env"].push_back(e);
  add_region_env(c, pool);
  json p = pod(job, name, "worker", c, "Always");
  // Checkpoints on the claim: a stage whose every peer is lost resumes from it on any node.
  add_checkpoint_volume(job, p);
  auto& labels = p["metadata"]["labels"];
  labels[kLabelStage] = std::to_string(stage);
  labels[kLabelSlot] = std::to_string(slot);
  labels[kLabelPool] = pool ? pool->name : "";
  p["metadata"]["annotations"] = {{kAnnotationReason, reason}};
  place(p["spec"], pool, avoid_nodes);
  json match = {{kLabelJob, job.name}, {kLabelRole, "worker"}, {kLabelStage, std::to_string(stage)}};
  // Spread each stage over zones and regions so one reclaim wave cannot empty it.
  p["spec"]["topologySpreadConstraints"] = json::array(
      {{{"maxSkew", 1}, {"topologyKey", "topology.kubernetes.io/zone"}, {"whenUnsatisfiable", "ScheduleAnyway"},
        {"labelSelector", {{"matchLabels", match}}}},
       {{"maxSkew", 1}, {"topologyKey", "topology.kubernetes.io/region"}, {"whenUnsatisfiable", "ScheduleAnyway"},
        {"labelSelector", {{"matchLabels", match}}}}});
  return p;
}

json trainer_pod(const SwarmJob& job, int slot, const NodePool* pool, const std::vector<std::string>& avoid_nodes) {
  std::vector<std::string> args = {"trainer", "--job", "/etc/swarm/job.yaml", "--index", std::to_string(slot),
                                   "--peer-id", "$(POD_NAME)", "--registry", registry_url(job),
                                   "--metrics-bind", "0.0.0.0:" + std::to_string(kMetricsPort)};
  // Trainer 0 exports the model once its steps are done, where every stage's checkpoints meet: in
  // object storage or on the job's claim (a pod's own emptyDir holds only its own stage).
  if (slot == 0 && (checkpoints_in_object_storage(job) || !job.op.checkpoint_claim.empty()))
    args.push_back("--export-at-end");
  json c = process_container(job, "trainer", job.op.trainers, args);
  c["ports"] = json::array({{{"name", "metrics"}, {"containerPort", kMetricsPort}}});  // scraped by name
  for (const auto& e : s3_credentials_env(job)) c["env"].push_back(e);
  add_region_env(c, pool);
  // Trainer 0 ends with {"exportedModel": ..., "step": N} in this file; the operator reads it back
  // from the pod's status (status.exportedModel). Kubernetes' defaults, spelled out.
  c["terminationMessagePath"] = "/dev/termination-log";
  c["terminationMessagePolicy"] = "File";
  json p = pod(job, trainer_pod_name(job.name, slot), "trainer", c, "OnFailure");
  add_checkpoint_volume(job, p);
  p["metadata"]["labels"][kLabelSlot] = std::to_string(slot);
  place(p["spec"], pool, avoid_nodes);
  return p;
}

json registry_pod(const SwarmJob& job, int slot, const NodePool* pool, const std::vector<std::string>& avoid_nodes) {
  PodResources res{job.op.workers.image, json::object()};
  // --job: the registry knows the stage count (settled swarm, joiner placement) and runs
  // spec.rebalancing, as in `swarm local`.
  std::vector<std::string> args = {"registry", "--host", "0.0.0.0", "--port", std::to_string(kRegistryPort),
                                   "--peer-expiry", std::to_string(job.spec.timeouts.peer_expiry_seconds),
                                   "--job", "/etc/swarm/job.yaml"};
  json c = process_container(job, "registry", res, args);
  c["ports"] = json::array({{{"name", "http"}, {"containerPort", kRegistryPort}}});
  c["readinessProbe"] = {{"tcpSocket", {{"port", kRegistryPort}}}, {"periodSeconds", 2}};
  json p = pod(job, registry_pod_name(job.name, slot), "registry", c, "Always");
  p["metadata"]["labels"][kLabelSlot] = std::to_string(slot);
  place(p["spec"], pool, avoid_nodes);
  return p;
}

json network_policy(const SwarmJob& job, const NetworkPolicyOptions& options) {
  auto ports = [](std::initializer_list<int> numbers) {
    json out = json::array();
    for (int n : numbers) out.push_back({{"protocol", "TCP"}, {"port", n}});
    return out;
  };
  auto from_namespace = [](const std::string& ns) {
    return json::array({{{"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", ns}}}}}}});
  };
  const json job_pods = {{"matchLabels", {{kLabelJob, job.name}}}};
  json ingress = json::array();
  // The job's own pods (a podSelector alone means this namespace): everything the job serves.
  ingress.push_back({{"from", json::array({{{"podSelector", job_pods}}})},
                     {"ports", ports({kRegistryPort, kWorkerPort, kMetricsPort})}});
  const std::string& mon = options.monitoring_namespace;
  const std::string& op = options.operator_namespace;
  if (!mon.empty()) ingress.push_back({{"from", from_namespace(mon)}, {"ports", ports({kRegistryPort, kMetricsPort})}});
  if (!op.empty() && op != mon) ingress.push_back({{"from", from_namespace(op)}, {"ports", ports({kRegistryPort})}});
  return {{"apiVersion", "networking.k8s.io/v1"},
          {"kind", "NetworkPolicy"},
          {"metadata", metadata(job, network_policy_name(job.name), "")},
          {"spec", {{"podSelector", job_pods}, {"policyTypes", json::array({"Ingress"})}, {"ingress", ingress}}}};
}

const NodePool* stable_pool(const SwarmJob& job) {
  const NodePool* best = nullptr;
  for (const auto& p : job.op.pools) {
    if (p.preemptible) continue;
    if (!best || p.priority > best->priority) best = &p;
  }
  return best;
}

kueue::JobTemplates kueue_templates(const SwarmJob& job) {
  kueue::JobTemplates t;
  t.owner_reference = owner_reference(job);
  const NodePool* stable = stable_pool(job);
  t.registry = registry_pod(job, 0, stable, {});
  t.trainer = trainer_pod(job, 0, stable, {});
  for (int s = 0; s < static_cast<int>(job.spec.pipeline.stages); ++s)
    t.worker_by_stage.push_back(worker_pod(job, 0, s, nullptr, {}, "Initial"));
  return t;
}

}  // namespace swarm::op
