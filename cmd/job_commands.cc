#include "cmd/job_commands.h"

#include <filesystem>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "common/hf_job.h"
#include "common/job_spec.h"
#include "common/s3_url.h"
#include "planner/layer_split.h"
#include "worker/checkpoint/hf_checkpoint.h"

namespace swarm::cli {

void JobCommand::add_to(CLI::App& app) {
  cmd = app.add_subcommand("job", "write SwarmJob manifests");
  cmd->require_subcommand(1);
  from_hf = cmd->add_subcommand("from-hf", "a SwarmJob (on stdout) that goes on training a Hugging Face checkpoint");
  from_hf->add_option("dir", dir, "the checkpoint: a folder or s3://bucket/prefix with config.json and safetensors")
      ->required();
  from_hf->add_option("--stages", stages, "pipeline stages (the layers are balanced over them)")
      ->capture_default_str()->check(CLI::Range(2, 64));
  from_hf->add_option("--name", name, "metadata.name of the job")->capture_default_str();
  from_hf->add_option("--data", data, "spec.training.dataset.path (default: the spec's default)");
  from_hf->add_option("--sequence-length", sequence_length,
                      "spec.model.sequenceLength (default: 256, at most config.json's max_position_embeddings)")
      ->check(CLI::Range(2, 65536));
  from_hf->add_option("--tokenizer-model", tokenizer_model,
                      "a SentencePiece model (default: the checkpoint's tokenizer.model, if it has one)");
  from_hf->add_option("--learning-rate", learning_rate, "spec.training.optimizer.learningRate")
      ->capture_default_str()->check(CLI::Range(1e-9, 10.0));
}

int JobCommand::run() const {
  const runtime::HfCheckpoint ckpt(dir);
  const HfModelConfig& hf = ckpt.config();
  FromHfOptions o;
  // A worker may start in another folder: the job names the checkpoint by its absolute path.
  o.dir = is_s3_url(dir) ? dir : std::filesystem::absolute(dir).lexically_normal().string();
  o.name = name;
  o.dataset = data;
  o.learning_rate = learning_rate;
  o.sequence_length = sequence_length;
  o.tokenizer_model = tokenizer_model;
  // The tokenizer files by their absolute paths too (o.dir is absolute for a local folder).
  const auto file_of = [&](const std::string& name) { return is_s3_url(dir) ? ckpt.path_of(name) : o.dir + "/" + name; };
  if (o.tokenizer_model.empty() && ckpt.has_file("tokenizer.model")) o.tokenizer_model = file_of("tokenizer.model");
  // The trainers open the tokenizer.json as a local file: one in object storage is left to the user.
  if (o.tokenizer_model.empty() && !is_s3_url(dir) && ckpt.has_file("tokenizer.json"))
    o.tokenizer_json = file_of("tokenizer.json");
  if (stages > hf.num_hidden_layers)
    throw std::invalid_argument("--stages " + std::to_string(stages) + ": " + ckpt.config_path() + " has only " +
                                std::to_string(hf.num_hidden_layers) + " layers (num_hidden_layers), one at least per stage");
  planner::StageShape shape;
  shape.vocab_size = hf.vocab_size;
  shape.hidden_size = hf.hidden_size;
  shape.intermediate_size = hf.intermediate_size;
  shape.num_heads = hf.num_attention_heads;
  shape.kv_heads = hf.num_key_value_heads;
  shape.head_dim = hf.head_dim;
  shape.sequence_length = hf_sequence_length(hf, sequence_length);
  shape.gated_mlp = true;
  o.layers_per_stage = planner::balanced_layers(hf.num_hidden_layers, stages, planner::split_costs(shape));
  const JobSpec job = job_from_hf(hf, o);
  if (const auto problems = validate_job_spec(job); !problems.empty()) {
    std::ostringstream why;
    why << "the job for " << dir << " does not fit the spec's ranges:";
    for (const auto& p : problems) why << "\n  " << p;
    throw std::invalid_argument(why.str());
  }
  std::cout << hf_job_yaml(job, hf, o);
  return 0;
}

}  // namespace swarm::cli
