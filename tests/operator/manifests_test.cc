#include "operator/controller/manifests.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace swarm::op {
namespace {

SwarmJob sample() {
  return parse_swarmjob({{"apiVersion", kGroupVersion},
                         {"kind", "SwarmJob"},
                         {"metadata", {{"name", "lm"}, {"namespace", "ml"}, {"uid", "uid-9"}}},
                         {"spec",
                          {{"workers", {{"threads", 4}, {"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}}},
                           {"checkpoint", {{"path", "/ckpt"}}},
                           {"nodePools", json::array({{{"name", "spot"}, {"region", "r"}, {"zone", "r-a"},
                                                       {"nodeSelector", {{"gpu", "a100"}}},
                                                       {"tolerations", json::array({{{"key", "spot"}, {"operator", "Exists"}}})},
                                                       {"preemptible", true}},
                                                      {{"name", "od"}, {"priority", 1}}})}}}});
}

TEST(Manifests, WorkerPodRunsTheWorkerWherePoolAndSpreadSay) {
  SwarmJob job = sample();
  json pod = worker_pod(job, 7, 1, &job.op.pools[0], {"dying-2", "dying-1"}, "Replacement");
  EXPECT_EQ(pod["metadata"]["name"], "lm-w-7");
  EXPECT_EQ(pod["metadata"]["namespace"], "ml");
  EXPECT_EQ(pod["metadata"]["labels"]["swarm-operator.io/stage"], "1");
  EXPECT_EQ(pod["metadata"]["labels"]["swarm-operator.io/pool"], "spot");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], "uid-9");
  const json& spec = pod["spec"];
  EXPECT_EQ(spec["nodeSelector"]["gpu"], "a100");
  EXPECT_EQ(spec["nodeSelector"]["topology.kubernetes.io/region"], "r");
  EXPECT_EQ(spec["nodeSelector"]["topology.kubernetes.io/zone"], "r-a");
  EXPECT_EQ(spec["tolerations"][0]["key"], "spot");
  auto avoid = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
                   ["matchExpressions"][0];
  EXPECT_EQ(avoid["operator"], "NotIn");
  EXPECT_EQ(avoid["values"], json::array({"dying-1", "dying-2"}));
  const json& c = spec["containers"][0];
  const auto args = c["args"].get<std::vector<std::string>>();
  EXPECT_EQ(args[0], "worker");
  EXPECT_NE(std::find(args.begin(), args.end(), "--stage"), args.end());
  EXPECT_NE(std::find(args.begin(), args.end(), "http://lm-registry.ml.svc:7400"), args.end());
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"], 1);
  bool secret = false, previous = false;
  for (const auto& e : c["env"]) {
    if (e["name"] == "SWARM_JOB_SECRET") secret = e["valueFrom"]["secretKeyRef"]["name"] == "lm-secret";
    // The previous secret during a rotation, for checkpoints only: optional, so pods start without it.
    if (e["name"] == "SWARM_JOB_SECRET_PREVIOUS")
      previous = e["valueFrom"]["secretKeyRef"] == json{{"name", "lm-secret"}, {"key", "token.previous"}, {"optional", true}};
  }
  EXPECT_TRUE(secret);
  EXPECT_TRUE(previous) << c["env"].dump();
  EXPECT_EQ(spec["topologySpreadConstraints"][0]["topologyKey"], "topology.kubernetes.io/zone");
  EXPECT_EQ(spec["topologySpreadConstraints"][1]["topologyKey"], "topology.kubernetes.io/region");
  // Ready means serving its stage (the worker's GET /readyz), not merely listening.
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["path"], "/readyz");
  EXPECT_EQ(c["readinessProbe"]["httpGet"]["port"], c["ports"][1]["containerPort"]);
  EXPECT_EQ(c["ports"][1]["name"], "metrics");
}

const json* named(const json& list, const std::string& name) {
  for (const auto& v : list)
    if (v.value("name", "") == name) return &v;
  return nullptr;
}

// A worker or trainer announces its node pool's region (SWARM_REGION, which --region reads); a pod
// of a pool without a region, or of no pool, has none and is in region "".
TEST(Manifests, PodsOfAPoolWithARegionRunInIt) {
  SwarmJob job = sample();
  const json in_r = worker_pod(job, 1, 0, &job.op.pools[0], {}, "Initial")["spec"]["containers"][0]["env"];
  ASSERT_NE(named(in_r, "SWARM_REGION"), nullptr) << in_r.dump();
  EXPECT_EQ((*named(in_r, "SWARM_REGION"))["value"], "r");
  const json trainer = trainer_pod(job, 0, &job.op.pools[0], {})["spec"]["containers"][0]["env"];
  ASSERT_NE(named(trainer, "SWARM_REGION"), nullptr) << trainer.dump();
  EXPECT_EQ((*named(trainer, "SWARM_REGION"))["value"], "r");
  EXPECT_EQ(named(worker_pod(job, 2, 0, &job.op.pools[1], {}, "Initial")["spec"]["containers"][0]["env"], "SWARM_REGION"),
            nullptr);
  EXPECT_EQ(named(worker_pod(job, 3, 0, nullptr, {}, "Initial")["spec"]["containers"][0]["env"], "SWARM_REGION"),
            nullptr);
}

// With spec.checkpoint.volumeClaimName the claim is mounted at spec.checkpoint.path in worker pods;
// without one the path is an emptyDir (the container's root filesystem is read-only).
TEST(Manifests, WorkerPodsMountTheCheckpointClaim) {
  SwarmJob job = sample();
  json own = worker_pod(job, 0, 0, nullptr, {}, "Initial");
  const json* scratch = named(own["spec"]["volumes"], "checkpoints");
  ASSERT_NE(scratch, nullptr) << own["spec"]["volumes"].dump();
  EXPECT_TRUE(scratch->contains("emptyDir"));
  const json* scratch_mount = named(own["spec"]["containers"][0]["volumeMounts"], "checkpoints");
  ASSERT_NE(scratch_mount, nullptr);
  EXPECT_EQ((*scratch_mount)["mountPath"], "/ckpt");

  job.op.checkpoint_claim = "ckpt";
  json pod = worker_pod(job, 0, 0, nullptr, {}, "Initial");
  const json* claim = named(pod["spec"]["volumes"], "checkpoints");
  ASSERT_NE(claim, nullptr);
  EXPECT_EQ((*claim)["persistentVolumeClaim"]["claimName"], "ckpt");
  EXPECT_FALSE(claim->contains("emptyDir"));
  const json* mount = named(pod["spec"]["containers"][0]["volumeMounts"], "checkpoints");
  ASSERT_NE(mount, nullptr);
  EXPECT_EQ((*mount)["mountPath"], "/ckpt");
  EXPECT_FALSE(mount->contains("subPath"));  // a kubelet-made subPath folder is root's, not the worker's
  // The workers write into the job's folder on the claim.
  const auto spec = parse_job_spec(spec_configmap(job)["data"]["job.yaml"].get<std::string>());
  EXPECT_EQ(spec.checkpoint.path, "/ckpt/" + job.name);

  job.spec.checkpoint.path = "";  // no checkpoints (and so no claim: a claim needs a path): no volume
  job.op.checkpoint_claim = "";
  EXPECT_EQ(named(worker_pod(job, 0, 0, nullptr, {}, "Initial")["spec"]["volumes"], "checkpoints"), nullptr);
}

// Trainer 0 exports the model under the checkpoint folder, so trainer pods get the same checkpoint
// volume as workers (the claim, else an emptyDir: the root filesystem is read-only) and report the
// export in the default termination-message file, which the operator reads back.
TEST(Manifests, TrainerPodsMountTheCheckpointFolderAndReportTheExport) {
  SwarmJob job = sample();
  json own = trainer_pod(job, 0, nullptr, {});
  const json& c = own["spec"]["containers"][0];
  EXPECT_EQ(c["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(c["terminationMessagePolicy"], "File");
  const json* scratch = named(own["spec"]["volumes"], "checkpoints");
  ASSERT_NE(scratch, nullptr) << own["spec"]["volumes"].dump();
  EXPECT_TRUE(scratch->contains("emptyDir"));
  ASSERT_NE(named(c["volumeMounts"], "checkpoints"), nullptr);
  EXPECT_EQ((*named(c["volumeMounts"], "checkpoints"))["mountPath"], "/ckpt");

  // No shared checkpoints (each pod's emptyDir): nothing to gather, no export.
  const auto has_export_flag = [](const json& pod) {
    for (const auto& a : pod["spec"]["containers"][0]["args"])
      if (a == "--export-at-end") return true;
    return false;
  };
  EXPECT_FALSE(has_export_flag(own));
  job.op.checkpoint_claim = "shared-ckpt";
  json pod = trainer_pod(job, 0, nullptr, {});
  EXPECT_TRUE(has_export_flag(pod));  // trainer 0 exports onto the claim
  EXPECT_FALSE(has_export_flag(trainer_pod(job, 1, nullptr, {})));
  const json* claim = named(pod["spec"]["volumes"], "checkpoints");
  ASSERT_NE(claim, nullptr);
  EXPECT_EQ((*claim)["persistentVolumeClaim"]["claimName"], "shared-ckpt");
  const json* mount = named(pod["spec"]["containers"][0]["volumeMounts"], "checkpoints");
  ASSERT_NE(mount, nullptr);
  EXPECT_EQ((*mount)["mountPath"], "/ckpt");
  EXPECT_EQ(named(registry_pod(job, 0, nullptr, {})["spec"]["volumes"], "checkpoints"), nullptr);

  job.spec.checkpoint.path = "";
  job.op.checkpoint_claim = "";
  EXPECT_EQ(named(trainer_pod(job, 0, nullptr, {})["spec"]["volumes"], "checkpoints"), nullptr);
}

SwarmJob object_storage_job(const std::string& credentials_secret) {
  json checkpoint = {{"path", "s3://ckpts/runs"}, {"s3", {{"endpoint", "http://minio.storage:9000"}}}};
  if (!credentials_secret.empty()) checkpoint["s3"]["credentialsSecret"] = credentials_secret;
  return parse_swarmjob({{"apiVersion", kGroupVersion},
                         {"kind", "SwarmJob"},
                         {"metadata", {{"name", "lm"}, {"namespace", "ml"}, {"uid", "uid-9"}}},
                         {"spec", {{"checkpoint", checkpoint}}}});
}

std::vector<std::string> aws_env_names(const json& pod) {
  std::vector<std::string> out;
  for (const auto& e : pod["spec"]["containers"][0]["env"])
    if (e["name"].get<std::string>().rfind("AWS_", 0) == 0) out.push_back(e["name"]);
  return out;
}

// spec.checkpoint.s3.credentialsSecret: every worker and trainer pod reads the object store's keys
// from that Secret (keys named like the variables; the session token optional); the registry, which
// writes no checkpoint, gets none. An s3:// path is never mounted as a folder.
TEST(Manifests, ObjectStorageCredentialsComeFromTheSecretInWorkersAndTrainers) {
  const SwarmJob job = object_storage_job("minio-creds");
  for (const json& pod : {worker_pod(job, 0, 1, nullptr, {}, "Initial"), trainer_pod(job, 0, nullptr, {})}) {
    SCOPED_TRACE(pod["metadata"]["name"].get<std::string>());
    const json& env = pod["spec"]["containers"][0]["env"];
    for (const char* key : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}) {
      const json* e = named(env, key);
      ASSERT_NE(e, nullptr) << env.dump();
      EXPECT_EQ((*e)["valueFrom"]["secretKeyRef"], (json{{"name", "minio-creds"}, {"key", key}}));
    }
    const json* token = named(env, "AWS_SESSION_TOKEN");
    ASSERT_NE(token, nullptr) << env.dump();
    EXPECT_EQ((*token)["valueFrom"]["secretKeyRef"],
              (json{{"name", "minio-creds"}, {"key", "AWS_SESSION_TOKEN"}, {"optional", true}}));
    EXPECT_NE(named(env, "SWARM_JOB_SECRET"), nullptr);  // the job secret as before
    EXPECT_EQ(named(pod["spec"]["volumes"], "checkpoints"), nullptr) << pod["spec"]["volumes"].dump();
    for (const auto& m : pod["spec"]["containers"][0]["volumeMounts"])
      EXPECT_EQ(m["mountPath"].get<std::string>().find("s3:"), std::string::npos) << m.dump();
  }
  EXPECT_TRUE(aws_env_names(registry_pod(job, 0, nullptr, {})).empty());
  const json args = trainer_pod(job, 0, nullptr, {})["spec"]["containers"][0]["args"];
  EXPECT_NE(std::find(args.begin(), args.end(), "--export-at-end"), args.end()) << args.dump();  // to the bucket
  // The pods checkpoint under the job's own prefix.
  const auto spec = parse_job_spec(spec_configmap(job)["data"]["job.yaml"].get<std::string>());
  EXPECT_EQ(spec.checkpoint.path, "s3://ckpts/runs/lm");
  EXPECT_EQ(spec.checkpoint.s3.endpoint, "http://minio.storage:9000");
}

// No credentialsSecret, or checkpoints on a folder: no AWS_* variable in any pod.
TEST(Manifests, NoObjectStorageCredentialsWithoutTheSecret) {
  for (const SwarmJob& job : {object_storage_job(""), sample()}) {
    for (const json& pod : {worker_pod(job, 0, 0, nullptr, {}, "Initial"), trainer_pod(job, 0, nullptr, {}),
                            registry_pod(job, 0, nullptr, {})}) {
      SCOPED_TRACE(pod["metadata"]["name"].get<std::string>() + " " + job.spec.checkpoint.path);
      EXPECT_TRUE(aws_env_names(pod).empty()) << pod["spec"]["containers"][0]["env"].dump();
    }
  }
  SwarmJob folder = sample();
  folder.op.s3_credentials_secret = "creds";  // cannot parse so; still nothing for a folder path
  EXPECT_TRUE(aws_env_names(worker_pod(folder, 0, 0, nullptr, {}, "Initial")).empty());
  // Without a secret, an s3:// path still gets no volume.
  EXPECT_EQ(named(worker_pod(object_storage_job(""), 0, 0, nullptr, {}, "Initial")["spec"]["volumes"], "checkpoints"),
            nullptr);
}

// Every pod of a job meets the restricted Pod Security Standard and holds no API token: checked
// field by field here, and by a real API server's PodSecurity admission in
// OperatorE2E.RestrictedPodSecurityAdmitsEveryPodOfAJob.
TEST(Manifests, EveryPodIsLockedDown) {
  SwarmJob job = sample();
  for (const json& pod : {worker_pod(job, 0, 0, nullptr, {}, "Initial"), trainer_pod(job, 0, nullptr, {}),
                          registry_pod(job, 0, nullptr, {})}) {
    SCOPED_TRACE(pod["metadata"]["name"].get<std::string>());
    const json& spec = pod["spec"];
    EXPECT_EQ(spec["automountServiceAccountToken"], false);
    EXPECT_EQ(spec["securityContext"]["runAsNonRoot"], true);
    EXPECT_EQ(spec["securityContext"]["runAsUser"], 65532);
    EXPECT_EQ(spec["securityContext"]["runAsGroup"], 65532);
    EXPECT_EQ(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    ASSERT_EQ(spec["containers"].size(), 1u);
    const json& sc = spec["containers"][0]["securityContext"];
    EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
    EXPECT_EQ(sc["readOnlyRootFilesystem"], true);
    EXPECT_EQ(sc["capabilities"]["drop"], json::array({"ALL"}));
    EXPECT_FALSE(sc["capabilities"].contains("add"));
    // The one writable place besides the volumes: /tmp, an emptyDir.
    const json* tmp = named(spec["containers"][0]["volumeMounts"], "tmp");
    ASSERT_NE(tmp, nullptr);
    EXPECT_EQ((*tmp)["mountPath"], "/tmp");
    ASSERT_NE(named(spec["volumes"], "tmp"), nullptr);
    EXPECT_TRUE(named(spec["volumes"], "tmp")->contains("emptyDir"));
    for (const auto& v : spec["volumes"]) EXPECT_FALSE(v.contains("hostPath")) << v.dump();
  }
}

TEST(Manifests, SupportObjects) {
  SwarmJob job = sample();
  EXPECT_EQ(stable_pool(job)->name, "od");
  json cm = spec_configmap(job);
  auto spec = json::parse(cm["data"]["job.yaml"].get<std::string>());
  EXPECT_EQ(spec["metadata"]["name"], "lm");
  EXPECT_FALSE(spec["spec"].contains("nodePools"));
  json svc = stage_service(job, 2);
  EXPECT_EQ(svc["metadata"]["name"], "lm-stage-2");
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["selector"]["swarm-operator.io/stage"], "2");
  EXPECT_EQ(data_plane_secret(job, "t")["stringData"]["token"], "t");
  // With a checkpoint location the Secret outlives the job (its checkpoints need it); without one
  // it is the job's.
  const std::string path = job.spec.checkpoint.path;
  job.spec.checkpoint.path = "/ckpt";
  const json kept = data_plane_secret(job, "t");
  EXPECT_FALSE(kept["metadata"].contains("ownerReferences")) << kept.dump();
  EXPECT_EQ(kept["metadata"]["annotations"]["swarm-operator.io/kept-for-checkpoints"], "/ckpt");
  EXPECT_EQ(kept["metadata"]["annotations"]["swarm-operator.io/job-uid"], job.uid);
  job.spec.checkpoint.path = "";
  const json owned = data_plane_secret(job, "t");
  ASSERT_EQ(owned["metadata"]["ownerReferences"].size(), 1u) << owned.dump();
  EXPECT_EQ(owned["metadata"]["ownerReferences"][0]["uid"], job.uid);
  EXPECT_FALSE(owned["metadata"].contains("annotations"));
  job.spec.checkpoint.path = path;
  EXPECT_EQ(registry_pod(job, 0, stable_pool(job), {})["spec"].value("nodeSelector", json::object()).size(), 0u);
}

// The registry reads the job's spec like the workers do (stage count, spec.rebalancing): the same
// mounted file, and that file parses as a job spec with the job's rebalancing settings.
TEST(Manifests, RegistryReadsTheMountedJobSpec) {
  SwarmJob job = sample();
  json pod = registry_pod(job, 0, stable_pool(job), {});
  const json& c = pod["spec"]["containers"][0];
  const auto args = c["args"].get<std::vector<std::string>>();
  auto at = std::find(args.begin(), args.end(), "--job");
  ASSERT_NE(at, args.end()) << c["args"].dump();
  ASSERT_NE(at + 1, args.end());
  EXPECT_EQ(*(at + 1), "/etc/swarm/job.yaml");
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"], "/etc/swarm");
  const auto spec = parse_job_spec(spec_configmap(job)["data"]["job.yaml"].get<std::string>());
  EXPECT_EQ(spec.pipeline.stages, job.spec.pipeline.stages);
  EXPECT_EQ(spec.rebalancing.enabled, job.spec.rebalancing.enabled);
  EXPECT_EQ(spec.rebalancing.period_seconds, job.spec.rebalancing.period_seconds);
  // The job secret, as the workers get it: the registry takes only requests signed with it.
  const json* env = named(c["env"], "SWARM_JOB_SECRET");
  ASSERT_NE(env, nullptr) << c["env"].dump();
  EXPECT_EQ((*env)["valueFrom"]["secretKeyRef"], (json{{"name", "lm-secret"}, {"key", "token"}}));
  EXPECT_EQ(secret_source(job), std::make_pair(std::string("lm-secret"), std::string("token")));
  job.spec.secret.secret_ref_name = "team-token";
  job.spec.secret.secret_ref_key = "hmac";
  EXPECT_EQ(secret_source(job), std::make_pair(std::string("team-token"), std::string("hmac")));
}

// The per-job NetworkPolicy: it selects every pod of the job, lets the job's own pods reach every
// port those pods serve, the monitoring namespace the metrics and registry ports, the operator's
// namespace the registry port; one rule per namespace when those two are the same.
TEST(Manifests, NetworkPolicyOpensTheJobsPortsToItsPodsMonitoringAndTheOperator) {
  SwarmJob job = sample();
  auto port_set = [](const json& rule) {
    std::set<int> out;
    for (const auto& p : rule["ports"]) {
      EXPECT_EQ(p["protocol"], "TCP") << p.dump();
      out.insert(p["port"].get<int>());
    }
    return out;
  };
  auto from_namespace = [](const json& rule) -> std::string {
    if (rule["from"].size() != 1 || !rule["from"][0].contains("namespaceSelector")) return "";
    EXPECT_FALSE(rule["from"][0].contains("podSelector")) << rule.dump();  // every pod of that namespace
    return rule["from"][0]["namespaceSelector"]["matchLabels"].value("kubernetes.io/metadata.name", "");
  };
  const json np = network_policy(job, {"prom", "swarm-system"});
  EXPECT_EQ(np["apiVersion"], "networking.k8s.io/v1");
  EXPECT_EQ(np["kind"], "NetworkPolicy");
  EXPECT_EQ(np["metadata"]["name"], "lm-swarm");
  EXPECT_EQ(np["metadata"]["namespace"], "ml");
  EXPECT_EQ(np["metadata"]["ownerReferences"][0]["uid"], "uid-9");
  EXPECT_EQ(np["metadata"]["labels"]["swarm-operator.io/job"], "lm");
  EXPECT_EQ(np["metadata"]["labels"]["app.kubernetes.io/managed-by"], "swarm-operator");
  const json& spec = np["spec"];
  EXPECT_EQ(spec["podSelector"], json({{"matchLabels", {{"swarm-operator.io/job", "lm"}}}}));
  EXPECT_EQ(spec["policyTypes"], json::array({"Ingress"}));  // egress is not restricted
  ASSERT_EQ(spec["ingress"].size(), 3u) << spec.dump(2);

  // (a) The job's own pods, this namespace only (a podSelector without a namespaceSelector).
  const json& own = spec["ingress"][0];
  ASSERT_EQ(own["from"].size(), 1u);
  EXPECT_EQ(own["from"][0], json({{"podSelector", spec["podSelector"]}}));
  EXPECT_EQ(port_set(own), (std::set<int>{kRegistryPort, kWorkerPort, kMetricsPort}));
  // Every pod of the job is selected, and every port one of them serves is open to the others.
  const std::vector<json> pods = {worker_pod(job, 0, 0, &job.op.pools[0], {}, "Initial"),
                                  trainer_pod(job, 0, stable_pool(job), {}), registry_pod(job, 0, stable_pool(job), {})};
  for (const auto& pod : pods) {
    for (const auto& [k, v] : spec["podSelector"]["matchLabels"].items())
      EXPECT_EQ(pod["metadata"]["labels"].value(k, ""), v) << pod["metadata"]["name"];
    for (const auto& c : pod["spec"]["containers"])
      for (const auto& p : c["ports"])
        EXPECT_TRUE(port_set(own).count(p["containerPort"].get<int>())) << pod["metadata"]["name"] << " " << p.dump();
  }
  // (b) The monitoring namespace: metrics, and the registry's /metrics on its own port.
  EXPECT_EQ(from_namespace(spec["ingress"][1]), "prom");
  EXPECT_EQ(port_set(spec["ingress"][1]), (std::set<int>{kRegistryPort, kMetricsPort}));
  // (c) The operator's namespace: the registry only (GET /v1/stats).
  EXPECT_EQ(from_namespace(spec["ingress"][2]), "swarm-system");
  EXPECT_EQ(port_set(spec["ingress"][2]), (std::set<int>{kRegistryPort}));

  // The operator in the monitoring namespace: one rule for both, the wider one.
  const json same = network_policy(job, {"monitoring", "monitoring"})["spec"];
  ASSERT_EQ(same["ingress"].size(), 2u) << same.dump(2);
  EXPECT_EQ(from_namespace(same["ingress"][1]), "monitoring");
  EXPECT_EQ(port_set(same["ingress"][1]), (std::set<int>{kRegistryPort, kMetricsPort}));
  // No monitoring namespace: the job's pods and the operator only.
  const json none = network_policy(job, {"", "swarm-system"})["spec"];
  ASSERT_EQ(none["ingress"].size(), 2u) << none.dump(2);
  EXPECT_EQ(from_namespace(none["ingress"][1]), "swarm-system");
  EXPECT_EQ(port_set(none["ingress"][1]), (std::set<int>{kRegistryPort}));
  // The default monitoring namespace is "monitoring".
  EXPECT_EQ(NetworkPolicyOptions{}.monitoring_namespace, "monitoring");
}

}  // namespace
}  // namespace swarm::op
