// `swarm`: the one program of the data plane.
//   swarm local JOB.yaml      the whole swarm on this machine (registry, workers, trainers)
//   swarm worker ...          serve one stage (started by `local`, or by the operator in a pod)
//   swarm trainer ...         run the data loader and route microbatches
//   swarm registry ...        the job-scoped discovery and averaging coordinator
//   swarm step-check ...      the step invariant of a live job (cmd/check_commands.h)
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cmd/check_commands.h"
#include "cmd/job_commands.h"
#include "cmd/model_commands.h"
#include "common/job_spec.h"
#include "registry/registry_server.h"
#include "registry/wire.h"
#include "worker/data/token_file.h"
#include "worker/data/tokenizer.h"
#include "worker/checkpoint/export.h"
#include "worker/checkpoint/hf_init.h"
#include "worker/runtime/job_model.h"
#include "worker/local/launcher.h"
#include "worker/local/regions.h"
#include "worker/stage/stage_server.h"
#include "worker/trainer/trainer.h"

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop = true; }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

void wait_for_stop() {
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) throw std::runtime_error("cannot find this program's path");
  return std::string(buf, static_cast<size_t>(n));
}

// --region of a worker or trainer (SWARM_REGION in a pod: the operator sets it from the node pool).
void add_region_option(CLI::App* cmd, std::string& region) {
  cmd->add_option("--region", region,
                  "the region this peer runs in (trainers prefer workers of their own region); default none")
      ->envname("SWARM_REGION")
      ->check(CLI::Validator(
          [](std::string& v) {
            return swarm::registry::wire::valid_region(v) ? std::string()
                                                   : "must be at most 63 characters of [A-Za-z0-9._-], got \"" + v + "\"";
          },
          "REGION"));
}

// swarm local
struct LocalCommand {
  swarm::runtime::LocalOptions local;
  std::string per_stage_list;
  std::string regions_list;
  std::vector<std::string> slow_workers;
  bool no_progress = false;
  CLI::App* cmd = nullptr;

  void add_to(CLI::App& app) {
    cmd = app.add_subcommand("local", "run the whole swarm on this machine");
    cmd->add_option("job", local.job_path, "SwarmJob YAML file")->required()->check(CLI::ExistingFile);
    cmd->add_option("--steps", local.steps, "stop after N optimizer steps (default: spec.training.maxSteps)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--max-seconds", local.max_seconds, "stop training after S seconds")->check(CLI::PositiveNumber);
    cmd->add_option("--summary", local.summary_path, "write the run's summary JSON here");
    cmd->add_option("--baseline", local.baseline,
                    "train a reference instead: single-process (one process, no network), or gpipe (the same "
                    "processes, a synchronous GPipe schedule, no failover; with N workers per stage, N "
                    "pipelines of fixed workers, one trainer each, the stages' workers averaging)")
        ->check(CLI::IsMember({"single-process", "gpipe"}));
    cmd->add_option("--log-dir", local.log_dir, "folder for the child processes' logs");
    cmd->add_option("--threads", local.threads_per_worker, "torch threads per worker (default: cores given / workers; cores given = CPU affinity capped by the cgroup CPU limit)");
    cmd->add_option("--preempt-every", local.preempt_every, "kill a random worker every DURATION seconds")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--preempt-notice", local.preempt_notice,
                    "send SIGTERM first and wait this long before SIGKILL (graceful hand-off)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--respawn-after", local.respawn_after, "start a replacement worker this long after each preemption")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--seed", local.seed, "seed of the preemption schedule (default spec.training.seed)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--workers-per-stage", per_stage_list,
                    "start this many workers on each stage, e.g. 4,1,1 (default spec.workers.perStage)");
    cmd->add_option("--regions", regions_list,
                    "run the peers in these regions, e.g. a,b: worker i of each stage and trainer t in region "
                    "i (t) mod the count; trainers prefer workers of their own region "
                    "(spec.trainers.routing.interRegionPenaltyMs), the summary counts cross-region hops");
    cmd->add_option("--slow-worker", slow_workers, "NAME=FACTOR: emulate a slower machine, e.g. stage0-w1=3");
    cmd->add_flag("--no-progress", no_progress, "do not print the live progress line");
    cmd->add_flag("--no-checkpoints", local.no_checkpoints,
                  "no default checkpoints (a stage that loses every peer then stops the job)");
    cmd->add_option("--checkpoint-every", local.checkpoint_every,
                    "steps between checkpoints (default: 1 with preemptions, else 10, at most the spec's)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--child-wrapper", local.child_wrapper,
                    "start every child as WRAPPER ROLE ID EXE ARGS... (which execs EXE ARGS, e.g. in a network "
                    "namespace: bench/net/regions.sh)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--registry-host", local.registry_host,
                    "address the registry binds and peers reach it at")->capture_default_str();
  }

  // --workers-per-stage 4,1,1
  void parse_workers_per_stage() {
    if (per_stage_list.empty()) return;
    std::stringstream ss(per_stage_list);
    for (std::string item; std::getline(ss, item, ',');) {
      int n = -1;
      try {
        n = std::stoi(item);
      } catch (const std::exception&) {
      }
      if (n < 0 || n > 1024)
        throw std::invalid_argument("--workers-per-stage: expected counts 0..1024 like 4,1,1, got \"" +
                                    per_stage_list + "\"");
      local.workers_per_stage.push_back(n);
    }
  }

  // --slow-worker NAME=FACTOR (repeated)
  void parse_slow_workers() {
    for (const auto& sw : slow_workers) {
      auto eq = sw.find('=');
      double f = 0;
      try {
        f = eq == std::string::npos ? 0 : std::stod(sw.substr(eq + 1));
      } catch (const std::exception&) {
      }
      if (eq == std::string::npos || eq == 0 || f < 1)
        throw std::invalid_argument("--slow-worker: expected NAME=FACTOR with FACTOR >= 1, got \"" + sw + "\"");
      local.slow_workers[sw.substr(0, eq)] = f;
    }
  }

  int run(const std::string& log_level) {
    local.self_exe = self_exe();
    parse_workers_per_stage();
    parse_slow_workers();
    if (!regions_list.empty()) local.regions = swarm::runtime::parse_regions(regions_list);
    local.progress = !no_progress;
    local.log_level = log_level;
    return swarm::runtime::run_local(local, g_stop);
  }
};

// swarm worker
struct WorkerCommand {
  swarm::runtime::WorkerOptions worker;
  std::string job, stage = "auto", checkpoint_dir;
  double drain_seconds = 30;
  int64_t checkpoint_every = 0;
  CLI::App* cmd = nullptr;

  void add_to(CLI::App& app) {
    cmd = app.add_subcommand("worker", "serve one pipeline stage");
    cmd->add_option("--job", job, "SwarmJob YAML file")->required()->check(CLI::ExistingFile);
    cmd->add_option("--stage", stage, "stage index, or auto: join the most loaded stage")->capture_default_str();
    cmd->add_option("--drain-seconds", drain_seconds, "on SIGTERM: time to finish owed work and hand off gradients")
        ->capture_default_str();
    cmd->add_option("--peer-id", worker.peer_id, "unique peer name")->required();
    add_region_option(cmd, worker.region);
    cmd->add_option("--registry", worker.registry_url, "registry URL, http://host:port, or file:PATH (a file holding it, read again when the registry does not answer)")->required();
    cmd->add_option("--host", worker.host, "address peers reach this worker at (and it binds)")
        ->envname("SWARM_HOST")->capture_default_str();
    cmd->add_option("--port", worker.port, "data-plane port (0 = any)")->envname("SWARM_PORT")->capture_default_str();
    cmd->add_option("--metrics-bind", worker.metrics_bind, "host:port of /metrics")->capture_default_str();
    cmd->add_option("--threads", worker.threads, "torch intra-op threads; 0 = the cores this process is given (CPU affinity, cgroup CPU limit)")->capture_default_str();
    cmd->add_option("--slowdown", worker.slowdown, "emulate a machine this many times slower (benchmarks)")
        ->check(CLI::Range(1.0, 100.0));
    cmd->add_option("--checkpoint-dir", checkpoint_dir, "overrides spec.checkpoint.path");
    cmd->add_option("--checkpoint-every", checkpoint_every, "overrides spec.checkpoint.everySteps")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--steps", worker.max_steps, "the training's last step (default spec.training.maxSteps)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--report", worker.report_path,
                    "JSON file written on exit: the events this worker counted, and any the registry never took");
  }

  // --stage: auto (-1) or an index.
  int parse_stage() const {
    if (stage == "auto") return -1;
    try {
      size_t used = 0;
      const int s = std::stoi(stage, &used);
      if (used != stage.size()) throw std::invalid_argument(stage);
      return s;
    } catch (const std::exception&) {
      throw std::invalid_argument("--stage: expected auto or a stage index, got \"" + stage + "\"");
    }
  }

  int run() {
    worker.spec = swarm::load_job_spec(job);
    swarm::runtime::check_model_init(worker.spec);  // before joining: a checkpoint that does not fit is refused
    worker.secret = swarm::resolve_secret(worker.spec.secret);
    worker.previous_secret = swarm::resolve_previous_secret(worker.spec.secret);
    if (!checkpoint_dir.empty()) worker.spec.checkpoint.path = checkpoint_dir;
    if (checkpoint_every > 0) worker.spec.checkpoint.every_steps = checkpoint_every;
    worker.stage = parse_stage();
    swarm::runtime::StageServer server(worker);
    server.start();
    wait_for_stop();
    spdlog::info("worker {}: draining (up to {} s)", worker.peer_id, drain_seconds);
    const auto drain_started = std::chrono::steady_clock::now();
    server.drain(drain_seconds);
    spdlog::info("worker {}: drained in {:.2f} s", worker.peer_id,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - drain_started).count());
    const bool failed = server.status().failed;
    server.stop();
    return failed ? 3 : 0;  // 3: its stage came back without its state (see the log)
  }
};

// swarm trainer
struct TrainerCommand {
  swarm::runtime::TrainerOptions trainer;
  std::string job, termination_log = "/dev/termination-log";
  bool export_at_end = false;
  double export_wait = 120;
  CLI::App* cmd = nullptr;

  void add_to(CLI::App& app) {
    cmd = app.add_subcommand("trainer", "run a trainer");
    cmd->add_option("--job", job, "SwarmJob YAML file")->required()->check(CLI::ExistingFile);
    cmd->add_option("--index", trainer.index, "trainer index (selects the data stream)")->capture_default_str();
    cmd->add_option("--peer-id", trainer.peer_id, "unique peer name")->required();
    add_region_option(cmd, trainer.region);
    cmd->add_option("--registry", trainer.registry_url, "registry URL, or file:PATH (as for swarm worker)")->required();
    cmd->add_option("--report", trainer.report_path, "progress report JSON file");
    cmd->add_option("--steps", trainer.max_steps, "stop after N steps (default: spec)");
    cmd->add_option("--max-seconds", trainer.max_seconds, "stop after S seconds");
    cmd->add_option("--metrics-bind", trainer.metrics_bind, "host:port of /metrics")->capture_default_str();
    cmd->add_flag("--export-at-end", export_at_end,
                  "once the steps are done, export the model to <spec.checkpoint.path>/export/model.safetensors and "
                  "write its location to --termination-log (the operator passes it to trainer 0)");
    cmd->add_option("--export-wait", export_wait, "seconds to wait for every stage's last checkpoint")
        ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
    cmd->add_option("--termination-log", termination_log,
                    "where --export-at-end writes {\"exportedModel\": ..., \"step\": ...} (the pod's termination "
                    "message, which the operator puts in the SwarmJob's status)")
        ->capture_default_str();
    cmd->add_flag("--gpipe", trainer.gpipe,
                  "the synchronous baseline: each step's microbatches all in flight, a flush before the next step, "
                  "no failover (run with one worker per stage, or pin this trainer's with --gpipe-peers)");
    cmd->add_option("--gpipe-peers", trainer.gpipe_peers,
                    "with --gpipe: the worker of each stage this trainer's pipeline uses (one peer id per stage, "
                    "in stage order): data-parallel GPipe, one trainer per pipeline")
        ->delimiter(',');
    cmd->add_option("--gpipe-pipelines", trainer.gpipe_pipelines,
                    "with --gpipe: how many pipelines share the global batch (each sends its share a step)")
        ->check(CLI::Range(1, 1024))->capture_default_str();
  }

  int run() {
    trainer.spec = swarm::load_job_spec(job);
    trainer.secret = swarm::resolve_secret(trainer.spec.secret);
    swarm::runtime::Trainer t(trainer);
    auto report = t.run(g_stop);
    spdlog::info("trainer {}: {} steps, {} samples, {:.1f} samples/s, loss {:.4f} -> {:.4f}, eval {:.4f}",
                 trainer.peer_id, report.steps, report.samples, report.samples_per_second,
                 report.loss_first, report.loss_last, report.eval_loss);
    if (export_at_end && report.finished) export_and_tell();
    return 0;
  }

  // The export at the end of a cluster job, and its location as the container's termination message.
  void export_and_tell() const {
    const int64_t last = trainer.max_steps > 0 ? trainer.max_steps : trainer.spec.training.max_steps;
    auto r = swarm::runtime::export_after_training(trainer.spec, swarm::runtime::CheckpointLocation(trainer.spec.checkpoint),
                                                   trainer.secret, last, export_wait);
    if (!r) return;
    const nlohmann::json message = {{"exportedModel", r->model_path}, {"step", r->step}};
    std::ofstream out(termination_log, std::ios::trunc);
    out << message.dump();
    if (!out) spdlog::warn("trainer {}: cannot write {}", trainer.peer_id, termination_log);
  }
};

// swarm registry
struct RegistryCommand {
  std::string host = "127.0.0.1", job;
  bool no_rebalancing = false;
  int port = 7400;
  swarm::registry::RegistryOptions options;
  CLI::App* cmd = nullptr;

  void add_to(CLI::App& app) {
    cmd = app.add_subcommand("registry", "run the job-scoped registry");
    cmd->add_option("--host", host, "bind address")->capture_default_str();
    cmd->add_option("--port", port, "port")->capture_default_str();
    cmd->add_option("--peer-expiry", options.peer_expiry_seconds, "seconds before a silent peer is dropped")
        ->capture_default_str();
    cmd->add_option("--job", job,
                    "SwarmJob YAML file: enables rebalancing per spec.rebalancing; its spec.secret names the "
                    "variable holding the job secret (without --job: SWARM_JOB_SECRET)")
        ->check(CLI::ExistingFile);
    cmd->add_flag("--no-rebalancing", no_rebalancing,
                  "never move peers between stages, whatever spec.rebalancing says (the gpipe baseline: its "
                  "pipelines are fixed)");
  }

  // --job: the stage count, and rebalancing per spec.rebalancing. With or without it, the job
  // secret that every request must be signed with (registry/request_auth.h): from the variable that
  // spec.secret names, as a worker reads it; there is no registry without one.
  void apply_job() {
    if (job.empty()) {
      options.secret = swarm::resolve_secret(swarm::SecretSpec{});
      return;
    }
    const auto spec = swarm::load_job_spec(job);
    options.secret = swarm::resolve_secret(spec.secret);
    options.num_stages = static_cast<int>(spec.pipeline.stages);
    if (!spec.rebalancing.enabled || no_rebalancing) return;
    swarm::planner::RebalanceOptions ro;
    ro.period_seconds = spec.rebalancing.period_seconds;
    ro.min_peers_per_stage = static_cast<int>(spec.rebalancing.min_peers_per_stage);
    ro.min_gain = spec.rebalancing.min_gain;
    ro.cooldown_seconds = spec.rebalancing.cooldown_seconds;
    ro.stage_costs = swarm::runtime::stage_costs(spec);
    options.rebalance = ro;
  }

  int run() {
    apply_job();
    swarm::registry::RegistryServer server(host, port, options);
    server.start();
    spdlog::info("registry listening on {}", server.url());
    wait_for_stop();
    server.stop();
    return 0;
  }
};

// swarm tokenize: text and JSON Lines files and directories -> one pre-tokenized corpus (token_file.h).
struct TokenizeCommand {
  std::vector<std::string> inputs;
  std::string out, job, kind = "bytes", model, text_field = "text";
  CLI::App* cmd = nullptr;

  void add_to(CLI::App& app) {
    cmd = app.add_subcommand("tokenize", "pre-tokenize text files and directories into one token file");
    cmd->add_option("inputs", inputs,
                    "text or JSON Lines files, or directories (read as spec.training.dataset reads them)")
        ->required()->check(CLI::ExistingPath);
    cmd->add_option("--text-field", text_field, "the JSON Lines field holding the text (with --job: its textField)")
        ->capture_default_str();
    cmd->add_option("--out", out, "the token file to write (atomically)")->required();
    cmd->add_option("--tokenizer", kind, "bytes | sentencepiece")->check(CLI::IsMember({"bytes", "sentencepiece"}))
        ->capture_default_str();
    cmd->add_option("--model", model, "the SentencePiece .model file (--tokenizer sentencepiece)");
    cmd->add_option("--job", job, "take the tokenizer from this SwarmJob's spec.training.tokenizer instead")
        ->check(CLI::ExistingFile);
  }

  swarm::data::Tokenizer tokenizer() const {
    if (!job.empty()) return swarm::data::Tokenizer::from_spec(swarm::load_job_spec(job).training.tokenizer);
    if (kind == "sentencepiece") {
      if (model.empty()) throw std::invalid_argument("--tokenizer sentencepiece needs --model PATH");
      return swarm::data::Tokenizer::sentencepiece(model);
    }
    if (!model.empty()) throw std::invalid_argument("--model is only for --tokenizer sentencepiece");
    return swarm::data::Tokenizer::bytes();
  }

  int run() {
    const auto tok = tokenizer();
    std::vector<uint32_t> ids;
    const auto started = std::chrono::steady_clock::now();
    size_t done = 0, total = 0;
    std::vector<swarm::data::TextDataset> sets;
    swarm::data::DatasetOptions read;
    read.validation_fraction = 0;
    read.text_field = job.empty() ? text_field : swarm::load_job_spec(job).training.dataset.text_field;
    for (const auto& in : inputs) {
      const auto& ds = sets.emplace_back(swarm::data::TextDataset::load(in, read));
      if (ds.train().size() != ds.train_tokens())
        throw std::invalid_argument(in + ": holds token files already; swarm tokenize reads text and JSON Lines");
      total += ds.train_bytes();
    }
    const bool tty = ::isatty(2);
    // No tokenizer makes more tokens than bytes (SentencePiece falls back to one token a byte): one
    // allocation instead of copies of a growing vector (they took most of the time).
    ids.reserve(total + 1024);
    for (const auto& ds : sets) {
      std::string_view text = ds.train();
      while (!text.empty()) {  // ~1 MiB at a time, cut after a newline where there is one
        size_t n = std::min<size_t>(text.size(), 1 << 20);
        if (n < text.size()) {
          const size_t nl = text.rfind('\n', n);
          if (nl != std::string_view::npos && nl > 0) n = nl + 1;
        }
        tok.encode(text.substr(0, n), ids);
        text.remove_prefix(n);
        done += n;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        if (tty)
          std::fprintf(stderr, "\rtokenize: %.1f / %.1f MB, %.1f MB/s, %zu tokens", done / 1e6, total / 1e6,
                       done / 1e6 / std::max(s, 1e-9), ids.size());
      }
    }
    swarm::data::write_token_file(out, static_cast<uint64_t>(tok.vocab_size()), tok.sha256(), ids);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::fprintf(stderr, "%stokenize: %.1f MB of text -> %zu tokens (%s) in %.2f s, %.1f MB/s -> %s\n", tty ? "\n" : "",
                 done / 1e6, ids.size(), tok.describe().c_str(), s, done / 1e6 / std::max(s, 1e-9), out.c_str());
    return 0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"swarm: SWARM parallelism training (local mode and data-plane processes)"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")->capture_default_str();
  LocalCommand local;
  local.add_to(app);
  WorkerCommand worker;
  worker.add_to(app);
  TrainerCommand trainer;
  trainer.add_to(app);
  RegistryCommand registry;
  registry.add_to(app);
  TokenizeCommand tokenize;
  tokenize.add_to(app);
  swarm::cli::ExportCommand export_cmd;
  export_cmd.add_to(app);
  swarm::cli::EvalCommand eval_cmd;
  eval_cmd.add_to(app);
  swarm::cli::GenerateCommand generate_cmd;
  generate_cmd.add_to(app);
  swarm::cli::JobCommand job_cmd;
  job_cmd.add_to(app);
  swarm::cli::StepCheckCommand step_check;
  step_check.add_to(app);

  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  install_signal_handlers();

  try {
    if (*local.cmd) return local.run(log_level);
    if (*worker.cmd) return worker.run();
    if (*trainer.cmd) return trainer.run();
    if (*registry.cmd) return registry.run();
    if (*tokenize.cmd) return tokenize.run();
    if (*export_cmd.cmd) return export_cmd.run();
    if (*eval_cmd.cmd) return eval_cmd.run();
    if (*generate_cmd.cmd) return generate_cmd.run();
    if (*job_cmd.cmd) return job_cmd.run();
    if (*step_check.cmd) return step_check.run();
  } catch (const swarm::SpecError& e) {
    std::cerr << "invalid job spec:\n" << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
