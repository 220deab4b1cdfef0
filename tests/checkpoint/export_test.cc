// swarm export | eval | generate on a real run's checkpoints (issue 16, parts 4 and 5).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "tests/local/swarm_process.h"
#include "worker/data/text_dataset.h"
#include "worker/model/optimizer.h"
#include "worker/model/state.h"
#include "worker/checkpoint/checkpoint.h"
#include "worker/checkpoint/export.h"
#include "worker/runtime/job_model.h"
#include "worker/checkpoint/safetensors.h"

namespace swarm::e2e {
namespace {

std::string output_of(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

class Export : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(fresh_dir("export"));
    const std::string body = R"(
  model: {hiddenSize: 32, numHeads: 2, layersPerStage: 2, sequenceLength: 32}
  pipeline: {stages: 3}
  training: {globalBatch: 16, microbatch: 4, maxSteps: 6, evalBatches: 2, schedule: {warmupSteps: 1}}
  checkpoint: {path: CKPT, everySteps: 2, keep: 3}
)";
    std::string b = body;
    b.replace(b.find("CKPT"), 4, *dir_ + "/ckpt");
    job_ = new std::string(write_job(*dir_, b));
    run_rc_ = run({"local", *job_, "--log-dir", *dir_ + "/logs", "--summary", *dir_ + "/summary.json", "--no-progress"},
                  *dir_ + "/run.log", 300);
  }
  static std::string swarm() { return std::string(SWARM_BINARY_DIR) + "/bin/swarm"; }
  static std::string* dir_;
  static std::string* job_;
  static int run_rc_;
};
std::string* Export::dir_ = nullptr;
std::string* Export::job_ = nullptr;
int Export::run_rc_ = -1;

// The newest step every stage checkpointed, gathered into one file: the loss of the exported
// weights, in this program and in plain PyTorch (Debian's, with safetensors from PyPI), equals
// the loss of the stage checkpoints chained, on a fixed batch.
TEST_F(Export, TheExportedModelReproducesTheSwarmsLossInPlainPyTorch) {
  ASSERT_EQ(run_rc_, 0) << read_text(*dir_ + "/run.log");
  const std::string model = *dir_ + "/out/model.safetensors";
  ASSERT_EQ(run({"export", "--job", *job_, "--out", model, "--secret-file", *dir_ + "/logs/job-secret"},
                *dir_ + "/export.log", 120),
            0)
      << read_text(*dir_ + "/export.log");
  // The stages' newest checkpoints: the run's last step (6), or the one after it when the stages
  // took one more on their way out (the drain writes a checkpoint).
  const int64_t newest = runtime::list_checkpoints(*dir_ + "/ckpt", 0).front().step;
  EXPECT_GE(newest, 6);
  EXPECT_NE(read_text(*dir_ + "/export.log").find("exported step " + std::to_string(newest) + ":"), std::string::npos)
      << read_text(*dir_ + "/export.log");
  const auto cfg = nlohmann::json::parse(read_text(*dir_ + "/out/config.json"));
  EXPECT_EQ(cfg["num_layers"], 6);
  EXPECT_EQ(cfg["step"], newest);

  // The swarm's own loss: each stage's checkpoint of step 6 loaded into its stage model.
  const JobSpec spec = load_job_spec(*job_);
  const auto config = runtime::model_config(spec);
  const std::string key = runtime::checkpoint_key(read_text(*dir_ + "/logs/job-secret").substr(0, 64));
  std::vector<std::shared_ptr<model::StageModel>> stages;
  for (int s = 0; s < 3; ++s) {
    auto m = model::make_stage(config, s, 0);
    model::StageOptimizer opt(*m, runtime::optimizer_config(spec));
    auto files = runtime::list_checkpoints(*dir_ + "/ckpt", s);
    ASSERT_FALSE(files.empty());
    ASSERT_EQ(files.front().step, newest) << "stage " << s;
    model::load_state(runtime::open_checkpoint(files.front(), s, key), *m, opt);
    stages.push_back(m);
  }
  const auto ds = data::TextDataset::load("/usr/share/games/fortunes");
  data::BatchSampler sampler(ds, 32, 5);
  std::vector<int64_t> in, tg;
  sampler.validation_batch(4, 0, in, tg);
  const auto ids = torch::from_blob(in.data(), {4, 32}, torch::kInt64);
  const auto targets = torch::from_blob(tg.data(), {4, 32}, torch::kInt64);
  double swarm_loss;
  {
    torch::NoGradGuard no_grad;
    at::Tensor x = ids;
    for (auto& s : stages) x = s->forward(x);
    swarm_loss = stages.back()->loss(x, targets).item<double>();
  }
  const auto exported = runtime::load_exported(model);
  EXPECT_EQ(exported.step, newest);
  EXPECT_NEAR(exported.loss(ids, targets), swarm_loss, 1e-6);

  nlohmann::json batch{{"inputs", nlohmann::json::array()}, {"targets", nlohmann::json::array()}};
  for (int r = 0; r < 4; ++r) {
    batch["inputs"].push_back(std::vector<int64_t>(in.begin() + r * 32, in.begin() + (r + 1) * 32));
    batch["targets"].push_back(std::vector<int64_t>(tg.begin() + r * 32, tg.begin() + (r + 1) * 32));
  }
  std::ofstream(*dir_ + "/batch.json") << batch.dump();
  const std::string python = std::string(std::getenv("HOME")) + "/.cache/swarm-operator/tools/export-venv/bin/python";
  const std::string out = output_of(python + " " + SWARM_SOURCE_DIR + "/tests/checkpoint/reference_forward.py " + model +
                                    " " + *dir_ + "/batch.json 2>&1");
  char* end = nullptr;
  const double torch_loss = std::strtod(out.c_str(), &end);
  ASSERT_NE(end, out.c_str()) << "PyTorch said: " << out;
  EXPECT_NEAR(torch_loss, swarm_loss, 1e-4) << "PyTorch " << torch_loss << ", swarm " << swarm_loss;
  EXPECT_LT(swarm_loss, std::log(256.0)) << "six steps should beat the uniform guess";
  std::printf("loss on the fixed batch: swarm %.8f, exported %.8f, PyTorch %.8f\n", swarm_loss,
              exported.loss(ids, targets), torch_loss);
  // The run exported by itself at its end, to the checkpoint location, and said so in its summary.
  const auto summary = read_json(*dir_ + "/summary.json");
  EXPECT_EQ(summary.value("exported_model", ""), *dir_ + "/ckpt/export/model.safetensors") << summary.dump();
  EXPECT_EQ(runtime::load_exported(*dir_ + "/ckpt/export/model.safetensors").step, newest);
}

TEST_F(Export, EvalAndGeneratePrintLossAndAReproducibleContinuation) {
  ASSERT_EQ(run_rc_, 0) << read_text(*dir_ + "/run.log");
  const std::string model = *dir_ + "/gen/model.safetensors";
  ASSERT_EQ(run({"export", "--job", *job_, "--out", model, "--secret-file", *dir_ + "/logs/job-secret"},
                *dir_ + "/export2.log", 120),
            0);
  const std::string eval = output_of(swarm() + " eval --model " + model + " --data /usr/share/games/fortunes/computers 2>&1");
  EXPECT_NE(eval.find(": loss "), std::string::npos) << eval;
  EXPECT_NE(eval.find("perplexity "), std::string::npos) << eval;
  ASSERT_NE(eval.find("loss "), std::string::npos) << eval;
  const double loss = std::atof(eval.substr(eval.find("loss ") + 5).c_str());
  const double ppl = std::atof(eval.substr(eval.find("perplexity ") + 11).c_str());
  EXPECT_NEAR(ppl, std::exp(loss), 0.01 * ppl) << eval;
  const std::string gen = swarm() + " generate --model " + model + " --prompt 'Hello, ' --max-tokens 40 --seed 7";
  const std::string a = output_of(gen + " 2>&1"), b = output_of(gen + " 2>&1");
  EXPECT_EQ(a, b) << "the same seed gives the same text";
  EXPECT_EQ(a.rfind("Hello, ", 0), 0u) << a;
  EXPECT_GT(a.size(), 7u + 20u) << a;
  const std::string greedy = output_of(gen + " --temperature 0 --top-k 5 2>&1");
  EXPECT_EQ(greedy.rfind("Hello, ", 0), 0u) << greedy;
  // The "before": the job's initial parameters, as good as a uniform guess over 256 bytes.
  const std::string initial = *dir_ + "/initial/model.safetensors";
  ASSERT_EQ(run({"export", "--job", *job_, "--initial", "--out", initial}, *dir_ + "/initial.log", 60), 0)
      << read_text(*dir_ + "/initial.log");
  const auto before = runtime::load_exported(initial);
  EXPECT_EQ(before.step, 0);
  const std::string e0 = output_of(swarm() + " eval --model " + initial + " --data /usr/share/games/fortunes/computers 2>&1");
  const double loss0 = std::atof(e0.substr(e0.find("loss ") + 5).c_str());
  EXPECT_NEAR(loss0, std::log(256.0), 0.2) << e0;
  EXPECT_LT(loss, loss0) << "trained " << eval << "initial " << e0;
}

TEST_F(Export, BadInputIsRefusedByName) {
  const std::string empty = *dir_ + "/empty-ckpt";
  std::filesystem::create_directories(empty);
  EXPECT_NE(run({"export", "--job", *job_, "--from", empty, "--out", *dir_ + "/x.safetensors", "--secret-file",
                 *dir_ + "/logs/job-secret"},
                *dir_ + "/bad-export.log", 60),
            0);
  EXPECT_NE(read_text(*dir_ + "/bad-export.log").find(empty + " has no checkpoint of stage 0"), std::string::npos)
      << read_text(*dir_ + "/bad-export.log");
  std::ofstream(*dir_ + "/cut.safetensors") << std::string("\x10\0\0\0\0\0\0\0{\"a\":", 14);
  try {
    runtime::read_safetensors(*dir_ + "/cut.safetensors");
    ADD_FAILURE() << "a cut file was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(*dir_ + "/cut.safetensors: header length: 16"), std::string::npos) << e.what();
  }
  runtime::TensorFile f;
  f.tensors.emplace_back("w", torch::ones({2, 3}));
  runtime::write_safetensors(*dir_ + "/w.safetensors", f);
  std::string bytes = read_text(*dir_ + "/w.safetensors");
  const size_t at = bytes.find("[2,3]");
  ASSERT_NE(at, std::string::npos) << bytes;
  bytes.replace(at, 5, "[3,3]");
  std::ofstream(*dir_ + "/w.safetensors", std::ios::binary | std::ios::trunc) << bytes;
  try {
    runtime::read_safetensors(*dir_ + "/w.safetensors");
    ADD_FAILURE() << "a shape that does not fit its bytes was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("w.data_offsets: 24 bytes for shape [3,3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(runtime::load_exported(*dir_ + "/missing.safetensors"), std::runtime_error);
}

}  // namespace
}  // namespace swarm::e2e
