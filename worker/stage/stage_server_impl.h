// Internal state of StageServer, shared by stage_server.cc (requests, compute loop),
// worker/stage/averaging.cc (the end-of-step gradient all-reduce) and worker/stage/membership.cc (join, resync,
// leave). Not part of the public API.
//
// Impl orchestrates; its parts keep their own state under their own lock: the request queue
// (request_queue.h), the activations kept for backwards (activation_store.h), the capacity
// reading (capacity_meter.h) and the averaging inbox of a step's leader (averaging_inbox.h).
// Lock order: Impl::mu, then a part's lock (a part never calls out with its lock held).
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <optional>
#include <thread>

#include <torch/torch.h>

#include "common/thread_annotations.h"
#include "registry/event_ledger.h"
#include "registry/registry_client.h"
#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/model/stage_compute.h"
#include "worker/net/client.h"
#include "worker/net/server.h"
#include "worker/stage/activation_store.h"
#include "worker/stage/averaging_inbox.h"
#include "worker/stage/capacity_meter.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/writer.h"
#include "worker/runtime/clock.h"
#include "worker/runtime/metrics.h"
#include "worker/stage/request_queue.h"
#include "worker/stage/stage_server.h"
#include "worker/runtime/tensor_wire.h"

namespace swarm::runtime {

struct StageServer::Impl {
  explicit Impl(WorkerOptions o);

  // --- requests (stage_server.cc) ---
  net::Message handle(net::Message&& request);
  net::Message run_task(Task& task);
  net::Message do_forward(Task& task);
  net::Message do_forward_backward(Task& task);
  net::Message do_backward(Task& task);
  net::Message do_state(Task& task);
  // A leaving peer's gradient (kGradientHandoff), on the connection thread: checked and taken
  // into pending_handoffs and samples_done at once, folded into the gradients by fold_handoffs.
  net::Message handle_handoff(net::Message&& request) EXCLUDES(mu);
  // Checks a hand-off of step r against this peer's state and takes it (throws when it refuses).
  void take_handoff(int64_t r, int64_t samples, int64_t requested, const std::string& from,
                    const torch::Tensor& flat) EXCLUDES(mu);
  void fold_handoffs() EXCLUDES(mu);  // compute thread: pending hand-offs into the gradients
  int64_t pending_handoff_samples_locked() const REQUIRES(mu);  // in samples_done, not in the gradients yet
  torch::Tensor check_input(const net::WireTensor& w, const char* what, int64_t samples) const;
  void compute_loop();
  // Steps of compute_loop, on the compute thread. Each pass, under mu: start_leave_locked (when
  // the rebalancer assigned move_to), the two expiries (activations past their time to live,
  // queued forwards whose caller gave up), drop_overdue_activations_locked; then, with mu
  // released, serve_task, or idle_step when there was no task.
  void start_leave_locked(double now) REQUIRES(mu);  // stop taking forwards; owed backwards until a deadline
  // Drops the activations whose backward is overdue: a closing step's, after a wait shorter than
  // the stage's gather window, and a leaving peer's, after its leave deadline.
  void drop_overdue_activations_locked(double now) REQUIRES(mu);
  void serve_task(Task& task);  // runs it, answers its caller, records metrics
  // Re-syncs when asked, else finishes a due step (averaging + optimizer step), else completes a
  // leave that is ready. Takes mu itself.
  void idle_step() EXCLUDES(mu);
  bool leave_ready_locked(double now) const REQUIRES(mu);  // leaving, nothing queued or owed, no step awaited
  std::shared_ptr<Task> next_task_locked() REQUIRES(mu);  // from the queue, admitted under the claim
  Admission admission_locked() const REQUIRES(mu);  // what the queue may hand out now
  // Admitted work dropped before its backward ran (activations expired or overdue, a leave):
  // its claim goes back to the step, which is not full any more (planner/step_book.h, Claims).
  void release_claim_locked(int64_t samples) REQUIRES(mu);
  bool is_leaving() const EXCLUDES(mu);  // `leaving`, read under mu (drain() sets it from another thread)
  // Answers with an error, without computing, the queued forwards whose caller has given up
  // (RequestQueue::expire_waiting): computed, they would leave activations whose backward never
  // comes, and the step would wait the backward timeout for them.
  void expire_queued_forwards();
  void heartbeat_loop();
  // Heartbeat; the state is the peer's own (failed, joining, draining, averaging, serving) unless given.
  void announce(std::optional<planner::PeerState> state = std::nullopt);
  void publish_compute_metrics();  // loss scale, skipped steps, staging pool -> /metrics; any thread

  // --- membership (worker/stage/membership.cc): join, resync, leave, move, checkpoints ---
  void become_stage(int s, const char* why);  // new model for stage s, then sync_state
  // From a live donor at min_step or later, else (with `checkpoints`) the latest checkpoint of
  // at least min_step. `listed` (optional): whether the registry answered the peer listing; when
  // it did not, a false return says nothing about the stage.
  bool sync_state(int s, int64_t min_step, bool checkpoints = true, bool* listed = nullptr);
  // sync_state's two sources: a live peer of the stage at min_step or later (the least loaded
  // first; `listed` as above), and the newest checkpoint of this job instance at min_step or later
  // (another instance's are reported once, never tried; storage that does not answer clears
  // `listed`).
  bool download_state_from_peers(int s, int64_t min_step, bool* listed);
  bool restore_from_checkpoints(int s, int64_t min_step, bool* listed);
  // become_stage's sync, with an answer that can be trusted: Synced, Fresh (the stage never
  // stepped: its initial parameters are its state), Lost (it stepped, and no live peer or
  // checkpoint has its state; `at_step` says where) or Stopping. A listing the registry did not answer
  // (unreachable or slow, as while its pod starts) is asked again; a stage that stepped gives a
  // live peer that missed its heartbeats (a loaded node) two peer-expiry periods to show up.
  enum class JoinSync { Synced, Fresh, Lost, Stopping };
  JoinSync sync_on_join(int s, int64_t& at_step);
  int64_t align_with_swarm(int s);            // take up the other stages' step number
  int64_t job_step();                         // the newest step any stage reached (registry)
  // The newest step of stage s in the registry (0: none yet); -1 when the registry did not answer.
  int64_t stage_newest_step(int s);
  // The stage came back without its state after the job trained: stop serving, say so (log,
  // swarm_stage_reset_total, the registry's "failure": the job stops).
  void fail_stage_reset(int s, int64_t at_step);
  void report_failure();                      // to the registry; retried by the heartbeat
  void resync();                              // behind the stage: drop local work, download
  void complete_leave();                      // hand off gradients, then move or stop
  // Before serving after a join or re-sync: the registry's progress of this peer's step (whether
  // it already reached its global batch), so the peer never admits work into a closing step.
  void learn_step_progress();
  int64_t max_steps() const;                  // the training's last step (opt.max_steps or the spec's)
  bool handoff_gradients();                   // to another live peer of the stage
  // One offer of the flat gradient to peer p: Taken; StepClosed or Refused (it said no, another
  // may take it); Unconfirmed (sent, no answer: it may hold it, so no one else is asked).
  enum class Offer { Taken, StepClosed, Refused, Unconfirmed };
  Offer offer_handoff(const planner::PeerRecord& p, const torch::Tensor& flat, int64_t mine, int64_t samples,
                      double timeout);
  // A checkpoint of stage s, authenticated with the job's secret (or its previous one).
  std::string open_checkpoint_of_job(const CheckpointFile& f, int s) const;
  std::vector<std::string> own_key_ids() const;  // the key ids of the secret and of its previous one
  // Checkpoints of stage s that could not be restored: `foreign` of another job instance (skipped),
  // `refused` (failed to read or authenticate). Each file logged and counted once, not each try.
  void note_unusable_checkpoints(int s, const std::vector<std::string>& foreign, const std::vector<std::string>& refused);
  std::string why_no_checkpoint(int s) const;  // for the StageReset message
  void maybe_checkpoint(bool writer);         // after a step
  // Copies the state now and hands it to checkpoint_writer (`wait`: until it is written).
  void write_checkpoint_now(bool wait = false);
  void write_checkpoint_job(CheckpointJob& job);  // on the writer's thread
  void check_behind(const std::vector<planner::PeerRecord>& stage_peers);
  // Counts an event on this worker's /metrics and in its ledger, which sends it to the registry
  // now if it can and keeps it until the registry has it (registry/event_ledger.h).
  void report_event(const std::string& kind, int64_t count);
  bool flush_events();  // true when the registry has every count (the heartbeat calls it too)
  // With opt.report_path: the worker's own counts (events counted, those the registry never
  // acknowledged), written as it stops.
  void write_report() const;
  void report_dropped(int s, int64_t r, int64_t lost);  // samples of step r's gradient dropped
  void drain(double seconds);                 // graceful hand-off before exit (SIGTERM)

  // --- averaging (worker/stage/averaging.cc) ---
  bool step_due_locked() const REQUIRES(mu);  // the step is full, this peer's part done
  void progress_loop();                    // reports counts and claims to the coordinator
  // One report of this peer's counts with the claim its queue asks for; applies the answer
  // (claimed, step_full). Serialized by report_mu, so answers apply in the order asked. `force`:
  // even when nothing changed since the last one. Returns false when the registry did not answer.
  bool report_claims(bool force) EXCLUDES(mu, report_mu);
  void finish_step();                      // all-reduce + optimizer step; compute thread only
  // Reopened: the group saw the step not full after all (a claim released), or awaits retries
  // of a gone peer's work that wait in this peer's queue: back to admitting work, no step yet.
  enum class StepOutcome { Averaged, Closed, Failed, Reopened };
  // How finish_step's attempts at averaging ended: Averaged (flat, samples hold the stage's sum),
  // Unaveraged (no group formed in any attempt: step on the local gradient), Abandoned (the step
  // closed without this peer, which re-synced, or the peer is stopping: no step), Reopened (above).
  enum class StepEnd { Averaged, Unaveraged, Abandoned, Reopened };
  // Whether this peer should leave a gathering group to admit work (see Reopened).
  bool reopens(const planner::GroupView& g) EXCLUDES(mu);
  // The step's averaged sample count against the global batch: counted by the writer when they
  // differ (steps_short / step_samples_short, steps_over / step_samples_over).
  void count_step_samples(int64_t samples);
  // The parts of finish_step, on the compute thread with no lock held.
  StepEnd average_step(int64_t r, bool leaving_now, torch::Tensor& flat, int64_t& samples,
                       int& members, bool& writer);
  void advance_step(int64_t r);  // step r taken: start step r + 1 (mu), prune the inbox
  // A leaving peer whose step cannot average it (closed without it, no group): true, and from now
  // on it hands its gradient off instead of stepping (complete_leave). False for a peer that stays.
  bool hand_off_instead(const std::string& why) EXCLUDES(mu);
  StepOutcome average_once(int attempt, torch::Tensor& flat, int64_t& samples, int& members,
                           bool& wrote_as_leader);
  net::Message handle_average_push(net::Message&& request);
  // The group of the averaging in progress, from the moment this peer saw it Ready until the
  // attempt ends. The heartbeat re-tells it (retell_group): a registry restarted meanwhile
  // adopts it, so the peers that ask it after the restart get the group the others act on.
  struct HeldGroup {
    int stage = -1;
    int64_t step = 0;
    int attempt = 0;
    std::vector<planner::Member> members;
  };
  std::optional<HeldGroup> held_group GUARDED_BY(mu);
  void retell_group();

  WorkerOptions opt;
  model::ModelConfig model_cfg;
  WireCodec codec;  // how activations and their gradients leave this stage (spec.pipeline)
  std::shared_ptr<model::StageModel> model;
  std::unique_ptr<model::StageOptimizer> optimizer;
  torch::Device device{torch::kCPU};
  // The device path of every request (spec.workers.precision, staging, fp16 loss scaling); the
  // compute thread's, like the model.
  std::unique_ptr<model::StageCompute> compute;
  std::unique_ptr<net::Server> server;
  std::unique_ptr<Metrics> metrics;
  std::unique_ptr<registry::RegistryClient> registry;
  registry::EventLedger events;  // counts on their way to the registry; thread-safe itself
  net::ClientOptions client_options;
  int64_t target_samples = 0;  // the job's global batch

  // The parts, each with its own lock.
  RequestQueue queue{now_seconds};
  ActivationStore activations;  // its samples(): admitted forwards owed a backward
  CapacityMeter capacity{now_seconds};
  AveragingInbox inbox{now_seconds};  // the gradients pushed to this peer as a step's leader

  // cv: the compute loop waits on it (with mu) for work, a due step or a stop.
  mutable swarm::Mutex mu;
  swarm::CondVar cv;
  int64_t samples_done GUARDED_BY(mu) = 0;     // backward samples accumulated this step (local + handed in)
  // Gradients handed to this peer by leaving ones, not yet added to its parameters' gradients.
  struct PendingHandoff {
    int64_t step = 0;  // the sender's step
    int64_t samples = 0;
    std::string from;
    torch::Tensor flat;  // float32, CPU, every parameter's gradient in order
  };
  std::vector<PendingHandoff> pending_handoffs GUARDED_BY(mu);
  int64_t stage_param_count GUARDED_BY(mu) = 0;  // values in the stage's parameters (a hand-off's size)
  int64_t max_handoff_lag = 4;  // spec.averaging.maxHandoffLagSteps; set in the constructor
  // This peer's claim on the step (planner/step_book.h, Claims): `claimed` is what the coordinator
  // granted, `claim_used` what it admitted under it (forwards, recomputes) plus hand-ins. Work
  // needing a claim is taken only while it fits claimed - claim_used.
  int64_t claimed GUARDED_BY(mu) = 0;
  int64_t claim_used GUARDED_BY(mu) = 0;
  bool claim_wanted GUARDED_BY(mu) = false;  // work waits for a claim: progress_loop asks at once
  int64_t stage_claims GUARDED_BY(mu) = 0;   // the step's claims, every peer's, from the coordinator
  bool step_full GUARDED_BY(mu) = false;     // the coordinator says the step's claims are complete
  double closing_since GUARDED_BY(mu) = 0;     // when this peer saw the step full (0 = not full)
  // Serializes report_claims: one request at a time, its answer applied before the next goes.
  swarm::Mutex report_mu;
  planner::ClaimRequest last_claim GUARDED_BY(report_mu);  // the last request sent, and its step
  int64_t last_claim_step GUARDED_BY(report_mu) = -1;
  double last_claim_at GUARDED_BY(report_mu) = 0;
  bool stopping GUARDED_BY(mu) = false;
  bool leaving GUARDED_BY(mu) = false;         // refusing new forwards: moving to another stage or draining
  double leave_deadline GUARDED_BY(mu) = 0;    // owed backwards are given up after this
  double handoff_at GUARDED_BY(mu) = 0;        // a leaving peer holding gradient stops waiting for its step
  bool handoff_now GUARDED_BY(mu) = false;     // a leaving peer's step closed without it: hand off, no step
  double drain_ends GUARDED_BY(mu) = 0;        // a draining peer's budget (SIGTERM) ends: 0 when moving stages
  double exit_by GUARDED_BY(mu) = 0;           // a draining peer must have exited (0: no drain)
  bool left GUARDED_BY(mu) = false;            // drain finished (compute thread exits)
  bool exiting GUARDED_BY(mu) = false;         // draining to exit (SIGTERM): never moves to another stage
  bool failed GUARDED_BY(mu) = false;          // the stage came back without its state: never serves again
  bool failure_reported GUARDED_BY(mu) = false;
  bool failure_reporting GUARDED_BY(mu) = false;  // a report to the registry is in flight
  std::string failure_message GUARDED_BY(mu);
  // Checkpoint files already logged and counted as unusable, by stage: (foreign, refused).
  std::map<int, std::pair<std::set<std::string>, std::set<std::string>>> unusable_checkpoints GUARDED_BY(mu);
  int failure_stage GUARDED_BY(mu) = -1;
  int64_t failure_step GUARDED_BY(mu) = 0;
  std::atomic<int> stage{-1};     // the stage served now (changes when the rebalancer moves it)
  std::atomic<int> move_to{-1};   // stage the rebalancer assigned, not yet moved to
  std::atomic<bool> resync_requested{false};
  // A heartbeat failed: the registry may come back (or move) without the progress this peer
  // reported, so progress_loop reports it again even when nothing changed.
  std::atomic<bool> progress_unsure{false};
  int64_t last_resync_step = -1;  // where the last re-sync ended; compute thread only
  std::atomic<bool> ready{false};  // serving (false while joining/resyncing)
  std::atomic<int64_t> step{0};
  std::atomic<int64_t> processed{0};
  std::atomic<uint64_t> fingerprint{0};

  std::thread compute_thread, heartbeat_thread, progress_thread;
  std::atomic<bool> started{false}, stopped{false};
  // With spec.checkpoint.path: made in start(), flushed in stop(); declared last, so destroyed
  // first, while the registry client it reports to still exists.
  std::unique_ptr<CheckpointWriter> checkpoint_writer;
};

}  // namespace swarm::runtime
