// spec.model and spec.pipeline: decoded from JSON (both front ends) and written back by to_json.
// The architecture-specific fields are written only when they say something: ropeScaling,
// attentionBias, mlpBias and init when given, so a gpt2 job's JSON reads as it always did plus
// the fields that default to "derived" (0) or to the gpt2 values.
#include <string>

#include "common/job_spec.h"
#include "common/job_spec_reader.h"

namespace swarm::detail {

using nlohmann::json;

void decode_model(Reader& spec, ModelSpec& m) {
  Reader r = spec.object("model");
  r.get_enum("architecture", m.architecture, parse_architecture, "gpt2, llama");
  r.get("vocabSize", m.vocab_size);
  r.get("hiddenSize", m.hidden_size);
  r.get("numHeads", m.num_heads);
  r.get("layersPerStage", m.layers_per_stage);
  r.get("sequenceLength", m.sequence_length);
  r.get("mlpRatio", m.mlp_ratio);
  r.get("sharedLayers", m.shared_layers);
  r.get("intermediateSize", m.intermediate_size);
  r.get("numKeyValueHeads", m.num_key_value_heads);
  r.get("headDim", m.head_dim);
  r.get("normEps", m.norm_eps);
  r.get("ropeTheta", m.rope_theta);
  if (r.present("ropeScaling")) {
    RopeScalingSpec rs;
    Reader s = r.object("ropeScaling");
    s.get_enum("type", rs.type, parse_rope_scaling_type, "llama3");
    s.get("factor", rs.factor);
    s.get("lowFreqFactor", rs.low_freq_factor);
    s.get("highFreqFactor", rs.high_freq_factor);
    s.get("originalMaxPositionEmbeddings", rs.original_max_position_embeddings);
    s.finish();
    m.rope_scaling = rs;
  } else {
    r.ignore("ropeScaling");  // known, so that a typo near it is suggested
  }
  r.get("attentionBias", m.attention_bias);
  r.get("mlpBias", m.mlp_bias);
  if (r.present("init")) {
    ModelInitSpec init;
    Reader i = r.object("init");
    i.get("from", init.from, /*required=*/true);
    i.get_enum("format", init.format, parse_model_format, "huggingface");
    i.finish();
    m.init = init;
  } else {
    r.ignore("init");
  }
  r.finish();
}

void decode_pipeline(Reader& spec, PipelineSpec& p) {
  Reader r = spec.object("pipeline");
  r.get("stages", p.stages);
  r.get_enum("compression", p.compression, parse_compression, "none, fp16, blockwise8");
  r.get("blockSize", p.block_size);
  r.get_list("layersPerStage", p.layers_per_stage);
  r.get("recomputeActivations", p.recompute_activations);
  r.finish();
}

json model_json(const ModelSpec& m) {
  json out = {{"architecture", to_string(m.architecture)},
              {"vocabSize", m.vocab_size},
              {"hiddenSize", m.hidden_size},
              {"numHeads", m.num_heads},
              {"layersPerStage", m.layers_per_stage},
              {"sequenceLength", m.sequence_length},
              {"mlpRatio", m.mlp_ratio},
              {"sharedLayers", m.shared_layers},
              {"intermediateSize", m.intermediate_size},
              {"numKeyValueHeads", m.num_key_value_heads},
              {"headDim", m.head_dim},
              {"normEps", m.norm_eps},
              {"ropeTheta", m.rope_theta}};
  if (m.rope_scaling) {
    const RopeScalingSpec& s = *m.rope_scaling;
    out["ropeScaling"] = {{"type", to_string(s.type)},
                          {"factor", s.factor},
                          {"lowFreqFactor", s.low_freq_factor},
                          {"highFreqFactor", s.high_freq_factor},
                          {"originalMaxPositionEmbeddings", s.original_max_position_embeddings}};
  }
  if (m.attention_bias) out["attentionBias"] = *m.attention_bias;
  if (m.mlp_bias) out["mlpBias"] = *m.mlp_bias;
  if (m.init) out["init"] = {{"from", m.init->from}, {"format", to_string(m.init->format)}};
  return out;
}

json pipeline_json(const PipelineSpec& p) {
  return {{"stages", p.stages},
          {"compression", to_string(p.compression)},
          {"blockSize", p.block_size},
          {"layersPerStage", p.layers_per_stage},
          {"recomputeActivations", p.recompute_activations}};
}

}  // namespace swarm::detail
