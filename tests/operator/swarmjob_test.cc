#include "operator/api/swarmjob.h"

#include <gtest/gtest.h>

#include "common/job_spec_json.h"
#include "operator/api/status.h"

namespace swarm::op {
namespace {

json job(json spec) {
  return {{"apiVersion", kGroupVersion},
          {"kind", "SwarmJob"},
          {"metadata", {{"name", "j"}, {"namespace", "ns"}, {"uid", "u-1"}, {"generation", 3}, {"resourceVersion", "7"},
                        {"managedFields", json::array()}}},
          {"spec", spec},
          {"status", {{"phase", "Running"}}}};
}

// A spec.checkpoint that parse_swarmjob refuses with `expected` among its errors.
void expect_checkpoint_refused(const json& checkpoint, const std::string& expected) {
  try {
    parse_swarmjob(job({{"checkpoint", checkpoint}}));
    ADD_FAILURE() << "accepted " << checkpoint.dump();
  } catch (const SpecError& e) {
    std::string all;
    for (const auto& m : e.errors()) all += m + "\n";
    EXPECT_NE(all.find(expected), std::string::npos) << all;
  }
}

TEST(SwarmJob, SplitsOperatorFieldsFromTheJobSpec) {
  auto j = parse_swarmjob(job({{"pipeline", {{"stages", 3}}},
                               {"workers", {{"perStage", 2}, {"image", "img:1"}, {"maxPerStage", 4},
                                            {"resources", {{"limits", {{"nvidia.com/gpu", 1}}}}}}},
                               {"trainers", {{"count", 2}}},
                               {"placement", {{"unschedulableSeconds", 5}, {"retryPoolSeconds", 9}}},
                               {"checkpoint", {{"path", "/ckpt"}}},
                               {"nodePools", json::array({{{"name", "a"}, {"region", "r"}, {"priority", 7}, {"maxWorkers", 3},
                                                           {"preemptible", true}}})}}));
  EXPECT_EQ(j.name, "j");
  EXPECT_EQ(j.namespace_, "ns");
  EXPECT_EQ(j.generation, 3);
  EXPECT_EQ(j.spec.pipeline.stages, 3);
  EXPECT_EQ(j.spec.workers.per_stage, 2);
  EXPECT_EQ(j.op.workers.image, "img:1");
  EXPECT_EQ(j.op.trainers.image, "img:1") << "trainers default to the worker image";
  EXPECT_EQ(j.op.max_per_stage, 4);
  EXPECT_EQ(effective_max_per_stage(j), 4);
  EXPECT_EQ(j.op.unschedulable_seconds, 5);
  ASSERT_EQ(j.op.pools.size(), 1u);
  EXPECT_EQ(j.op.pools[0].priority, 7);
  EXPECT_EQ(j.op.pools[0].max_workers, 3);
  EXPECT_TRUE(j.op.pools[0].preemptible);
  // The manifest for processes is exactly the `swarm local` spec: no operator fields.
  json m = process_manifest(j);
  EXPECT_FALSE(m["spec"].contains("nodePools"));
  EXPECT_FALSE(m["spec"]["workers"].contains("image"));
  EXPECT_EQ(m["metadata"]["name"], "j");
}

TEST(SwarmJob, DefaultsWithoutOperatorFields) {
  auto j = parse_swarmjob(job(json::object()));
  EXPECT_EQ(j.op.workers.image, kDefaultImage);
  EXPECT_EQ(effective_max_per_stage(j), 2);
  EXPECT_TRUE(j.op.pools.empty());
}

TEST(SwarmJob, FieldPreciseErrors) {
  try {
    parse_swarmjob(job({{"pipeline", {{"stages", 1}}},
                        {"workers", {{"perStage", 2}, {"minPerStage", 3}}},
                        {"nodePools", json::array({{{"name", "a"}, {"maxWorkers", -1}}, {{"name", "a"}, {"zone", "z"}}})}}));
    FAIL() << "accepted";
  } catch (const SpecError& e) {
    std::string all;
    for (const auto& m : e.errors()) all += m + "\n";
    EXPECT_NE(all.find("spec.pipeline.stages: must be >= 2"), std::string::npos) << all;
    EXPECT_NE(all.find("spec.nodePools[0].maxWorkers: must be >= 0"), std::string::npos) << all;
    EXPECT_NE(all.find("spec.nodePools[1].name: duplicate"), std::string::npos) << all;
    EXPECT_NE(all.find("spec.nodePools[1].zone"), std::string::npos) << all;
  }
}

// spec.checkpoint.volumeClaimName is the operator's (not in the workers' job.yaml); it needs a path
// to be mounted at and must be a claim name.
TEST(SwarmJob, CheckpointVolumeClaim) {
  SwarmJob j = parse_swarmjob(job({{"checkpoint", {{"path", "/ckpt"}, {"volumeClaimName", "shared-ckpt"}}}}));
  EXPECT_EQ(j.op.checkpoint_claim, "shared-ckpt");
  EXPECT_EQ(j.spec.checkpoint.path, "/ckpt");
  EXPECT_FALSE(process_manifest(j)["spec"]["checkpoint"].contains("volumeClaimName"));
  EXPECT_TRUE(parse_swarmjob(job({{"checkpoint", {{"path", "/ckpt"}}}})).op.checkpoint_claim.empty());
  for (const auto& [checkpoint, expected] : std::vector<std::pair<json, std::string>>{
           {{{"volumeClaimName", "c"}}, "spec.checkpoint.path: required with spec.checkpoint.volumeClaimName (\"c\")"},
           {{{"path", "/x"}, {"volumeClaimName", "Bad_Name"}},
            "spec.checkpoint.volumeClaimName: must be a PersistentVolumeClaim name (DNS-1123 subdomain), got \"Bad_Name\""}}) {
    expect_checkpoint_refused(checkpoint, expected);
  }
}

// Two jobs on one checkpoint claim write to folders of their own: the mounted job.yaml names
// <mount path>/<job name>, which the worker creates as the user it runs as. Without a claim the path
// is the user's, unchanged.
TEST(SwarmJob, EachJobCheckpointsIntoItsOwnFolderOnAClaim) {
  json a = job({{"checkpoint", {{"path", "/ckpt"}, {"volumeClaimName", "shared-ckpt"}}}});
  json b = a;
  b["metadata"]["name"] = "other";
  const SwarmJob ja = parse_swarmjob(a), jb = parse_swarmjob(b);
  EXPECT_EQ(checkpoint_folder(ja), "/ckpt/j");
  EXPECT_EQ(process_manifest(ja)["spec"]["checkpoint"]["path"], "/ckpt/j");
  EXPECT_EQ(process_manifest(jb)["spec"]["checkpoint"]["path"], "/ckpt/other");
  EXPECT_EQ(ja.spec.checkpoint.path, "/ckpt");  // the mount point stays the claim's root
  json slash = job({{"checkpoint", {{"path", "/ckpt/"}, {"volumeClaimName", "c"}}}});
  EXPECT_EQ(checkpoint_folder(parse_swarmjob(slash)), "/ckpt/j");
  const SwarmJob own = parse_swarmjob(job({{"checkpoint", {{"path", "/data/ckpt"}}}}));
  EXPECT_EQ(checkpoint_folder(own), "/data/ckpt");
  EXPECT_EQ(process_manifest(own)["spec"]["checkpoint"]["path"], "/data/ckpt");
}

// spec.checkpoint.path s3://bucket[/prefix]: the job checkpoints under s3://bucket[/prefix]/<job>
// (a bucket is shared like a claim), the workers' job.yaml keeps spec.checkpoint.s3 without the
// operator's credentialsSecret, and no volume is involved.
TEST(SwarmJob, ObjectStorageCheckpointsGoToTheJobsOwnPrefix) {
  const SwarmJob j = parse_swarmjob(job({{"checkpoint", {{"path", "s3://ckpts/runs"},
                                                         {"s3", {{"endpoint", "http://minio.storage:9000"},
                                                                 {"credentialsSecret", "minio-creds"}}}}}}));
  EXPECT_EQ(j.op.s3_credentials_secret, "minio-creds");
  EXPECT_TRUE(j.op.checkpoint_claim.empty());
  EXPECT_TRUE(checkpoints_in_object_storage(j));
  EXPECT_EQ(j.spec.checkpoint.s3.endpoint, "http://minio.storage:9000");
  EXPECT_EQ(checkpoint_folder(j), "s3://ckpts/runs/j");
  const json m = process_manifest(j);
  EXPECT_EQ(m["spec"]["checkpoint"]["path"], "s3://ckpts/runs/j");
  EXPECT_EQ(m["spec"]["checkpoint"]["s3"]["endpoint"], "http://minio.storage:9000");
  EXPECT_FALSE(m["spec"]["checkpoint"]["s3"].contains("credentialsSecret")) << m["spec"]["checkpoint"].dump();
  // What the pods read parses, with nothing left that only a cluster reads.
  const JobSpec back = job_spec_from_json(m);
  EXPECT_EQ(back.checkpoint.path, "s3://ckpts/runs/j");
  EXPECT_TRUE(back.cluster_only_fields.empty());
  for (const auto& [path, folder] : std::vector<std::pair<std::string, std::string>>{
           {"s3://ckpts", "s3://ckpts/j"}, {"s3://ckpts/", "s3://ckpts/j"}, {"s3://ckpts/a/b/", "s3://ckpts/a/b/j"}})
    EXPECT_EQ(checkpoint_folder(parse_swarmjob(job({{"checkpoint", {{"path", path}}}}))), folder) << path;
  // Without credentialsSecret: nothing for the operator to set (the common fields still apply).
  const SwarmJob plain = parse_swarmjob(job({{"checkpoint", {{"path", "s3://ckpts"}, {"s3", {{"region", "eu-west-1"}}}}}}));
  EXPECT_TRUE(plain.op.s3_credentials_secret.empty());
  EXPECT_EQ(plain.spec.checkpoint.s3.region, "eu-west-1");
  EXPECT_FALSE(checkpoints_in_object_storage(parse_swarmjob(job({{"checkpoint", {{"path", "/ckpt"}}}}))));
}

// credentialsSecret: a Secret name, only with an s3:// path; a claim never with an s3:// path.
TEST(SwarmJob, ObjectStorageCheckpointErrorsNameTheFields) {
  const std::string long_prefix(899, 'p');  // valid alone; "/j" makes it 901 bytes
  for (const auto& [checkpoint, expected] : std::vector<std::pair<json, std::string>>{
           {{{"path", "/ckpt"}, {"s3", {{"credentialsSecret", "creds"}}}},
            "spec.checkpoint.s3.credentialsSecret: applies only to an s3:// spec.checkpoint.path, got \"creds\" with "
            "path \"/ckpt\""},
           {{{"s3", {{"credentialsSecret", "creds"}}}},
            "spec.checkpoint.s3.credentialsSecret: applies only to an s3:// spec.checkpoint.path, got \"creds\" with "
            "path \"\""},
           {{{"path", "s3://ckpts"}, {"s3", {{"credentialsSecret", "Bad_Secret"}}}},
            "spec.checkpoint.s3.credentialsSecret: must be a Secret name (DNS-1123 subdomain), got \"Bad_Secret\""},
           {{{"path", "s3://ckpts"}, {"s3", {{"credentialsSecret", 7}}}},
            "spec.checkpoint.s3.credentialsSecret: must be a string, got 7"},
           {{{"path", "s3://ckpts/runs"}, {"volumeClaimName", "shared-ckpt"}},
            "spec.checkpoint.volumeClaimName: cannot be used with an s3:// spec.checkpoint.path (\"s3://ckpts/runs\"), "
            "got \"shared-ckpt\""},
           {{{"path", "s3://ckpts/" + long_prefix}}, "spec.checkpoint.path: with the job's name: prefix is longer"}}) {
    expect_checkpoint_refused(checkpoint, expected);
  }
}

// spec.security.transport: the pods always get it set. Left out, pools in more than one region
// make it encrypted (frames cross networks between regions), one region (or none) authenticated;
// a user's choice stands either way.
TEST(SwarmJob, TheTransportIsResolvedForThePodsFromThePoolsRegions) {
  const json two = json::array({{{"name", "us"}, {"region", "us-central1"}}, {{"name", "eu"}, {"region", "europe-west4"}},
                                {{"name", "us2"}, {"region", "us-central1"}}});
  const json one = json::array({{{"name", "a"}, {"region", "us-central1"}}, {{"name", "b"}, {"region", "us-central1"}},
                                {{"name", "c"}}});
  auto transport = [](const json& spec) {
    return process_manifest(parse_swarmjob(job(spec)))["spec"]["security"]["transport"].get<std::string>();
  };
  EXPECT_EQ(transport({{"nodePools", two}}), "encrypted");
  EXPECT_EQ(transport({{"nodePools", one}}), "authenticated");
  EXPECT_EQ(transport(json::object()), "authenticated");
  EXPECT_EQ(transport({{"nodePools", two}, {"security", {{"transport", "authenticated"}}}}), "authenticated");
  EXPECT_EQ(transport({{"nodePools", one}, {"security", {{"transport", "encrypted"}}}}), "encrypted");
  // The manifest the pods read parses back to the same choice.
  const json m = process_manifest(parse_swarmjob(job({{"nodePools", two}})));
  EXPECT_EQ(job_spec_from_json(m).security.transport, Transport::Encrypted);
  try {
    parse_swarmjob(job({{"security", {{"transport", "tls"}}}}));
    ADD_FAILURE() << "accepted transport tls";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("spec.security.transport: must be one of authenticated, encrypted, got \"tls\""),
              std::string::npos)
        << e.what();
  }
}

TEST(Status, RoundTripsAndKeepsTransitionTimes) {
  SwarmJobStatus s;
  s.phase = "Degraded";
  s.preemptions = 4;
  s.stages = {{0, 1, 2, 1, 3.5}};
  s.pools = {{"us", 1, 2, 1, false, "2024-01-01T00:00:00Z", "2024-01-01T00:05:00Z", "Unschedulable"}};
  set_condition(s.conditions, {"Ready", "False", "StagesUnderServed", "m", "", 1}, "T1");
  set_condition(s.conditions, {"Ready", "False", "StagesUnderServed", "m2", "", 2}, "T2");
  EXPECT_EQ(s.conditions[0].last_transition_time, "T1") << "same status: time kept";
  set_condition(s.conditions, {"Ready", "True", "AllStagesServed", "m3", "", 2}, "T3");
  EXPECT_EQ(s.conditions[0].last_transition_time, "T3");
  auto back = status_from_json(to_json(s));
  EXPECT_EQ(to_json(back), to_json(s));
  EXPECT_EQ(to_json(s)["workersReady"], "0/0");
}

// status.loss appears once a trainer reported a loss; before that it is absent, not 0.
TEST(Status, NoLossUntilOneWasReported) {
  SwarmJobStatus s;
  EXPECT_FALSE(to_json(s).contains("loss")) << to_json(s).dump();
  s.loss = 2.5;
  EXPECT_EQ(to_json(s)["loss"], 2.5);
  EXPECT_EQ(status_from_json(to_json(s)).loss, 2.5);
}

// status.exportedModel / exportedStep: absent until a model was exported, then round-tripped.
TEST(Status, ExportedModelAppearsOnceSetAndRoundTrips) {
  SwarmJobStatus s;
  EXPECT_FALSE(to_json(s).contains("exportedModel"));
  EXPECT_FALSE(to_json(s).contains("exportedStep"));
  s.exported_model = "s3://ckpts/runs/j/export/model.safetensors";
  s.exported_step = 300;
  const json j = to_json(s);
  EXPECT_EQ(j["exportedModel"], "s3://ckpts/runs/j/export/model.safetensors");
  EXPECT_EQ(j["exportedStep"], 300);
  const SwarmJobStatus back = status_from_json(j);
  EXPECT_EQ(back.exported_model, s.exported_model);
  EXPECT_EQ(back.exported_step, 300);
  // A hand-edited status of the wrong type is ignored, not thrown.
  EXPECT_EQ(status_from_json({{"exportedModel", 5}, {"exportedStep", "x"}}).exported_model, "");
  EXPECT_EQ(status_from_json({{"exportedModel", "m"}, {"exportedStep", "x"}}).exported_step, 0);
}

TEST(SwarmJob, SuspendIsAnOperatorFieldABooleanAndTheLabelsAreRead) {
  json obj = job({{"suspend", true}});
  obj["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "team-a"}};
  const SwarmJob j = parse_swarmjob(obj);
  EXPECT_TRUE(j.op.suspend);
  EXPECT_EQ(j.labels.at("kueue.x-k8s.io/queue-name"), "team-a");
  EXPECT_FALSE(process_manifest(j)["spec"].contains("suspend"));  // not the workers' business
  EXPECT_FALSE(parse_swarmjob(job(json::object())).op.suspend);
  try {
    parse_swarmjob(job({{"suspend", "yes"}}));
    ADD_FAILURE() << "a string accepted as spec.suspend";
  } catch (const SpecError& e) {
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(e.errors()[0], "spec.suspend: must be a boolean, got \"yes\"");
  }
}

TEST(Status, QueueRoundTripsAndIsAbsentWithoutKueue) {
  EXPECT_FALSE(to_json(SwarmJobStatus{}).contains("queue"));
  SwarmJobStatus s;
  s.phase = "Draining";
  s.queue = QueueStatus{};
  s.queue->name = "team-a";
  s.queue->cluster_queue = "cq";
  s.queue->workloads = {"j-core", "j-ext"};
  s.queue->admitted_workers = 6;
  s.queue->admission = "workers 6 on spot";
  s.queue->evictions = 2;
  s.queue->last_eviction_reason = "Preempted";
  s.queue->last_eviction_message = "to accommodate a workload";
  s.queue->last_eviction_time = "2026-12-03T10:05:00Z";
  const json j = to_json(s);
  EXPECT_EQ(j["queue"]["lastEviction"]["reason"], "Preempted");
  EXPECT_EQ(j["queue"]["clusterQueue"], "cq");
  const SwarmJobStatus back = status_from_json(j);
  ASSERT_TRUE(back.queue);
  EXPECT_TRUE(*back.queue == *s.queue);
  EXPECT_EQ(back.phase, "Draining");
}

}  // namespace
}  // namespace swarm::op
