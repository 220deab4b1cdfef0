// A trainer: reads text, makes microbatches and sends each through one peer per stage, chosen by
// stochastic wiring (planner::StageRouter). Keeps `inflightMicrobatches` microbatches in the
// pipeline; retries a failed or timed-out request on another peer of the same stage; keeps each
// stage's input so a backward can be recomputed by any peer when the forward's peer is gone.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"

namespace swarm::runtime {

struct TrainerOptions {
  JobSpec spec;
  int index = 0;                 // selects this trainer's data stream
  std::string peer_id;
  std::string region;            // --region / SWARM_REGION: its peers there are preferred; "" = none
  std::string registry_url;
  std::string secret;            // the job secret: signs data-plane frames and registry requests
  std::string report_path;       // JSON progress report, rewritten every second; "" = none
  int64_t max_steps = 0;         // 0 = spec.training.maxSteps
  double max_seconds = 0;        // 0 = no limit
  std::string metrics_bind = "127.0.0.1:0";
  int eval_batches = -1;         // validation microbatches evaluated at the end;
                                 // -1 = spec.training.evalBatches
  double wait_for_peers_seconds = 120;
  // The synchronous baseline (`swarm local --baseline gpipe`): each step's microbatches all in
  // flight at once, then a flush (every one of them done) before the next step's; a failed request
  // loses its microbatch and ends the run (no failover). Run it with one worker per stage: the
  // wiring is then fixed.
  bool gpipe = false;
  // GPipe with several pipelines (data parallel: trainer t drives its own pipeline of fixed
  // workers, and each stage's workers average as usual): the peer ids this trainer uses, one per
  // stage; empty = any (one worker per stage). Each step it sends global batch / gpipe_pipelines
  // samples, so the pipelines together make one global batch.
  std::vector<std::string> gpipe_peers;
  int gpipe_pipelines = 1;
};

struct TrainerReport {
  int64_t steps = 0;              // optimizer steps every stage has taken
  int64_t samples = 0;            // samples whose forward and backward completed
  int64_t microbatches = 0;
  // Each completed microbatch's forward path as this trainer routed it: trainer -> stage 0 and
  // stage k -> k+1 (stages hops a microbatch), and those of them between two regions.
  int64_t microbatch_hops = 0;
  int64_t cross_region_hops = 0;
  double samples_per_second = 0;  // over the training loop (start-up excluded)
  double loss_first = 0;          // mean training loss of the first global batch
  double loss_last = 0;           // mean training loss of the last global batch
  double loss_ema = 0;
  double eval_loss = 0;           // mean loss on fixed validation batches after training
  std::vector<int> peers_per_stage;
  std::vector<int64_t> stage_steps;
  int64_t requests_retried = 0;
  int64_t microbatches_lost = 0;
  int64_t samples_recomputed = 0;
  double train_seconds = 0;
  // Bytes this trainer's connections sent and received while it trained (frames, tags and handshakes
  // included; the eval batches after training are not): every activation and activation gradient
  // passes through a trainer, so this is the pipeline's traffic.
  uint64_t wire_bytes = 0;
  double wire_bytes_per_sample = 0;  // wire_bytes / samples
  // Per stage, over this trainer's requests: seconds the stage computed (its replies say) and
  // seconds the requests spent otherwise (network, queue). Much more waiting than computing: the
  // job is network-bound.
  std::vector<double> stage_compute_seconds;
  std::vector<double> stage_wait_seconds;
  // Seconds its microbatches waited on the dataset (drawing windows, copying them into tensors;
  // swarm_data_wait_seconds_total on /metrics): the data loader's share of training time.
  double data_wait_seconds = 0;
  double data_wait_max_seconds = 0;  // the longest single wait (the first batch's load, mostly)
  bool finished = false;
  std::vector<std::pair<int64_t, double>> loss_curve;  // (samples so far, microbatch loss), thinned
  std::vector<std::pair<double, int64_t>> progress;    // (seconds since training began, samples), ~1/s

  nlohmann::json to_json() const;
};

class Trainer {
 public:
  explicit Trainer(TrainerOptions options);
  ~Trainer();
  // Trains until every stage took max_steps steps, max_seconds passed, or `stop` turns true.
  TrainerReport run(const std::atomic<bool>& stop);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace swarm::runtime
