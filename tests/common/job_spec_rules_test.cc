// The job-spec rules the CRD repeats as CEL (crds/, tested against a real API server in
// tests/operator/crd_validation_test.cc): here the second line, common/job_spec_validate.cc. Each bad
// value is refused with one message naming its field and the value; the values just inside each
// rule are accepted.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/job_spec.h"
#include "tests/common/job_spec_fixtures.h"

namespace swarm {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

using spec_test::manifest;

struct Refused {
  std::string spec;      // a flow mapping under spec:
  std::string expected;  // in the one error: the field, the rule, the value
};

TEST(JobSpecRules, EachBrokenRuleNamesTheFieldAndTheValue) {
  const std::vector<Refused> cases = {
      {"{averaging: {maxHandoffLagSteps: 65}}", "spec.averaging.maxHandoffLagSteps: must be <= 64, got 65"},
      {"{averaging: {maxHandoffLagSteps: -1}}", "spec.averaging.maxHandoffLagSteps: must be >= 0, got -1"},
      {"{checkpoint: {path: \"s3://\"}}", "spec.checkpoint.path: bucket must have 3 to 63 characters, got \"\" in \"s3://\""},
      {"{checkpoint: {path: \"s3:///runs\"}}",
       "spec.checkpoint.path: bucket must have 3 to 63 characters, got \"\" in \"s3:///runs\""},
      {"{checkpoint: {path: \"s3://ab\"}}", "spec.checkpoint.path: bucket must have 3 to 63 characters, got \"ab\""},
      {"{checkpoint: {path: \"s3://" + std::string(64, 'b') + "\"}}",
       "spec.checkpoint.path: bucket must have 3 to 63 characters, got \"" + std::string(64, 'b') + "\""},
      {"{checkpoint: {path: \"s3://my_bucket/runs\"}}",
       "spec.checkpoint.path: bucket may hold lowercase letters, digits, '.' and '-' only, got \"my_bucket\" in "
       "\"s3://my_bucket/runs\""},
      {"{checkpoint: {path: \"s3://MyBucket\"}}",
       "spec.checkpoint.path: bucket may hold lowercase letters, digits, '.' and '-' only, got \"MyBucket\""},
      {"{checkpoint: {path: \"s3://-ckpts\"}}",
       "spec.checkpoint.path: bucket must start and end with a letter or digit, got \"-ckpts\""},
      {"{checkpoint: {path: \"s3://ckpts/a/../b\"}}",
       "spec.checkpoint.path: prefix has an empty, \".\" or \"..\" segment in \"s3://ckpts/a/../b\""},
      {"{checkpoint: {path: \"s3://ckpts/..\"}}",
       "spec.checkpoint.path: prefix has an empty, \".\" or \"..\" segment in \"s3://ckpts/..\""},
      {"{checkpoint: {path: \"s3://ckpts/a/./b\"}}",
       "spec.checkpoint.path: prefix has an empty, \".\" or \"..\" segment in \"s3://ckpts/a/./b\""},
      {"{checkpoint: {path: \"s3://ckpts/a//b\"}}",
       "spec.checkpoint.path: prefix has an empty, \".\" or \"..\" segment in \"s3://ckpts/a//b\""},
      {"{checkpoint: {path: \"s3://ckpts/a\\tb\"}}", "spec.checkpoint.path: prefix holds a control character in \"s3://ckpts/a\tb\""},
      {"{checkpoint: {path: \"s3://ckpts/" + std::string(901, 'p') + "\"}}",
       "spec.checkpoint.path: prefix is longer than 900 bytes in \"s3://ckpts/ppp"},
      {"{training: {tokenizer: {kind: sentencepiece}}}",
       "spec.training.tokenizer.model: is required with spec.training.tokenizer.kind sentencepiece (the SentencePiece "
       ".model file), got \"\""},
      {"{training: {tokenizer: {kind: bytes, model: sp.model}}}",
       "spec.training.tokenizer.model: is only for kind sentencepiece (kind is bytes), got \"sp.model\""},
      {"{training: {tokenizer: {kind: huggingface}}}",
       "spec.training.tokenizer.file: is required with spec.training.tokenizer.kind huggingface (the tokenizer.json), "
       "got \"\""},
      {"{training: {tokenizer: {kind: huggingface, file: t.json, model: sp.model}}}",
       "spec.training.tokenizer.model: is only for kind sentencepiece (kind is huggingface), got \"sp.model\""},
      {"{training: {tokenizer: {kind: sentencepiece, model: sp.model, file: t.json}}}",
       "spec.training.tokenizer.file: is only for kind huggingface (kind is sentencepiece), got \"t.json\""},
      {"{training: {tokenizer: {file: t.json}}}",
       "spec.training.tokenizer.file: is only for kind huggingface (kind is bytes), got \"t.json\""},
      {"{training: {tokenizer: {kind: huggingface, file: t.json}, dataset: {format: jsonl}}}",
       "spec.training.dataset.format: must be tokens or auto with spec.training.tokenizer.kind huggingface (its text "
       "is pre-tokenised by scripts/hf_tokenize.py into token files), got \"jsonl\""},
      {"{training: {evalBatches: 1, dataset: {validationFraction: 0}}}",
       "spec.training.dataset.validationFraction: is 0 (nothing held out) while spec.training.evalBatches is 1: set "
       "evalBatches to 0 or hold out a fraction, got 0"},
      {"{training: {dataset: {validationFraction: 0.0}}}",
       "spec.training.dataset.validationFraction: is 0 (nothing held out) while spec.training.evalBatches is 8"},
  };
  for (const Refused& c : cases) {
    SCOPED_TRACE(c.spec);
    try {
      parse_job_spec(manifest(c.spec));
      ADD_FAILURE() << "accepted";
    } catch (const SpecError& e) {
      ASSERT_THAT(e.errors(), SizeIs(1));
      EXPECT_THAT(e.errors()[0], HasSubstr(c.expected));
    }
  }
}

TEST(JobSpecRules, ValuesJustInsideTheRulesAreAccepted) {
  const std::string bucket63(63, 'b');
  for (const std::string& spec : {
           std::string("{checkpoint: {path: \"s3://abc\"}}"),                 // the shortest bucket
           "{checkpoint: {path: \"s3://" + bucket63 + "/runs\"}}",            // the longest
           std::string("{checkpoint: {path: \"s3://a.b-c/runs\"}}"),          // '.' and '-' inside
           std::string("{checkpoint: {path: \"s3://abc/\"}}"),                // trailing slashes dropped
           std::string("{checkpoint: {path: \"s3://abc/a/b//\"}}"),
           std::string("{checkpoint: {path: \"s3://abc/.a/..b/.../x\"}}"),    // dots that are not . or ..
           "{checkpoint: {path: \"s3://abc/" + std::string(900, 'p') + "\"}}",  // 900 bytes of prefix
           std::string("{checkpoint: {path: /data/ckpt/../ckpt}}"),           // a folder is not a prefix
           std::string("{training: {tokenizer: {kind: sentencepiece, model: /data/sp.model}}}"),
           std::string("{training: {tokenizer: {kind: huggingface, file: /data/tokenizer.json}}}"),
           std::string("{training: {tokenizer: {kind: huggingface, file: t.json}, dataset: {format: tokens}}}"),
           std::string("{training: {evalBatches: 0, dataset: {validationFraction: 0}}}"),
           std::string("{training: {evalBatches: 1, dataset: {validationFraction: 0.001}}}"),
       }) {
    SCOPED_TRACE(spec);
    EXPECT_NO_THROW(parse_job_spec(manifest(spec)));
  }
}

}  // namespace
}  // namespace swarm
