#include "worker/checkpoint/hf_init.h"

#include <stdexcept>

#include "common/hf_job.h"
#include "common/s3_url.h"
#include "worker/runtime/job_model.h"

// The architectures' tensor name tables (worker/model/arch_table.h, the llama stages' names) land
// with the llama model; until a build has them, a llama import is refused saying so.
#if __has_include("worker/model/arch_table.h")
#include "worker/model/arch_table.h"
#define SWARM_HAS_ARCH_TABLE 1
#endif

namespace swarm::runtime {

std::vector<HfTensorRef> hf_stage_refs(const model::ModelConfig& config, int64_t stage) {
  if (!config.is_llama())
    throw std::invalid_argument(std::string("import: only llama stages are read from a Hugging Face checkpoint, not ") +
                                model::architecture_name(config.architecture));
#ifdef SWARM_HAS_ARCH_TABLE
  std::vector<HfTensorRef> out;
  for (const auto& t : model::stage_tensors(config, stage)) out.push_back({t.internal, t.hf, t.hf_shape});
  return out;
#else
  throw std::runtime_error("import: stage " + std::to_string(stage) +
                           ": this build has no tensor name table for llama stages (worker/model/arch_table.h)");
#endif
}

void check_model_init(const JobSpec& spec) {
  if (!spec.model.init) return;
  const std::string& from = spec.model.init->from;
  std::vector<std::string> problems;
  try {
    const HfCheckpoint ckpt(from, spec.checkpoint.s3);
    problems = hf_model_mismatches(spec, ckpt.config(), ckpt.config_path());
    if (problems.empty()) {  // the tensors' shapes follow from the fields: check them once those agree
      const auto config = model_config(spec);
      for (int64_t s = 0; s < config.num_stages; ++s)
        for (auto& p : hf_tensor_problems(ckpt, hf_stage_refs(config, s))) problems.push_back(std::move(p));
    }
  } catch (const std::exception& e) {
    problems.push_back(e.what());
  }
  if (problems.empty()) return;
  std::string why = "spec.model.init.from " + from + " does not fit the job:";
  for (const auto& p : problems) why += "\n  " + p;
  throw std::runtime_error(why);
}

void load_model_init(const JobSpec& spec, model::StageModel& stage) {
  if (!spec.model.init) return;
  const HfCheckpoint ckpt(spec.model.init->from, spec.checkpoint.s3);
  load_hf_tensors(ckpt, hf_stage_refs(stage.config(), stage.stage_index()), stage);
}

ExportedModel load_hf_model(const std::string& dir, int64_t sequence_length, const CheckpointS3Spec& s3) {
  const HfCheckpoint ckpt(dir, s3);
  FromHfOptions o;
  o.dir = dir;
  o.sequence_length = sequence_length;
  o.layers_per_stage = {ckpt.config().num_hidden_layers};  // one stage: the whole model in this process
  JobSpec job = job_from_hf(ckpt.config(), o);
  if (ckpt.has_file("tokenizer.model")) {
    job.training.tokenizer.kind = TokenizerKind::SentencePiece;
    job.training.tokenizer.model = ckpt.path_of("tokenizer.model");
  } else if (!is_s3_url(dir) && ckpt.has_file("tokenizer.json")) {
    // Its token files (scripts/hf_tokenize.py) record this file's hash, and its ids decode only
    // through it: under the bytes tokenizer `swarm eval` would refuse them and `swarm generate`
    // could not print its output. Read locally only (the Tokenizer opens a file).
    job.training.tokenizer.kind = TokenizerKind::HuggingFace;
    job.training.tokenizer.file = ckpt.path_of("tokenizer.json");
  }
  ExportedModel m;
  m.config = model_config(job);
  m.config_json = model_config_json(job, 0);
  m.config_json["source"] = dir;
  const auto refs = hf_stage_refs(m.config, 0);
  if (auto problems = hf_tensor_problems(ckpt, refs); !problems.empty()) {
    std::string why = "model " + dir + " does not fit its own config.json:";
    for (const auto& p : problems) why += "\n  " + p;
    throw std::runtime_error(why);
  }
  auto stage = model::make_stage(m.config, 0, 0);
  load_hf_tensors(ckpt, refs, *stage);
  stage->eval();
  m.stages.push_back(std::move(stage));
  return m;
}

}  // namespace swarm::runtime

