// make_seeds OUT_DIR: writes the generated seed corpora of the fuzz targets (tests/fuzz/corpus/
// holds its output): OUT_DIR/frame (valid frames made with encode_frame, signed with kSecret),
// OUT_DIR/state and OUT_DIR/checkpoint (save_state blobs of the tiny stage, in the input layouts of
// state_fixture.h and checkpoint_fuzz.cc), OUT_DIR/job_json (to_json of valid specs) and
// OUT_DIR/safetensors (files write_safetensors wrote). Rerun it
// when a format changes: `build-fuzz/fuzz/make_seeds tests/fuzz/corpus`.
#include <cstdint>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/job_spec_json.h"
#include "tests/fuzz/state_fixture.h"
#include "worker/net/blockwise8.h"
#include "worker/net/frame.h"
#include "worker/net/message.h"
#include "worker/checkpoint/safetensors.h"

#include <torch/torch.h>

namespace fs = std::filesystem;
using namespace swarm;

namespace {

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<net::Message> frames() {
  std::vector<net::Message> out;
  net::Message m;
  m.type = 2;
  m.request_id = 7;
  out.push_back(m);  // no meta, no tensor
  m.meta = R"({"stage":1,"step":3,"microbatch":"t0-5"})";
  out.push_back(m);
  auto f32 = net::WireTensor::allocate(net::DType::Float32, {2, 3});
  for (size_t i = 0; i < f32.nbytes; ++i) static_cast<uint8_t*>(f32.data)[i] = static_cast<uint8_t>(i);
  m.tensors.push_back(std::move(f32));
  out.push_back(m);
  m.tensors.push_back(net::WireTensor::allocate(net::DType::Int64, {4}));
  m.tensors.push_back(net::WireTensor::allocate(net::DType::Float16, {0, 5}));  // empty
  m.tensors.push_back(net::WireTensor::allocate(net::DType::UInt8, {}));      // a scalar
  out.push_back(m);
  const std::vector<float> values(40, 0.5f);
  m.tensors.push_back(net::blockwise8_tensor(values.data(), {2, 20}, 16, "seed"));  // 3 scales, 40 codes
  out.push_back(m);
  out.push_back(net::make_error(9, "stage 1: step 3 closed", net::ErrorCode::StepClosed));
  return out;
}

// A u16 block size and a blockwise8 tensor's bytes (blockwise8_fuzz.cc): a few blocks, a last
// block cut short, a block of zeros.
void write_blockwise8_seeds(const fs::path& out) {
  for (uint32_t block : {16u, 100u, 4096u}) {
    std::vector<float> x(block * 2 + block / 3, 0.0f);
    for (size_t i = 0; i < block; ++i) x[i] = std::sin(static_cast<float>(i)) * 3.0f;
    for (size_t i = 2 * block; i < x.size(); ++i) x[i] = -0.25f * static_cast<float>(i % 7);
    auto t = net::blockwise8_tensor(x.data(), {static_cast<int64_t>(x.size())}, block, "seed");
    std::string bytes{static_cast<char>(block & 0xff), static_cast<char>(block >> 8)};
    bytes.append(reinterpret_cast<const char*>(t.data), t.nbytes);
    write(out / "blockwise8" / ("block-" + std::to_string(block) + ".bin"), bytes);
  }
}

void write_state_seeds(const fs::path& out) {
  for (auto kind : {model::OptimizerConfig::AdamW, model::OptimizerConfig::Lamb}) {
    auto stage = model::make_stage(fuzz::tiny_state_config(), fuzz::kStateStage, 1);
    model::OptimizerConfig oc;
    oc.kind = kind;
    model::StageOptimizer opt(*stage, oc);
    const std::string blob = model::save_state(*stage, opt);
    // Flag 1: the blob without its checksum (the target appends it); flag 0: the whole blob.
    const std::string unsealed = std::string(1, '\1') + blob.substr(0, blob.size() - 8);
    const std::string whole = std::string(1, '\0') + blob;
    const std::string name = model::kind_name(kind);
    write(out / "state" / (name + "-sealed-by-target.bin"), unsealed);
    write(out / "state" / (name + "-whole.bin"), whole);
    if (kind != model::OptimizerConfig::AdamW) continue;
    write(out / "checkpoint" / "step-3.bin", "step-000000003.ckpt\n" + unsealed);
    // Flag bit 2: the target adds the authentication trailer (checkpoint_fuzz.cc).
    write(out / "checkpoint" / "step-3-authenticated.bin", "step-000000003.ckpt\n" + std::string(1, '\3') + unsealed.substr(1));
    write(out / "checkpoint" / "unfinished.bin", "step-000000004.ckpt.tmp.12\n" + whole);
  }
}

void write_job_json_seeds(const fs::path& out) {
  JobSpec spec;  // the tiny-lm job
  write(out / "job_json" / "tiny-lm.json", to_json(spec).dump(1));
  spec.name = "ckpt-job";
  spec.pipeline.compression = Compression::Blockwise8;
  spec.training.optimizer.name = OptimizerKind::Lamb;
  spec.secret.secret_ref_name = "job-secret";
  spec.secret.secret_ref_key = "token";
  spec.checkpoint.path = "/checkpoints";
  write(out / "job_json" / "checkpoints.json", to_json(spec).dump());
}

// Files as write_safetensors writes them (safetensors_fuzz.cc): one tensor; several with metadata,
// an empty one and a scalar; and a Hugging Face checkpoint's dtypes by hand: BF16, F16 and an I64
// tensor (its header parses, reading it is refused).
void write_safetensors_seeds(const fs::path& out) {
  fs::create_directories(out / "safetensors");
  runtime::TensorFile one;
  one.tensors.emplace_back("w", torch::arange(6, torch::kFloat).reshape({2, 3}));
  runtime::write_safetensors((out / "safetensors" / "one.safetensors").string(), one);
  runtime::TensorFile many;
  many.metadata["format"] = "pt";
  many.metadata["step"] = "12";
  many.tensors.emplace_back("embed.weight", torch::full({4, 2}, 0.5));
  many.tensors.emplace_back("empty", torch::empty({0, 3}));
  many.tensors.emplace_back("scale", torch::full({}, 2.0));
  runtime::write_safetensors((out / "safetensors" / "many.safetensors").string(), many);
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F16","shape":[3],"data_offsets":[8,14]},"c":{"dtype":"I64","shape":[1],"data_offsets":[16,24]}})";
  std::string hf(8, '\0');
  for (int i = 0; i < 8; ++i) hf[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  // bf16 1.0 = 0x3f80, f16 1.0 = 0x3c00, little-endian; two bytes of padding before the I64.
  hf += header + std::string("\x80\x3f\x80\x3f\x80\x3f\x80\x3f\x00\x3c\x00\x3c\x00\x3c\0\0", 16) + std::string(8, '\1');
  write(out / "safetensors" / "hf-dtypes.safetensors", hf);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_seeds OUT_DIR\n";
    return 2;
  }
  const fs::path out = argv[1];
  std::vector<net::Message> msgs = frames();
  for (size_t i = 0; i < msgs.size(); ++i) {
    for (auto p : {net::Protection::Authenticated, net::Protection::Encrypted}) {
      net::Session session = fuzz::frame_session(true, p);
      const char flag = p == net::Protection::Encrypted ? '\1' : '\0';
      write(out / "frame" / ("frame-" + std::to_string(i) + "-" + net::protection_name(p) + ".bin"),
            std::string(1, flag) + net::encode_frame(msgs[i], *session.tx));
    }
  }
  write_state_seeds(out);
  write_job_json_seeds(out);
  write_blockwise8_seeds(out);
  write_safetensors_seeds(out);
  std::cout << "seeds written under " << out.string() << "\n";
  return 0;
}
