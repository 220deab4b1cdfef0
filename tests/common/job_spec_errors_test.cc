// A manifest refused: every invalid value, header and metadata rule, unknown field and
// document-level error named with its path and value, every error of a document collected.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job_spec.h"
#include "tests/common/job_spec_fixtures.h"

namespace swarm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

using spec_test::errors_of;
using spec_test::kHeader;
using spec_test::manifest;

struct BadCase {
  std::string spec;      // flow mapping under spec:
  std::string expected;  // the one error message must contain this
  bool located = true;   // whether the field is in the text (then its line is named)
};

TEST(JobSpec, EachInvalidValueIsReportedWithItsPathAndValue) {
  const std::vector<BadCase> cases = {
      {"{pipeline: {stages: 0}}", "spec.pipeline.stages: must be >= 2, got 0"},
      {"{pipeline: {stages: 65}}", "spec.pipeline.stages: must be <= 64, got 65"},
      {"{pipeline: {blockSize: 8}}", "spec.pipeline.blockSize: must be >= 16, got 8"},
      {"{averaging: {blockSize: 65536}}", "spec.averaging.blockSize: must be <= 65535, got 65536"},
      {"{averaging: {compression: int4}}", "spec.averaging.compression: must be one of none, fp16, blockwise8, got \"int4\""},
      {"{pipeline: {compression: zstd}}",
       "spec.pipeline.compression: must be one of none, fp16, blockwise8, got \"zstd\""},
      {"{model: {vocabSize: 1}}", "spec.model.vocabSize: must be >= 2, got 1"},
      {"{model: {vocabSize: 1000001}}", "spec.model.vocabSize: must be <= 1000000, got 1000001"},
      {"{model: {hiddenSize: 4, numHeads: 1}}", "spec.model.hiddenSize: must be >= 8, got 4"},
      {"{model: {hiddenSize: 190}}",
       "spec.model.hiddenSize: must be a multiple of spec.model.numHeads (6), got 190"},
      {"{model: {hiddenSize: abc}}", "spec.model.hiddenSize: expected an integer, got \"abc\""},
      {"{model: {hiddenSize: 1.5}}", "spec.model.hiddenSize: expected an integer, got 1.5"},
      {"{model: {hiddenSize: \"192\"}}", "spec.model.hiddenSize: expected an integer, got \"192\""},
      {"{model: {numHeads: 0}}", "spec.model.numHeads: must be >= 1, got 0"},
      {"{model: {numHeads: 512, hiddenSize: 1024}}",
       "spec.model.numHeads: must be <= 256, got 512"},
      {"{model: {layersPerStage: 257}}", "spec.model.layersPerStage: must be <= 256, got 257"},
      {"{model: {sequenceLength: 1}}", "spec.model.sequenceLength: must be >= 2, got 1"},
      {"{model: {mlpRatio: 17}}", "spec.model.mlpRatio: must be <= 16, got 17"},
      {"{model: {sharedLayers: yes}}",
       "spec.model.sharedLayers: expected a boolean (true or false), got \"yes\""},
      {"{model: 5}", "spec.model: expected an object, got 5"},
      {"{pipeline: {recomputeActivations: 1}}",
       "spec.pipeline.recomputeActivations: expected a boolean (true or false), got 1"},
      {"{training: {globalBatch: 60}}",
       "spec.training.globalBatch: must be a multiple of spec.training.microbatch (8), got 60"},
      {"{training: {globalBatch: 4}}",
       "spec.training.globalBatch: must be >= spec.training.microbatch (8), got 4"},
      {"{training: {microbatch: 0}}", "spec.training.microbatch: must be >= 1, got 0"},
      {"{training: {microbatch: 131072, globalBatch: 131072}}",
       "spec.training.microbatch: must be <= 65536, got 131072"},
      {"{training: {maxSteps: 0, schedule: {warmupSteps: 0}}}",
       "spec.training.maxSteps: must be >= 1, got 0"},
      {"{training: {evalBatches: -1}}", "spec.training.evalBatches: must be >= 0, got -1"},
      {"{training: {evalBatches: 70000}}", "spec.training.evalBatches: must be <= 65536, got 70000"},
      {"{training: {seed: -1}}", "spec.training.seed: must be an integer in [0, "},
      {"{training: {dataset: {path: \"\"}}}", "spec.training.dataset.path: must not be empty"},
      {"{training: {dataset: {format: parquet}}}",
       "spec.training.dataset.format: must be one of auto, text, jsonl, tokens, got \"parquet\""},
      {"{training: {dataset: {textField: \"\"}}}", "spec.training.dataset.textField: must not be empty"},
      {"{training: {dataset: {validationFraction: 0.6}}}", "spec.training.dataset.validationFraction: must be <= 0.5, got 0.6"},
      {"{training: {dataset: {validationFraction: -0.1}}}", "spec.training.dataset.validationFraction: must be >= 0, got -0.1"},
      {"{training: {dataset: {validationFraction: 0}}}",
       "spec.training.dataset.validationFraction: is 0 (nothing held out) while spec.training.evalBatches is 8: set "
       "evalBatches to 0 or hold out a fraction, got 0"},
      {"{training: {tokenizer: {kind: bpe}}}",
       "spec.training.tokenizer.kind: must be one of bytes, sentencepiece, huggingface, got \"bpe\""},
      {"{training: {tokenizer: {kind: sentencepiece, model: \"\"}}}",
       "spec.training.tokenizer.model: is required with spec.training.tokenizer.kind sentencepiece (the SentencePiece "
       ".model file), got \"\""},
      {"{training: {tokenizer: {model: m.model}}}",
       "spec.training.tokenizer.model: is only for kind sentencepiece (kind is bytes), got \"m.model\""},
      {"{training: {optimizer: {name: sgd}}}",
       "spec.training.optimizer.name: must be one of adamw, lamb, got \"sgd\""},
      {"{training: {optimizer: {learningRate: 0}}}",
       "spec.training.optimizer.learningRate: must be > 0, got 0"},
      {"{training: {optimizer: {learningRate: 11}}}",
       "spec.training.optimizer.learningRate: must be <= 10, got 11"},
      {"{training: {optimizer: {learningRate: .nan}}}",
       "spec.training.optimizer.learningRate: must be a finite number, got .nan"},
      {"{training: {optimizer: {betas: [0.9]}}}",
       "spec.training.optimizer.betas: expected a list of two numbers, got [0.9]"},
      {"{training: {optimizer: {betas: [0.9, 1.0]}}}",
       "spec.training.optimizer.betas[1]: must be < 1, got 1"},
      {"{training: {optimizer: {betas: [-0.1, 0.9]}}}",
       "spec.training.optimizer.betas[0]: must be >= 0, got -0.1"},
      {"{training: {optimizer: {betas: [0.9, x]}}}",
       "spec.training.optimizer.betas[1]: expected a number, got \"x\""},
      {"{training: {optimizer: {epsilon: 0}}}",
       "spec.training.optimizer.epsilon: must be > 0, got 0"},
      {"{training: {optimizer: {weightDecay: -0.01}}}",
       "spec.training.optimizer.weightDecay: must be >= 0, got -0.01"},
      {"{training: {optimizer: {gradClip: -1}}}",
       "spec.training.optimizer.gradClip: must be >= 0, got -1"},
      {"{training: {schedule: {kind: step}}}",
       "spec.training.schedule.kind: must be one of constant, linear, cosine, got \"step\""},
      {"{training: {schedule: {warmupSteps: 300}}}",
       "spec.training.schedule.warmupSteps: must be < spec.training.maxSteps (300), got 300"},
      {"{training: {schedule: {warmupSteps: -1}}}",
       "spec.training.schedule.warmupSteps: must be >= 0, got -1"},
      {"{training: {schedule: {minLearningRateRatio: 1.5}}}",
       "spec.training.schedule.minLearningRateRatio: must be <= 1, got 1.5"},
      {"{workers: {perStage: 0}}", "spec.workers.perStage: must be >= 1, got 0"},
      {"{workers: {perStage: 1025}}", "spec.workers.perStage: must be <= 1024, got 1025"},
      {"{workers: {device: gpu}}",
       "spec.workers.device: must be one of auto, cpu, cuda, got \"gpu\""},
      {"{workers: {precision: fp8}}",
       "spec.workers.precision: must be one of auto, fp32, bf16, fp16, got \"fp8\""},
      {"{workers: {precision: BF16}}",
       "spec.workers.precision: must be one of auto, fp32, bf16, fp16, got \"BF16\""},
      {"{workers: {precision: 16}}", "spec.workers.precision: expected a string, got 16"},
      {"{workers: {threads: -1}}", "spec.workers.threads: must be >= 0, got -1"},
      {"{trainers: {count: 0}}", "spec.trainers.count: must be >= 1, got 0"},
      {"{trainers: {inflightMicrobatches: 2000}}",
       "spec.trainers.inflightMicrobatches: must be <= 1024, got 2000"},
      {"{trainers: {routing: {emaAlpha: 0}}}",
       "spec.trainers.routing.emaAlpha: must be > 0, got 0"},
      {"{trainers: {routing: {emaAlpha: 1.5}}}",
       "spec.trainers.routing.emaAlpha: must be <= 1, got 1.5"},
      {"{trainers: {routing: {backwardWeight: -2}}}",
       "spec.trainers.routing.backwardWeight: must be > 0, got -2"},
      {"{trainers: {routing: {explorePeerSeconds: 0}}}",
       "spec.trainers.routing.explorePeerSeconds: must be > 0, got 0"},
      {"{trainers: {routing: {interRegionPenaltyMs: -5}}}",
       "spec.trainers.routing.interRegionPenaltyMs: must be >= 0, got -5"},
      {"{trainers: {routing: {interRegionPenaltyMs: 60001}}}",
       "spec.trainers.routing.interRegionPenaltyMs: must be <= 60000, got 60001"},
      {"{trainers: {routing: {interRegionPenaltyMs: fifty}}}",
       "spec.trainers.routing.interRegionPenaltyMs: expected a number, got \"fifty\""},
      {"{timeouts: {connectSeconds: 0}}", "spec.timeouts.connectSeconds: must be > 0, got 0"},
      {"{timeouts: {forwardSeconds: 86401}}",
       "spec.timeouts.forwardSeconds: must be <= 86400, got 86401"},
      {"{timeouts: {backwardSeconds: .inf}}",
       "spec.timeouts.backwardSeconds: must be a finite number, got .inf"},
      {"{timeouts: {averagingSeconds: -1}}", "spec.timeouts.averagingSeconds: must be > 0, got -1"},
      {"{timeouts: {activationTtlSeconds: thirty}}",
       "spec.timeouts.activationTtlSeconds: expected a number, got \"thirty\""},
      {"{timeouts: {peerExpirySeconds: 1}}",
       "spec.timeouts.peerExpirySeconds: must be > spec.timeouts.heartbeatSeconds (1), got 1"},
      {"{timeouts: {heartbeatSeconds: 5}}",
       "spec.timeouts.peerExpirySeconds: must be > spec.timeouts.heartbeatSeconds (5), got 4",
       /*located=*/false},
      {"{secret: {env: \"\"}}", "spec.secret.env: must not be empty"},
      {"{secret: {env: 1SECRET}}",
       "spec.secret.env: must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*), got "
       "\"1SECRET\""},
      {"{secret: {secretRef: {name: s}}}", "spec.secret.secretRef.key: required when secretRef",
       /*located=*/false},
      {"{secret: {secretRef: {name: Bad_Name, key: k}}}",
       "spec.secret.secretRef.name: must be a Kubernetes Secret name (DNS-1123 subdomain), got "
       "\"Bad_Name\""},
      {"{rebalancing: {periodSeconds: 0}}", "spec.rebalancing.periodSeconds: must be > 0, got 0"},
      {"{rebalancing: {minGain: -1}}", "spec.rebalancing.minGain: must be >= 0, got -1"},
      {"{rebalancing: {enabled: maybe}}", "spec.rebalancing.enabled: expected a boolean"},
      {"{rebalancing: {minPeersPerStage: 2}}",
       "spec.rebalancing.minPeersPerStage: must be <= spec.workers.perStage (1), got 2"},
      {"{checkpoint: {everySteps: 0}}", "spec.checkpoint.everySteps: must be >= 1, got 0"},
      {"{checkpoint: {keep: 0}}", "spec.checkpoint.keep: must be >= 1, got 0"},
      {"{checkpoint: {pathh: /x}}", "spec.checkpoint.pathh: unknown field"},
      {"{checkpoint: {path: \"s3://Bucket/x\"}}", "spec.checkpoint.path: bucket may hold lowercase letters"},
      {"{checkpoint: {path: \"s3://bucket\", s3: {partSizeMiB: 4}}}", "spec.checkpoint.s3.partSizeMiB: must be >= 5, got 4"},
      {"{checkpoint: {path: \"s3://bucket\", s3: {endpoint: \"minio:9000\"}}}",
       "spec.checkpoint.s3.endpoint: must start with http:// or https://, got \"minio:9000\""},
      {"{checkpoint: {path: \"s3://bucket\", s3: {pathStyle: yes please}}}", "spec.checkpoint.s3.pathStyle: expected a boolean"},
      {"{checkpoint: {path: /ckpt, s3: {region: eu-west-1}}}",
       "spec.checkpoint.s3: applies only to an s3:// spec.checkpoint.path, got path \"/ckpt\""},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.spec);
    std::vector<std::string> errors = errors_of(manifest(c.spec));
    ASSERT_THAT(errors, SizeIs(1));
    EXPECT_THAT(errors[0], HasSubstr(c.expected));
    if (c.located) {
      EXPECT_THAT(errors[0], HasSubstr("(line 5, column "));  // the spec: line of manifest()
    } else {
      EXPECT_THAT(errors[0], Not(HasSubstr("(line ")));
    }
  }
}

TEST(JobSpec, HeaderAndMetadataRules) {
  const std::string spec = "spec: {}\n";
  auto doc = [&](const std::string& api, const std::string& kind, const std::string& metadata) {
    return api + kind + metadata + spec;
  };
  const std::string api = "apiVersion: swarm-operator.io/v1alpha1\n";
  const std::string kind = "kind: SwarmJob\n";
  const std::string meta = "metadata: {name: t}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {doc("apiVersion: v1\n", kind, meta),
       "apiVersion: must be \"swarm-operator.io/v1alpha1\", got \"v1\" (line 1, column 1)"},
      {doc("", kind, meta), "apiVersion: required"},
      {doc(api, "kind: Deployment\n", meta), "kind: must be \"SwarmJob\", got \"Deployment\""},
      {doc(api, "", meta), "kind: required"},
      {doc(api, kind, ""), "metadata: required"},
      {doc(api, kind, "metadata: {namespace: x}\n"), "metadata.name: required"},
      {doc(api, kind, "metadata: {name: Tiny_LM}\n"),
       "metadata.name: must be a DNS-1123 label (lowercase letters, digits and '-', starting and "
       "ending with a letter or digit), got \"Tiny_LM\""},
      {doc(api, kind, "metadata: {name: -lm}\n"), "metadata.name: must be a DNS-1123 label"},
      {doc(api, kind, "metadata: {name: " + std::string(41, 'a') + "}\n"),
       "metadata.name: must be at most 40 characters (pod names append suffixes), got \"aaaa"},
      {doc(api, kind, "metadata: {name: 5}\n"), "metadata.name: expected a string, got 5"},
      {doc(api, kind, "metadata: {name: t, namespace: Prod}\n"),
       "metadata.namespace: must be a DNS-1123 label"},
      {doc(api, kind, "metadata: {name: t, labels: {tier: 1}}\n"),
       "metadata.labels.tier: expected a string, got 1"},
      {doc(api, kind, "metadata: {name: t, labels: [a]}\n"),
       "metadata.labels: expected an object of strings, got [\"a\"]"},
  };
  for (const auto& [yaml, expected] : cases) {
    SCOPED_TRACE(yaml);
    std::vector<std::string> errors = errors_of(yaml);
    ASSERT_THAT(errors, SizeIs(1));
    EXPECT_THAT(errors[0], HasSubstr(expected));
  }
  // Exactly 40 characters is fine.
  EXPECT_EQ(parse_job_spec(doc(api, kind, "metadata: {name: " + std::string(40, 'a') + "}\n")).name,
            std::string(40, 'a'));
}

TEST(JobSpec, UnknownFieldsAreErrorsThatListTheAllowedOnes) {
  std::vector<std::string> errors = errors_of(kHeader + "spec:\n  model:\n    hiddenSiz: 192\n");
  ASSERT_THAT(errors, SizeIs(1));
  EXPECT_THAT(errors[0],
              HasSubstr("spec.model.hiddenSiz: unknown field (did you mean hiddenSize?)"));
  EXPECT_THAT(errors[0], HasSubstr("allowed: architecture, vocabSize, hiddenSize, numHeads, layersPerStage, "
                                   "sequenceLength, mlpRatio, sharedLayers, intermediateSize, numKeyValueHeads"));
  EXPECT_THAT(errors[0], HasSubstr("(line 7, column 5)"));

  EXPECT_THAT(errors_of(manifest("{model: {hidden_size: 192}}")),
              ElementsAre(HasSubstr(
                  "spec.model.hidden_size: unknown field (did you mean hiddenSize?)")));
  EXPECT_THAT(errors_of(manifest("{training: {schedule: {minLearningRatio: 0.1}}}")),
              ElementsAre(HasSubstr("spec.training.schedule.minLearningRatio: unknown field (did "
                                    "you mean minLearningRateRatio?)")));
  EXPECT_THAT(errors_of(manifest("{optimiser: {}}")),
              ElementsAre(HasSubstr("spec.optimiser: unknown field; allowed: model, pipeline, averaging, "
                                    "training, workers, trainers, timeouts, secret")));
  EXPECT_THAT(errors_of(kHeader + "specs: {}\n"),
              ElementsAre(HasSubstr("specs: unknown field (did you mean spec?); allowed: "
                                    "apiVersion, kind, metadata, spec, status")));
  EXPECT_THAT(errors_of(manifest("{secret: {secretRef: {name: s, key: k, optional: true}}}")),
              ElementsAre(HasSubstr("spec.secret.secretRef.optional: unknown field")));
}

// The examples written for the operator (nodePools, placement, images, resources) run under
// `swarm local` too: those fields are accepted, listed, and change nothing else; a misspelling of
// one is still an error.
TEST(JobSpec, CollectsEveryErrorInDocumentOrder) {
  const std::string yaml = kHeader + R"(spec:
  timeouts:
    connectSeconds: 0
  model:
    hiddenSize: abc
    colour: blue
  pipeline:
    stages: 1
  training:
    optimizer: {name: sgd}
)";
  try {
    parse_job_spec(yaml);
    FAIL() << "no error";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.errors(),
                ElementsAre("spec.timeouts.connectSeconds: must be > 0, got 0 (line 7, column 5)",
                            "spec.model.hiddenSize: expected an integer, got \"abc\" "
                            "(line 9, column 5)",
                            HasSubstr("spec.model.colour: unknown field"),
                            "spec.pipeline.stages: must be >= 2, got 1 (line 12, column 5)",
                            "spec.training.optimizer.name: must be one of adamw, lamb, got \"sgd\" "
                            "(line 14, column 17)"));
    // what() lists them one per line.
    std::string what = e.what();
    EXPECT_EQ(std::count(what.begin(), what.end(), '\n'), 4);
    EXPECT_THAT(what, HasSubstr("got 0 (line 7, column 5)\nspec.model.hiddenSize"));
    EXPECT_TRUE(e.source().empty());
  }
}

TEST(JobSpec, A_TypeErrorDoesNotCascadeIntoCrossFieldRules) {
  EXPECT_THAT(errors_of(manifest("{training: {microbatch: eight, globalBatch: 60}}")),
              ElementsAre(HasSubstr("spec.training.microbatch: expected an integer")));
  EXPECT_THAT(errors_of(manifest("{model: {numHeads: many, hiddenSize: 190}}")),
              ElementsAre(HasSubstr("spec.model.numHeads: expected an integer")));
}

TEST(JobSpec, DocumentLevelErrors) {
  // YAML syntax errors carry line and column.
  EXPECT_THAT(errors_of(kHeader + "spec:\n  model: [1, 2\n"),
              ElementsAre(HasSubstr("YAML syntax error")));
  EXPECT_THAT(errors_of(kHeader + "spec:\n  model: {a: 1\n  pipeline: {}\n")[0],
              HasSubstr("(line "));
  EXPECT_THAT(errors_of(kHeader + "spec: {}\nspec: {}\n"),
              ElementsAre("spec: duplicate key (line 6, column 1)"));
  EXPECT_THAT(errors_of(kHeader + "spec: {[a]: 1}\n"),
              ElementsAre("spec: keys must be strings, got a list as a key (line 5, column 8)"));
  EXPECT_THAT(errors_of(""), ElementsAre("the document is empty"));
  EXPECT_THAT(errors_of("- a\n- b\n"), ElementsAre(HasSubstr("expected a SwarmJob manifest")));
  EXPECT_THAT(errors_of(kHeader + "---\n" + kHeader),
              ElementsAre(HasSubstr("expected one YAML document, got 2")));
  // Aliases expanding exponentially ("billion laughs") are cut off, as is deep nesting.
  std::string bomb = kHeader + "status:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'g'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string("  ") + c + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev +
            ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" +
            prev + ", *" + prev + "]\n";
  }
  EXPECT_THAT(errors_of(bomb), ElementsAre(HasSubstr("more than 20000 values")));
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  EXPECT_THAT(errors_of(kHeader + "status: " + deep + "\n"),
              ElementsAre(HasSubstr("nested deeper than 64 levels")));
}

// Found by fuzzing (tests/fuzz): yaml-cpp reads a stray "," as an endless series of empty
// documents, so parse_job_spec never returned while its memory grew.
TEST(JobSpec, AStrayCommaIsASyntaxErrorNotAHang) {
  for (const std::string yaml : {std::string(","), kHeader + "---\n,\n"}) {
    auto errors = std::async(std::launch::async, [yaml] { return errors_of(yaml); });
    if (errors.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      std::fprintf(stderr, "FAILED: parse_job_spec(%s) did not return within 30 s\n", yaml.c_str());
      std::_Exit(1);  // the parse would never end: fail now rather than wait for it
    }
    EXPECT_THAT(errors.get(), ElementsAre(HasSubstr("YAML syntax error: no document can start here")));
  }
  EXPECT_THAT(errors_of(","), ElementsAre(HasSubstr("(line 1, column 1)")));
}

}  // namespace
}  // namespace swarm
