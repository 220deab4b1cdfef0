// The trainer's state and steps, shared by trainer.cc (discovery, routing, a microbatch's path,
// the report) and worker/trainer/schedules.cc (the training loops: SWARM's lanes and the GPipe baseline).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "planner/stage_router.h"
#include "registry/registry_client.h"
#include "worker/data/text_dataset.h"
#include "worker/data/tokenizer.h"
#include "worker/net/client.h"
#include "worker/runtime/clock.h"
#include "worker/runtime/metrics.h"
#include "worker/runtime/protocol.h"
#include "worker/trainer/trainer.h"

namespace swarm::runtime {

// A microbatch that could not complete (no peer answered, a reply without its tensor, or any
// failure under the GPipe baseline, which has no failover).
struct MicrobatchLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Trainer::Impl {
  explicit Impl(TrainerOptions o)
      : opt(std::move(o)),
        stages(opt.spec.pipeline.stages),
        dataset(data::load_dataset(opt.spec)),
        sampler(dataset, opt.spec.model.sequence_length, opt.spec.training.seed, opt.index,
                static_cast<int>(opt.spec.trainers.count)),
        stage_step(stages) {
    if (opt.max_steps <= 0) opt.max_steps = opt.spec.training.max_steps;
    if (opt.eval_batches < 0) opt.eval_batches = static_cast<int>(opt.spec.training.eval_batches);
    planner::RouterOptions ro;
    ro.ema_alpha = opt.spec.trainers.routing.ema_alpha;
    ro.backward_weight = opt.spec.trainers.routing.backward_weight;
    ro.explore_peer_seconds = opt.spec.trainers.routing.explore_peer_seconds;
    ro.home_region = opt.region;
    ro.inter_region_penalty_seconds = opt.spec.trainers.routing.inter_region_penalty_ms / 1000;
    for (int s = 0; s < stages; ++s) routers.push_back(std::make_unique<planner::StageRouter>(ro));
    for (auto& r : stage_step) r = 0;
    peers_per_stage.assign(stages, 0);
    coverage.assign(stages, {});
    {
      swarm::MutexLock lk(loss_mu);
      stage_compute.assign(stages, 0.0);
      stage_wait.assign(stages, 0.0);
    }
    client_options.connect_timeout = to_ms(opt.spec.timeouts.connect_seconds);
    client_options.protection = protection_of(opt.spec);
  }

  void refresh_peers();
  // Heartbeat to the registry (role trainer): its step, samples/s and recent loss, which the
  // operator reads into the SwarmJob's status; a live trainer also tells the rebalancer there is
  // work to balance. No-op once training is over.
  void announce();
  // Training is over: stop announcing and withdraw from the registry.
  void withdraw();
  std::shared_ptr<net::Client> client_for(const std::string& peer);
  net::Message call(int stage, planner::Op op, int64_t samples, double timeout,
                    const std::function<net::Message(bool failover)>& build, const std::string& preferred,
                    std::string* used);
  void run_microbatch(uint64_t seq);
  // Counts a completed microbatch's forward hops (`path`: its peer of each stage, in order).
  void count_hops(const std::vector<std::string>& path) EXCLUDES(peers_mu);
  double evaluate();
  // One pass of the thread beside the training loop: discovery, the heartbeat when one is due,
  // the progress sample and the report file once a second (`last_*` carry the times between passes).
  void background_pass(double& last_report, double& last_announce);
  // Waits until every stage has a live worker (and, for a while, a home-region one where one is
  // joining: planner::may_start_routing); false when `stop` or wait_for_peers_seconds came first.
  bool wait_for_peers(const std::atomic<bool>& stop);
  // The training lanes (inflight_microbatches threads) until max steps, max seconds or `stop`.
  void train(const std::atomic<bool>& stop);
  void train_gpipe(const std::function<bool()>& keep_going);
  void end_training();
  void await_stage_steps(int64_t target);
  int64_t min_step() const {
    int64_t m = INT64_MAX;
    for (const auto& r : stage_step) m = std::min<int64_t>(m, r.load());
    return m;
  }
  TrainerReport snapshot();
  void account_bytes() REQUIRES(peers_mu);
  // How much of a request's `seconds` was the stage's compute (its reply says), the rest waiting.
  void note_time(int stage, const nlohmann::json& reply_meta, double seconds) {
    const double compute = std::min(seconds, std::max(0.0, reply_meta.value("compute_s", 0.0)));
    metrics->add_stage_time(stage, compute, seconds - compute);
    swarm::MutexLock lk(loss_mu);
    stage_compute[stage] += compute;
    stage_wait[stage] += seconds - compute;
  }
  // The step a reply was computed at (its meta's "step").
  void note_step(int stage, const nlohmann::json& reply_meta) {
    int64_t r = meta_int(reply_meta, "step", 0);
    int64_t cur = stage_step[stage].load();
    while (r > cur && !stage_step[stage].compare_exchange_weak(cur, r)) {
    }
  }

  TrainerOptions opt;
  int stages;
  data::TextDataset dataset;
  swarm::Mutex sampler_mu;
  std::atomic<int64_t> data_wait_ns{0};      // TrainerReport::data_wait_seconds
  std::atomic<int64_t> data_wait_max_ns{0};  // TrainerReport::data_wait_max_seconds
  data::BatchSampler sampler GUARDED_BY(sampler_mu);
  std::vector<std::unique_ptr<planner::StageRouter>> routers;
  std::unique_ptr<registry::RegistryClient> registry;
  std::unique_ptr<Metrics> metrics;
  net::ClientOptions client_options;

  swarm::Mutex peers_mu;
  std::map<std::string, std::pair<std::string, std::shared_ptr<net::Client>>> clients GUARDED_BY(peers_mu);  // id -> (endpoint, client)
  std::vector<int> peers_per_stage GUARDED_BY(peers_mu);
  // Per stage, what wait_for_peers decides on (planner::may_start_routing).
  std::vector<planner::StageCoverage> coverage GUARDED_BY(peers_mu);
  std::map<std::string, std::string> peer_region GUARDED_BY(peers_mu);  // worker id -> its region

  std::vector<std::atomic<int64_t>> stage_step;
  std::atomic<int64_t> retried{0}, lost{0}, recomputed{0}, samples{0}, microbatches{0};
  std::atomic<int64_t> hops{0}, cross_region_hops{0};  // TrainerReport::microbatch_hops, cross_region_hops
  uint64_t bytes_sent GUARDED_BY(peers_mu) = 0;      // what the clients had counted at the last account_bytes
  uint64_t bytes_received GUARDED_BY(peers_mu) = 0;
  uint64_t wire_bytes GUARDED_BY(peers_mu) = 0;      // sent + received since the trainer started
  uint64_t train_wire_bytes GUARDED_BY(peers_mu) = 0;  // wire_bytes when training ended (before eval)

  swarm::Mutex loss_mu;
  std::vector<double> first_losses GUARDED_BY(loss_mu);
  std::vector<double> stage_compute GUARDED_BY(loss_mu);  // seconds, summed over this trainer's requests
  std::vector<double> stage_wait GUARDED_BY(loss_mu);
  std::vector<double> recent_losses GUARDED_BY(loss_mu);
  std::vector<std::pair<int64_t, double>> curve GUARDED_BY(loss_mu);
  std::vector<std::pair<double, int64_t>> progress GUARDED_BY(loss_mu);
  double loss_ema GUARDED_BY(loss_mu) = 0;
  // Written by the thread in Trainer::run while the background thread reads them (announce,
  // background_pass, snapshot): atomics, not under loss_mu.
  std::atomic<double> train_started{0}, train_ended{0};
  std::atomic<double> eval_loss{0};
  std::atomic<bool> finished{false};

  swarm::Mutex announce_mu;
  bool training_over GUARDED_BY(announce_mu) = false;
};

}  // namespace swarm::runtime
