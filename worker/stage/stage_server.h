// A worker: serves forward and backward of one pipeline stage over the framed TCP data plane.
//
// Requests are queued and run by one compute thread that owns the stage's model (backward before
// forward, so memory held by activations is released first). A forward keeps the microbatch's
// activations for its backward (bounded by a count and a TTL); a backward whose activations are
// gone is answered `activation_missing`, and the trainer re-sends it with the stage input so any
// peer of the stage can recompute. Gradients accumulate until the stage (all its peers together)
// has processed the job's global batch; then the peers average gradients weighted by samples and
// step their optimizers together (see worker/stage/averaging.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/job_spec.h"

namespace swarm::runtime {

struct WorkerOptions {
  JobSpec spec;
  int stage = -1;                  // -1: join the most loaded stage
  std::string peer_id;
  std::string region;              // --region / SWARM_REGION, in its registry record; "" = none
  std::string host = "127.0.0.1";  // address that trainers and peers use to reach this worker
  int port = 0;                    // 0 = any free port
  std::string metrics_bind = "127.0.0.1:0";
  std::string registry_url;
  std::string secret;              // the job secret: keys the data plane and signs registry requests
  // The job's previous secret during a rotation (environment variable <spec.secret.env>_PREVIOUS):
  // accepted for restoring checkpoints written before it, never on the data plane.
  std::string previous_secret;
  int threads = 0;                 // torch intra-op threads; 0 = the cores given (common/cpu_cores.h)
  int max_activations = 256;       // forwards kept for their backward; beyond it the oldest go
  double slowdown = 1;             // >1 emulates a slower machine: compute takes this many times longer
  bool force_loss_scaling = false; // tests: fp16 loss scaling even where fp16 computes in fp32 (CPU)
  double initial_loss_scale = 0;   // tests: the fp16 loss scale to start from; 0 = 2^16
  // A JSON file written as the worker stops: the events it counted itself and any the registry
  // never acknowledged (empty: none). `swarm local` reads them into its summary.
  std::string report_path;
  // The training's last step (`swarm local --steps`); 0 = spec.training.maxSteps. Gradient a
  // peer holds past it when it stops is surplus, not lost (samples_past_last_step).
  int64_t max_steps = 0;
};

struct WorkerStatus {
  int stage = -1;
  bool ready = false;             // serving (not joining, re-syncing or moving)
  bool failed = false;            // its stage came back without its state after the job trained
  int64_t step = 0;               // optimizer steps taken
  int64_t samples_in_step = 0;    // samples whose gradients are accumulated, not yet applied
  int64_t queue_length = 0;
  int64_t activations = 0;        // forwards awaiting their backward
  uint64_t fingerprint = 0;       // hash of the parameters (peers of a stage must agree)
  int64_t samples_processed = 0;
  std::string precision;          // "bf16 on cpu", "fp16 on cuda:0, loss scale 65536", ...
  double loss_scale = 0;          // fp16 loss scaling; 0 when off
  int64_t skipped_steps = 0;      // optimizer steps skipped on a non-finite gradient
  int64_t staging_allocations = 0;  // host staging buffers created (constant after warm-up)
  int64_t staging_reuses = 0;
};

class StageServer {
 public:
  explicit StageServer(WorkerOptions options);
  ~StageServer();
  StageServer(const StageServer&) = delete;
  StageServer& operator=(const StageServer&) = delete;

  // Builds the model, opens the data-plane port and /metrics, announces itself to discovery.
  void start();
  // Graceful hand-off (SIGTERM, a reclaim notice): refuse new forwards, finish owed backwards
  // within `seconds`, hand the accumulated gradient to a peer that stays (the stage's last peer
  // writes a checkpoint instead, if configured). Call stop() afterwards.
  void drain(double seconds);
  // Deregisters, stops accepting requests and joins every thread. Idempotent.
  void stop();

  int port() const;
  int metrics_port() const;
  WorkerStatus status() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace swarm::runtime
