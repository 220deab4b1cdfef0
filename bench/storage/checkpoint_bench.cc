// checkpoint_bench: seconds to write and to restore each stage's checkpoint (parameters + AdamW
// moments, as a worker writes them) at a location — a directory or s3://bucket/prefix — and the
// bytes that go up. bench/checkpoint-s3.sh runs it against MinIO and a local folder side by side.
//
//   checkpoint_bench --job examples/tiny-lm.yaml --location s3://bench/ckpt [--hidden 1024]
//                    [--repeats 5]
// Prints one JSON line per stage and a summary line:
//   {"stage":0,"bytes":..,"write_s":[..],"restore_s":[..]}
//   {"summary":true,"hidden":..,"location":..,"checkpoint_bytes":..,"write_s_median":..,
//    "restore_s_median":..,"bytes_up_per_step":..,"every_steps":..}
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/job_spec.h"
#include <torch/torch.h>

#include "worker/model/optimizer.h"
#include "worker/model/stage.h"
#include "worker/model/state.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/runtime/job_model.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("checkpoint write and restore times at a location");
  std::string job, location;
  int64_t hidden = 0;
  int repeats = 5;
  app.add_option("--job", job, "SwarmJob YAML (the model and spec.checkpoint.s3)")->required();
  app.add_option("--location", location, "a directory or s3://bucket/prefix")->required();
  app.add_option("--hidden", hidden, "override spec.model.hiddenSize (numHeads becomes hidden / 64)");
  app.add_option("--repeats", repeats, "writes and restores per stage")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  auto spec = swarm::load_job_spec(job);
  if (hidden > 0) {
    spec.model.hidden_size = hidden;
    spec.model.num_heads = std::max<int64_t>(1, hidden / 64);
  }
  spec.checkpoint.path = location;
  const swarm::runtime::CheckpointLocation where(spec.checkpoint);
  const auto config = swarm::runtime::model_config(spec);
  const std::string key = swarm::runtime::checkpoint_key("checkpoint-bench");
  std::vector<double> all_write, all_restore, all_save;
  int64_t total_bytes = 0;
  for (int s = 0; s < spec.pipeline.stages; ++s) {
    auto m = swarm::model::make_stage(config, s, 1);
    swarm::model::StageOptimizer opt(*m, swarm::runtime::optimizer_config(spec));
    std::vector<double> write_s, restore_s, save_s;
    int64_t bytes = 0;
    for (int r = 0; r < repeats; ++r) {
      auto t = std::chrono::steady_clock::now();
      const std::string state = swarm::model::save_state(*m, opt);
      save_s.push_back(seconds_since(t));
      swarm::runtime::write_checkpoint(where, s, 1000 + r, state, 2, key);
      write_s.push_back(seconds_since(t));
      bytes = static_cast<int64_t>(state.size());
      t = std::chrono::steady_clock::now();
      const auto listed = swarm::runtime::list_checkpoints(where, s);
      swarm::model::load_state(swarm::runtime::open_checkpoint(where, listed.at(0), s, key), *m, opt);
      restore_s.push_back(seconds_since(t));
    }
    total_bytes += bytes;
    all_write.push_back(median(write_s));
    all_restore.push_back(median(restore_s));
    all_save.push_back(median(save_s));
    std::printf("%s\n", nlohmann::json{{"stage", s}, {"bytes", bytes}, {"save_s", save_s}, {"write_s", write_s}, {"restore_s", restore_s}}
                            .dump()
                            .c_str());
  }
  nlohmann::json summary = {{"summary", true},
                            {"hidden", spec.model.hidden_size},
                            {"location", location},
                            {"stages", spec.pipeline.stages},
                            {"checkpoint_bytes", total_bytes},
                            {"save_s_median_per_stage", median(all_save)},
                            {"write_s_median_per_stage", median(all_write)},
                            {"restore_s_median_per_stage", median(all_restore)},
                            {"every_steps", spec.checkpoint.every_steps},
                            {"bytes_up_per_step", static_cast<double>(total_bytes) / spec.checkpoint.every_steps}};
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}
