// Workers and trainers serve Prometheus metrics: the exposition passes `promtool check metrics`
// (naming and format lint) and a real Prometheus server scrapes and queries them.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "registry/registry_client.h"
#include "tests/common/raw_http.h"
#include "tests/planner/peer_records.h"
#include "tests/stage/swarm_fixture.h"
#include "worker/runtime/metrics.h"
#include "common/ports.h"
#include "worker/trainer/trainer.h"

namespace fs = std::filesystem;

namespace swarm {
namespace {

using testing::shell;

using testing::metric_sample;
std::string scrape(int port) { return testing::scrape_metrics(port); }

std::pair<int, std::string> promtool_check(const std::string& exposition) {
  const auto path = fs::temp_directory_path() / ("swarm-metrics-" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path) << exposition;
  auto r = shell("promtool check metrics < " + path.string());
  fs::remove(path);
  return r;
}


TEST(Metrics, WorkerExpositionPassesPromtoolAfterTraining) {
  ASSERT_EQ(shell("command -v promtool").first, 0) << "promtool missing: run scripts/install-deps.sh";
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 2), 1);
  ASSERT_TRUE(testing::train(swarm, 2).finished);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // one heartbeat: byte counters
  for (auto& w : swarm.workers) {
    const std::string text = scrape(w->metrics_port());
    for (const char* name : {"swarm_samples_processed_total", "swarm_request_duration_seconds_bucket",
                             "swarm_queue_length", "swarm_network_sent_bytes_total",
                             "swarm_network_received_bytes_total", "swarm_optimizer_step",
                             "swarm_averaging_duration_seconds_count", "swarm_learning_rate",
                             "swarm_optimizer_skipped_steps_total", "swarm_staging_buffers",
                             "swarm_staging_cached_bytes", "swarm_staging_buffer_allocations_total"})
      EXPECT_NE(text.find(name), std::string::npos) << name << " missing from\n" << text;
    // float32 on the CPU: no loss scaling, so no loss-scale sample.
    EXPECT_EQ(text.find("swarm_loss_scale{"), std::string::npos) << text;
    // Stage 0 serves forward + backward; the last stage serves forward_backward.
    EXPECT_NE(text.find(w->status().stage == 0 ? "op=\"backward\"" : "op=\"forward_backward\""), std::string::npos);
    auto [rc, out] = promtool_check(text);
    EXPECT_EQ(rc, 0) << out;
  }
}

int readyz(int port) {
  auto r = shell("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" + std::to_string(port) + "/readyz");
  return std::atoi(r.second.c_str());
}

// GET /readyz (a worker pod's readiness probe) follows the readiness callback: 503 before one is
// set and while it says no, 200 while it says yes.
TEST(Metrics, ReadyzFollowsTheReadinessCallback) {
  runtime::Metrics m("127.0.0.1:0", "worker", "p");
  EXPECT_EQ(readyz(m.port()), 503);
  std::atomic<bool> serving{true};
  m.set_readiness([&serving] { return serving.load(); });
  EXPECT_EQ(readyz(m.port()), 200);
  serving = false;
  EXPECT_EQ(readyz(m.port()), 503);
  m.set_readiness(nullptr);
  EXPECT_EQ(readyz(m.port()), 503);
}

// A client cannot make a worker's metrics endpoint hold a body: a 300 MiB upload is refused while
// it is sent, this process's peak memory stays where it was (each TEST is a process of its own
// under ctest), and the endpoint still serves.
TEST(Metrics, TheEndpointRefusesABodyWithoutHoldingIt) {
  runtime::Metrics m("127.0.0.1:0", "worker", "p");
  const long before_kb = testing::peak_rss_kb(::getpid());
  for (bool chunked : {true, false}) {
    SCOPED_TRACE(chunked ? "chunked" : "Content-Length");
    const testing::Upload u = testing::upload(m.port(), "POST", "/metrics", size_t{300} << 20, chunked);
    const long after_kb = testing::peak_rss_kb(::getpid());
    std::cout << "worker metrics endpoint, 300 MiB " << (chunked ? "chunked" : "Content-Length") << " POST: answered "
              << u.reply.status << " after " << u.seconds << " s; this process's VmHWM " << before_kb << " kB -> "
              << after_kb << " kB" << std::endl;
    EXPECT_EQ(u.reply.status, 413) << u.reply.body;
    EXPECT_LT(u.seconds, 10.0);
    EXPECT_LT(after_kb - before_kb, 20 * 1024);
  }
  EXPECT_EQ(readyz(m.port()), 503);
  EXPECT_NE(scrape(m.port()).find("swarm_loss"), std::string::npos);
}

// A worker is ready while it serves its stage and stops being ready when it stops.
TEST(Metrics, AWorkerIsReadyWhileServingItsStage) {
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 1), 1);
  for (auto& w : swarm.workers) EXPECT_EQ(readyz(w->metrics_port()), 200);
  const int port = swarm.workers[0]->metrics_port();
  swarm.workers[0]->stop();
  EXPECT_NE(readyz(port), 200);
}

TEST(Metrics, TrainerMetricNamesPassPromtool) {
  runtime::Metrics m("127.0.0.1:0", "trainer", "t0");
  m.observe_request(1, "forward", 0.02, 8);
  m.add_retry(1, "forward");
  m.add_failure(1, "forward");
  m.set_loss(3.5);
  m.set_peers(0, 2);
  m.add_bytes(100, 200);
  m.add_data_wait(0.25);
  m.add_data_wait(0.5);
  m.add_completed_samples(8);
  m.add_completed_samples(8);
  m.add_microbatch_lost();
  const std::string text = scrape(m.port());
  ASSERT_FALSE(text.empty()) << "GET /metrics returned nothing";
  EXPECT_EQ(metric_sample(text, "swarm_data_wait_seconds_total"), 0.75) << text;
  // The trainer's side of the step invariant (`swarm step-check`)
  EXPECT_EQ(metric_sample(text, "swarm_trainer_samples_completed_total"), 16) << text;
  EXPECT_EQ(metric_sample(text, "swarm_trainer_microbatches_lost_total"), 1) << text;
  EXPECT_EQ(metric_sample(text, "swarm_data_wait_seconds_count"), 2) << text;
  for (const char* name : {"swarm_loss", "swarm_stage_peers", "swarm_requests_retried_total",
                           "swarm_request_failures_total", "swarm_network_sent_bytes_total"})
    EXPECT_NE(text.find(name), std::string::npos) << name;
  auto [rc, out] = promtool_check(text);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(shell("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" + std::to_string(m.port()) + "/nope").second,
            "200");
}

// The device path's state: counters follow running totals (advancing by the difference, never
// backwards), the loss scale appears only once loss scaling runs.
TEST(Metrics, ComputeStateFollowsRunningTotals) {
  runtime::Metrics m("127.0.0.1:0", "worker", "w0");
  runtime::Metrics::ComputeState st;
  st.staging_allocations = 3;
  st.staging_reuses = 5;
  st.staging_bytes = 4096;
  st.staging_buffers = 2;
  m.set_compute_state(st);
  std::string text = scrape(m.port());
  EXPECT_EQ(metric_sample(text, "swarm_staging_buffer_allocations_total"), 3) << text;
  EXPECT_EQ(metric_sample(text, "swarm_staging_buffer_reuses_total"), 5);
  EXPECT_EQ(metric_sample(text, "swarm_staging_cached_bytes"), 4096);
  EXPECT_EQ(metric_sample(text, "swarm_staging_buffers"), 2);
  EXPECT_EQ(metric_sample(text, "swarm_optimizer_skipped_steps_total"), 0);
  EXPECT_TRUE(std::isnan(metric_sample(text, "swarm_loss_scale"))) << text;

  st.loss_scale = 32768;
  st.skipped_steps = 2;
  st.staging_reuses = 9;
  m.set_compute_state(st);
  st.skipped_steps = 1;  // a smaller total (never sent in practice) does not move a counter back
  m.set_compute_state(st);
  text = scrape(m.port());
  EXPECT_EQ(metric_sample(text, "swarm_loss_scale"), 32768) << text;
  EXPECT_EQ(metric_sample(text, "swarm_optimizer_skipped_steps_total"), 2);
  EXPECT_EQ(metric_sample(text, "swarm_staging_buffer_reuses_total"), 9);
  EXPECT_EQ(metric_sample(text, "swarm_staging_buffer_allocations_total"), 3);
  auto [rc, out] = promtool_check(text);
  EXPECT_EQ(rc, 0) << out;
}

TEST(Metrics, ARealPrometheusServerScrapesAWorker) {
  ASSERT_EQ(shell("command -v prometheus").first, 0) << "prometheus missing: run scripts/install-deps.sh";
  torch::set_num_threads(1);
  testing::LocalSwarm swarm(testing::tiny_job(2, 1), 1);
  ASSERT_TRUE(testing::train(swarm, 1).finished);
  const auto dir = fs::temp_directory_path() / ("swarm-prom-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const int prom_port = runtime::pick_free_port();
  std::ofstream(dir / "prometheus.yml") << "global: {scrape_interval: 1s}\nscrape_configs:\n"
                                        << "  - job_name: swarm-worker\n    static_configs:\n"
                                        << "      - targets: ['127.0.0.1:" << swarm.workers[0]->metrics_port()
                                        << "', '127.0.0.1:" << swarm.workers[1]->metrics_port() << "']\n";
  const std::string start = "prometheus --config.file=" + (dir / "prometheus.yml").string() +
                            " --storage.tsdb.path=" + (dir / "data").string() +
                            " --web.listen-address=127.0.0.1:" + std::to_string(prom_port) + " > " +
                            (dir / "prometheus.log").string() + " 2>&1 & echo $!";
  const auto pid = std::stol(shell(start).second);
  std::string result;
  for (int i = 0; i < 60; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    result = shell("curl -s 'http://127.0.0.1:" + std::to_string(prom_port) +
                "/api/v1/query?query=sum(swarm_samples_processed_total)by(stage)'").second;
    if (result.find("\"stage\":\"1\"") != std::string::npos && result.find("\"stage\":\"0\"") != std::string::npos)
      break;
  }
  shell("kill " + std::to_string(pid));
  EXPECT_NE(result.find("\"status\":\"success\""), std::string::npos) << result;
  EXPECT_NE(result.find("\"stage\":\"0\""), std::string::npos) << result;
  EXPECT_NE(result.find("\"stage\":\"1\""), std::string::npos) << result;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace swarm

namespace swarm {
namespace {

using testing::worker_record;

TEST(Metrics, RegistryCountsElasticityEventsInPrometheusFormat) {
  registry::RegistryServer server("127.0.0.1", 0);
  server.start();
  registry::RegistryClient client(server.url(), std::chrono::seconds(2), /*secret=*/"");  // a registry without one
  client.announce(worker_record("w0", 1));
  client.add_event("preemptions", 2);
  client.add_event("checkpoint_restores", 1);
  const std::string text = shell("curl -sf " + server.url() + "/metrics").second;
  EXPECT_NE(text.find("swarm_swarm_events_total{kind=\"preemptions\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("swarm_registry_peers{role=\"worker\",stage=\"1\",state=\"serving\"} 1"), std::string::npos)
      << text;
  EXPECT_NE(text.find("swarm_rebalance_moves_total 0"), std::string::npos) << text;
  // Without the job's stage count there is no per-stage census.
  EXPECT_EQ(text.find("swarm_registry_stage_workers"), std::string::npos) << text;
  auto [rc, out] = promtool_check(text);
  EXPECT_EQ(rc, 0) << out;
  server.stop();
}

// With the job's stage count, every stage has a live-worker count, an empty one included.
TEST(Metrics, RegistryCountsWorkersOfEveryStageIncludingEmptyOnes) {
  registry::RegistryOptions ro;
  ro.num_stages = 3;
  registry::RegistryServer server("127.0.0.1", 0, ro);
  server.start();
  registry::RegistryClient client(server.url(), std::chrono::seconds(2), /*secret=*/"");  // a registry without one
  for (auto [id, stage] : {std::pair<const char*, int>{"a", 0}, {"b", 0}, {"c", 2}})
    client.announce(worker_record(id, stage));
  client.announce(worker_record("d", 2, 7000, planner::PeerState::Averaging));
  const std::string text = shell("curl -sf " + server.url() + "/metrics").second;
  EXPECT_EQ(metric_sample(text, "swarm_registry_stage_workers{stage=\"0\"}"), 2) << text;
  EXPECT_EQ(metric_sample(text, "swarm_registry_stage_workers{stage=\"1\"}"), 0) << text;
  EXPECT_EQ(metric_sample(text, "swarm_registry_stage_workers{stage=\"2\"}"), 2) << text;
  auto [rc, out] = promtool_check(text);
  EXPECT_EQ(rc, 0) << out;
  server.stop();
}

}  // namespace
}  // namespace swarm
