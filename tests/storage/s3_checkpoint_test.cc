// Object storage against a real MinIO server (scripts/build-minio.sh): the S3 client (signing,
// multipart upload, paging, errors) and stage checkpoints in a bucket (manifest last, a
// half-written or changed checkpoint never restored), then `swarm local` checkpointing to MinIO,
// exporting there at the end, and a second run resuming from it.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/s3_url.h"
#include "tests/storage/minio_server.h"
#include "common/ports.h"
#include "tests/local/fault_matrix_helpers.h"
#include "tests/local/swarm_process.h"
#include "worker/storage/s3_client.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/object_store.h"

namespace {

using swarm::CheckpointS3Spec;
using swarm::storage::S3Client;
using swarm::storage::S3Error;
using swarm::storage::S3Settings;
namespace runtime = swarm::runtime;

const std::string kKey = runtime::checkpoint_key("s3-test-secret");

class S3Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new swarm::testing::MinioServer("swarm-test"); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static S3Settings settings() { return S3Settings::resolve(CheckpointS3Spec{}); }
  static std::string url(const std::string& rest) { return "s3://swarm-test/" + rest; }
  static swarm::testing::MinioServer* server_;
};
swarm::testing::MinioServer* S3Test::server_ = nullptr;

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u + seed) >> 13);
  return s;
}

TEST_F(S3Test, ObjectsGoUpComeBackAreListedAndDeleted) {
  S3Client c(settings());
  const std::string key = "basic/a key with spaces+plus/ünïcode~.bin";  // signed as encoded
  c.put("swarm-test", key, "hello, bucket");
  c.put("swarm-test", "basic/b", "");
  EXPECT_EQ(c.get("swarm-test", key).value_or("<none>"), "hello, bucket");
  EXPECT_EQ(c.get("swarm-test", "basic/b").value_or("<none>"), "");
  EXPECT_FALSE(c.get("swarm-test", "basic/missing").has_value());
  auto listed = c.list("swarm-test", "basic/");
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].key, key);
  EXPECT_EQ(listed[0].size, 13);
  c.remove("swarm-test", key);
  c.remove("swarm-test", key);  // already gone: no error
  EXPECT_EQ(c.list("swarm-test", "basic/").size(), 1u);
}

TEST_F(S3Test, ALargeObjectGoesUpInPartsAndComesBackWhole) {
  auto s = settings();
  s.part_size = 5 << 20;
  S3Client c(s);
  const std::string big = pattern((12 << 20) + 3, 7);
  c.put("swarm-test", "multipart/big", big);
  // CreateMultipartUpload, 3 parts, CompleteMultipartUpload.
  EXPECT_EQ(c.traffic().requests, 5);
  // The parts, and the completion's few hundred bytes of XML.
  EXPECT_GE(c.traffic().bytes_up, static_cast<int64_t>(big.size()));
  EXPECT_LT(c.traffic().bytes_up, static_cast<int64_t>(big.size()) + 1000);
  const auto back = c.get("swarm-test", "multipart/big");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->size(), big.size());
  EXPECT_TRUE(*back == big);
}

TEST_F(S3Test, ListingPagesThroughEveryObject) {
  auto s = settings();
  s.list_page_size = 2;
  S3Client c(s);
  for (int i = 0; i < 7; ++i) c.put("swarm-test", "paged/" + std::to_string(i), std::to_string(i));
  const auto all = c.list("swarm-test", "paged/");
  ASSERT_EQ(all.size(), 7u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(all[i].key, "paged/" + std::to_string(i));
  EXPECT_GE(c.traffic().requests, 7 + 4);  // 7 PUTs, 4 pages
}

TEST_F(S3Test, ErrorsNameTheOperationTheLocationAndS3sCode) {
  S3Client c(settings());
  try {
    c.put("no-such-bucket", "x", "y");
    FAIL() << "a PUT to a missing bucket succeeded";
  } catch (const S3Error& e) {
    EXPECT_EQ(e.status, 404);
    EXPECT_EQ(e.code, "NoSuchBucket");
    EXPECT_NE(std::string(e.what()).find("PUT s3://no-such-bucket/x"), std::string::npos) << e.what();
  }
  auto wrong = settings();
  wrong.secret_key = "not-the-secret";
  wrong.attempts = 1;
  try {
    S3Client(wrong).get("swarm-test", "x");
    FAIL() << "a request signed with the wrong key was answered";
  } catch (const S3Error& e) {
    EXPECT_EQ(e.status, 403);
    EXPECT_EQ(e.code, "SignatureDoesNotMatch") << e.what();
  }
  auto closed = settings();
  closed.endpoint = "http://127.0.0.1:1";
  closed.attempts = 2;
  S3Client down(closed);
  try {
    down.list("swarm-test", "");
    FAIL() << "a closed port answered";
  } catch (const S3Error& e) {
    EXPECT_EQ(e.status, 0);
    EXPECT_NE(std::string(e.what()).find("no answer"), std::string::npos) << e.what();
  }
  EXPECT_EQ(down.traffic().retries, 1);
}

TEST_F(S3Test, SettingsComeFromTheSpecOverTheEnvironmentAndNameWhatIsMissing) {
  CheckpointS3Spec spec;
  spec.endpoint = "http://minio.example:9000/";
  spec.region = "eu-west-3";
  spec.part_size_mib = 8;
  auto s = S3Settings::resolve(spec);
  EXPECT_EQ(s.endpoint, "http://minio.example:9000");
  EXPECT_EQ(s.region, "eu-west-3");
  EXPECT_TRUE(s.path_style);  // an endpoint: path style unless told otherwise
  EXPECT_EQ(s.part_size, 8 << 20);
  spec.path_style = false;
  EXPECT_FALSE(S3Settings::resolve(spec).path_style);
  spec.endpoint = "http://host:1/path";
  EXPECT_THROW(S3Settings::resolve(spec), std::invalid_argument);
  const std::string saved = std::getenv("AWS_SECRET_ACCESS_KEY");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  try {
    S3Settings::resolve(CheckpointS3Spec{});
    ADD_FAILURE() << "resolved without a secret key";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("credentialsSecret"), std::string::npos) << e.what();
  }
  ::setenv("AWS_SECRET_ACCESS_KEY", saved.c_str(), 1);
}

TEST_F(S3Test, CheckpointsKeepTheNewestAndAuthenticate) {
  const runtime::CheckpointLocation where(url("keep"));
  for (int step : {10, 20, 30}) runtime::write_checkpoint(where, 1, step, "state-" + std::to_string(step), 2, kKey);
  const auto all = runtime::list_checkpoints(where, 1);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].step, 30);
  EXPECT_EQ(all[0].path, url("keep/stage-1/step-000000030.ckpt"));
  EXPECT_EQ(all[1].step, 20);
  EXPECT_EQ(runtime::open_checkpoint(where, all[0], 1, kKey), "state-30");
  EXPECT_TRUE(runtime::list_checkpoints(where, 0).empty());
  // Step 10's manifest and object are both gone.
  S3Client c(settings());
  for (const auto& o : c.list("swarm-test", "keep/stage-1/"))
    EXPECT_EQ(o.key.find("step-000000010"), std::string::npos) << o.key;
  // Another job's secret is refused.
  EXPECT_THROW(runtime::open_checkpoint(where, all[0], 1, runtime::checkpoint_key("another")), std::runtime_error);
}

TEST_F(S3Test, AHalfWrittenCheckpointIsNeverListedAndIsClearedLater) {
  const runtime::CheckpointLocation where(url("half"));
  runtime::write_checkpoint(where, 0, 20, "state-20", 3, kKey);
  S3Client c(settings());
  // A writer that died between the object and its manifest, and one that died mid-multipart.
  c.put("swarm-test", "half/stage-0/step-000000040.ckpt", "the object of step 40, no manifest");
  auto s = settings();
  s.part_size = 5 << 20;
  s.endpoint = "http://127.0.0.1:1";  // the upload starts nowhere: nothing may appear
  s.attempts = 1;
  EXPECT_THROW(S3Client(s).put("swarm-test", "half/stage-0/step-000000050.ckpt", pattern(6 << 20, 1)), S3Error);
  auto listed = runtime::list_checkpoints(where, 0);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].step, 20);
  // The next checkpoint clears the orphan object older than itself.
  runtime::write_checkpoint(where, 0, 60, "state-60", 3, kKey);
  bool orphan = false;
  for (const auto& o : c.list("swarm-test", "half/stage-0/")) orphan |= o.key.find("step-000000040") != std::string::npos;
  EXPECT_FALSE(orphan);
  listed = runtime::list_checkpoints(where, 0);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].step, 60);
}

TEST_F(S3Test, AnObjectThatDiffersFromItsManifestIsRefusedAndTheOlderOneRestores) {
  const runtime::CheckpointLocation where(url("changed"));
  runtime::write_checkpoint(where, 0, 1, "state-one", 5, kKey);
  runtime::write_checkpoint(where, 0, 2, "state-two", 5, kKey);
  S3Client c(settings());
  const std::string key = "changed/stage-0/step-000000002.ckpt";
  const std::string good = c.get("swarm-test", key).value();
  c.put("swarm-test", key, good.substr(0, good.size() - 10));  // cut short
  auto all = runtime::list_checkpoints(where, 0);
  ASSERT_EQ(all.size(), 2u);
  try {
    runtime::open_checkpoint(where, all[0], 0, kKey);
    FAIL() << "a cut checkpoint was restored";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("its manifest says"), std::string::npos) << e.what();
  }
  std::string flipped = good;
  flipped[3] ^= 1;
  c.put("swarm-test", key, flipped);  // same size, one bit changed
  try {
    runtime::open_checkpoint(where, all[0], 0, kKey);
    FAIL() << "a changed checkpoint was restored";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("SHA-256"), std::string::npos) << e.what();
  }
  EXPECT_EQ(runtime::open_checkpoint(where, all[1], 0, kKey), "state-one");
  c.put("swarm-test", "changed/stage-0/step-000000001.manifest.json", "{not json");
  EXPECT_THROW(runtime::open_checkpoint(where, all[1], 0, kKey), std::runtime_error);
}

TEST_F(S3Test, SwarmLocalCheckpointsToMinioExportsThereAndResumesFromIt) {
  using namespace swarm::e2e;
  const auto dir = fresh_dir("s3-local");
  const std::string body = R"(
  model: {hiddenSize: 64, numHeads: 4, layersPerStage: 1, sequenceLength: 64}
  pipeline: {stages: 2}
  training: {globalBatch: 16, microbatch: 4, maxSteps: MAX, evalBatches: 2, schedule: {warmupSteps: 2}}
  workers: {perStage: 1, threads: 1}
  checkpoint: {path: "s3://swarm-test/local-run", everySteps: 4, keep: 2, s3: {partSizeMiB: 5}}
)";
  auto job_with = [&](int steps) {
    std::string b = body;
    b.replace(b.find("MAX"), 3, std::to_string(steps));
    return write_job(dir, b);
  };
  const std::string logs = dir + "/logs";
  int rc = run({"local", job_with(10), "--summary", dir + "/first.json", "--log-dir", logs, "--no-progress"},
               dir + "/first.log", 300);
  ASSERT_EQ(rc, 0) << read_text(dir + "/first.log");
  auto first = read_json(dir + "/first.json");
  // The stages may take one step more than maxSteps with the microbatches in flight at the end;
  // they checkpoint it on their way out.
  const int64_t end = first["steps"].get<int64_t>();
  EXPECT_GE(end, 10) << first.dump();
  EXPECT_LE(end, 11) << first.dump();
  EXPECT_EQ(first.value("exported_model", ""), url("local-run/export/model.safetensors")) << first.dump();
  S3Client c(settings());
  for (int s = 0; s < 2; ++s) {
    const auto listed = runtime::list_checkpoints(runtime::CheckpointLocation(url("local-run")), s);
    ASSERT_EQ(listed.size(), 2u) << "stage " << s;  // keep: 2
    EXPECT_EQ(listed[0].step, end);
    EXPECT_EQ(listed[1].step, end == 10 ? 8 : 10);  // the last step of the training is checkpointed too
  }
  EXPECT_TRUE(c.get("swarm-test", "local-run/export/config.json").has_value());
  // The exported model evaluates straight from the bucket.
  const std::string text = dir + "/eval.txt";
  std::ofstream(text) << read_text(std::string(SWARM_SOURCE_DIR) + "/README.md");
  rc = run({"eval", "--model", url("local-run/export/model.safetensors"), "--data", text, "--batches", "2"},
           dir + "/eval.log", 120);
  ASSERT_EQ(rc, 0) << read_text(dir + "/eval.log");
  EXPECT_NE(read_text(dir + "/eval.log").find("perplexity"), std::string::npos) << read_text(dir + "/eval.log");
  // And swarm export reads the bucket too.
  rc = run({"export", "--job", job_with(10), "--secret-file", logs + "/job-secret", "--out", dir + "/model.safetensors"},
           dir + "/export.log", 120);
  ASSERT_EQ(rc, 0) << read_text(dir + "/export.log");
  EXPECT_NE(read_text(dir + "/export.log").find("exported step " + std::to_string(end) + ":"), std::string::npos)
      << read_text(dir + "/export.log");

  // A second run of the same job (same log folder, so the same secret) resumes where it ended.
  rc = run({"local", job_with(14), "--summary", dir + "/second.json", "--log-dir", logs, "--no-progress"},
           dir + "/second.log", 300);
  ASSERT_EQ(rc, 0) << read_text(dir + "/second.log");
  auto second = read_json(dir + "/second.json");
  EXPECT_EQ(second["checkpoint_restores"].get<int64_t>(), 2) << second.dump();
  EXPECT_LT(second["loss_first"].get<double>(), first["loss_first"].get<double>() - 0.5) << second.dump();
  const std::string worker_log = read_text(logs + "/stage0-w0.log");
  char name[64];
  std::snprintf(name, sizeof(name), "local-run/stage-0/step-%09lld.ckpt", static_cast<long long>(end));
  EXPECT_NE(worker_log.find("restored from checkpoint " + url(name)), std::string::npos) << worker_log.substr(0, 4000);
  EXPECT_GE(runtime::list_checkpoints(runtime::CheckpointLocation(url("local-run")), 1).at(0).step, 14);
}

// As the operator runs a job: a registry, workers and trainer 0 started one by one; trainer 0,
// given --export-at-end, waits for every stage's last checkpoint, exports to the bucket and writes
// where as its termination message (what the operator puts in status.exportedModel).
TEST_F(S3Test, TrainerZeroExportsToTheBucketAtTheEndAndSaysWhere) {
  using namespace swarm::e2e;
  ::setenv("SWARM_JOB_SECRET", "s3-trainer-export-secret", 1);
  const auto dir = fresh_dir("s3-trainer-export");
  const std::string job = write_job(dir, job_body(2, 12) + R"(
  checkpoint: {path: "s3://swarm-test/by-trainer", everySteps: 4}
)");
  const int port = swarm::runtime::pick_free_port();
  const std::string registry = "http://127.0.0.1:" + std::to_string(port);
  Processes procs;
  procs.registry("127.0.0.1", port, job, dir + "/registry.log");
  procs.workers(job, registry, dir);
  ASSERT_TRUE(eventually([&] { return serving_workers(registry) == 4; }, 60)) << read_text(dir + "/stage0-w0.log");
  const std::string message = dir + "/termination-log";
  const pid_t trainer = start({"trainer", "--job", job, "--index", "0", "--peer-id", "trainer0", "--registry", registry,
                               "--export-at-end", "--export-wait", "60", "--termination-log", message},
                              dir + "/trainer.log");
  ASSERT_EQ(wait_exit(trainer, 240), 0) << read_text(dir + "/trainer.log");
  const auto told = read_json(message);
  ASSERT_TRUE(told.is_object()) << read_text(message) << read_text(dir + "/trainer.log");
  EXPECT_EQ(told.value("exportedModel", ""), url("by-trainer/export/model.safetensors")) << told.dump();
  EXPECT_GE(told.value("step", int64_t{0}), 12) << told.dump();
  S3Client c(settings());
  const auto model = c.get("swarm-test", "by-trainer/export/model.safetensors");
  ASSERT_TRUE(model.has_value());
  EXPECT_GT(model->size(), 100000u);
  EXPECT_TRUE(c.get("swarm-test", "by-trainer/export/config.json").has_value());
}

}  // namespace
