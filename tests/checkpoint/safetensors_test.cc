// worker/checkpoint/safetensors.h: the round trip, and headers that must be refused before anything is
// allocated: shapes whose product or byte size wraps int64 or uint64, negative and non-integer
// dimensions, offsets past the data, backwards or overlapping. Each error names the tensor and the
// field. In memory (parse_safetensors), no files but the round trip's.
#include "worker/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace swarm::runtime {
namespace {

// A safetensors file: the 8-byte little-endian length, `header`, then `data_bytes` zero bytes.
std::string file_of(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

std::string tensor(const std::string& name, const std::string& shape, const std::string& offsets,
                   const std::string& dtype = "\"F32\"") {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

// The error parsing `header` over `data_bytes` bytes gives ("" when it parses).
std::string error_of(const std::string& header, size_t data_bytes = 16) {
  try {
    parse_safetensors(file_of(header, data_bytes), "m.safetensors");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, WrittenTensorsAndMetadataReadBack) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("safetensors-test-" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  TensorFile f;
  f.metadata["step"] = "7";
  f.tensors.emplace_back("b", torch::arange(6, torch::kFloat).reshape({2, 3}));
  f.tensors.emplace_back("a", torch::full({4}, 2.5));
  f.tensors.emplace_back("empty", torch::empty({0, 3}));
  write_safetensors(path, f);
  const TensorFile back = read_safetensors(path);
  std::filesystem::remove(path);
  EXPECT_EQ(back.metadata, f.metadata);
  ASSERT_EQ(back.tensors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.tensors[i].first, f.tensors[i].first) << "file order is the order written";
    EXPECT_EQ(back.tensors[i].second.sizes(), f.tensors[i].second.sizes());
    EXPECT_TRUE(torch::equal(back.tensors[i].second, f.tensors[i].second.to(torch::kFloat)));
  }
}

TEST(Safetensors, ShapesWhoseProductWrapsAreRefusedByName) {
  // 2^32 * 2^32 wraps uint64 to 0, which matched the [0,0] offsets before the check.
  EXPECT_EQ(error_of("{" + tensor("w", "[4294967296,4294967296]", "[0,0]") + "}"),
            "safetensors m.safetensors: w.shape: the product of its dimensions overflows int64, got "
            "[4294967296,4294967296]");
  // 2^32 * 2^31 = 2^63: fits uint64, not int64 (libtorch's sizes).
  EXPECT_EQ(error_of("{" + tensor("w", "[4294967296,2147483648]", "[0,0]") + "}"),
            "safetensors m.safetensors: w.shape: the product of its dimensions overflows int64, got "
            "[4294967296,2147483648]");
  // One dimension past int64.
  EXPECT_EQ(error_of("{" + tensor("w", "[18446744073709551615]", "[0,0]") + "}"),
            "safetensors m.safetensors: w.shape: the product of its dimensions overflows int64, got "
            "[18446744073709551615]");
  // A zero does not hide the others: the strides still span their product.
  EXPECT_EQ(error_of("{" + tensor("w", "[0,4611686018427387904,4]", "[0,0]") + "}"),
            "safetensors m.safetensors: w.shape: the product of its dimensions overflows int64, got "
            "[0,4611686018427387904,4]");
  // 2^62 elements fit int64; their 2^64 bytes do not fit uint64.
  EXPECT_EQ(error_of("{" + tensor("w", "[4611686018427387904]", "[0,0]") + "}"),
            "safetensors m.safetensors: w.shape: its size in bytes overflows 64 bits, got [4611686018427387904]");
  // 2^61 elements: 2^63 bytes, which the offsets do not hold; nothing is allocated.
  EXPECT_EQ(error_of("{" + tensor("w", "[2305843009213693952]", "[0,0]") + "}"),
            "safetensors m.safetensors: w.data_offsets: 0 bytes for shape [2305843009213693952] of F32 "
            "(9223372036854775808 bytes)");
}

TEST(Safetensors, AZeroSizedTensorWithLargeDimensionsIsRead) {
  const TensorFile f = parse_safetensors(file_of("{" + tensor("z", "[0,2147483648,2147483648]", "[0,0]") + "}", 0), "z");
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].second.numel(), 0);
  EXPECT_EQ(f.tensors[0].second.size(2), 2147483648);
}

TEST(Safetensors, DimensionsMustBeNonNegativeIntegersInAnArray) {
  const std::string p = "safetensors m.safetensors: ";
  EXPECT_EQ(error_of("{" + tensor("w", "[-1,4]", "[0,16]") + "}"), p + "w.shape[0]: must not be negative, got -1");
  EXPECT_EQ(error_of("{" + tensor("w", "[4,-9223372036854775808]", "[0,16]") + "}"),
            p + "w.shape[1]: must not be negative, got -9223372036854775808");
  EXPECT_EQ(error_of("{" + tensor("w", "[2.5]", "[0,16]") + "}"), p + "w.shape[0]: must be a non-negative integer, got 2.5");
  EXPECT_EQ(error_of("{" + tensor("w", "[\"4\"]", "[0,16]") + "}"), p + "w.shape[0]: must be a non-negative integer, got \"4\"");
  EXPECT_EQ(error_of("{" + tensor("w", "4", "[0,16]") + "}"), p + "w.shape: must be an array of dimensions, got 4");
  EXPECT_EQ(error_of("{" + tensor("w", "{\"a\":4}", "[0,16]") + "}"), p + "w.shape: must be an array of dimensions, got an object of 1 keys");
  std::string ones = "[1";
  for (int i = 0; i < 64; ++i) ones += ",1";
  EXPECT_EQ(error_of("{" + tensor("w", ones + "]", "[0,4]") + "}"), p + "w.shape: at most 64 dimensions, got 65");
  // Nested a hundred thousand deep: refused without walking it.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(error_of("{" + tensor("w", deep, "[0,4]") + "}"), p + "w.shape[0]: must be a non-negative integer, got an array of 1 elements");
}

TEST(Safetensors, DtypesOfTheFormatAreCheckedAndOnlyFloatsRead) {
  const std::string p = "safetensors m.safetensors: ";
  EXPECT_EQ(error_of("{" + tensor("w", "[4]", "[0,16]", "\"F17\"") + "}"), p + "w.dtype: not a safetensors dtype, got \"F17\"");
  EXPECT_EQ(error_of("{" + tensor("w", "[4]", "[0,16]", "[1]") + "}"), p + "w.dtype: not a safetensors dtype, got [1]");
  // The byte count is checked against the dtype's size.
  EXPECT_EQ(error_of("{" + tensor("w", "[4]", "[0,16]", "\"F16\"") + "}"),
            p + "w.data_offsets: 16 bytes for shape [4] of F16 (8 bytes)");
  // A dtype of the format that is not read: its header parses (a checkpoint may hold such a
  // tensor that no stage needs), reading it is refused by name before anything is allocated.
  const std::string i64 = "{" + tensor("steps", "[2]", "[0,16]", "\"I64\"") + "}";
  const SafetensorsHeader h = parse_safetensors_header(file_of(i64, 16), 8 + i64.size() + 16, "m.safetensors");
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].dtype, "I64");
  EXPECT_EQ(error_of(i64), p + "steps.dtype: only F32, BF16 and F16 are read, got \"I64\"");
}

TEST(Safetensors, Bf16AndF16AreReadAsFloat32) {
  // bf16 1.5 = 0x3fc0, -2 = 0xc000; f16 0.5 = 0x3800, 65504 = 0x7bff (the largest f16).
  const std::string header = "{" + tensor("b", "[2]", "[0,4]", "\"BF16\"") + "," + tensor("h", "[2]", "[4,8]", "\"F16\"") + "}";
  std::string bytes = file_of(header, 0) + std::string("\xc0\x3f\x00\xc0\x00\x38\xff\x7b", 8);
  const TensorFile f = parse_safetensors(bytes, "m");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].second.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(f.tensors[0].second, torch::tensor({1.5f, -2.0f})));
  EXPECT_TRUE(torch::equal(f.tensors[1].second, torch::tensor({0.5f, 65504.0f})));
}

// A file on disk with an F32, a BF16 and an F16 tensor and a 1 MB one, read tensor by tensor.
class SafetensorsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() / ("safetensors-reader-" + std::to_string(::getpid()))).string();
    const std::string header = "{\"__metadata__\":{\"format\":\"pt\"}," + tensor("f", "[2]", "[0,8]") + "," +
                               tensor("b", "[2]", "[8,12]", "\"BF16\"") + "," + tensor("h", "[1]", "[12,14]", "\"F16\"") +
                               "," + tensor("big", "[262144]", "[16,1048592]") + "}";
    const float f[2] = {3.25f, -1.0f};
    std::string data(reinterpret_cast<const char*>(f), 8);
    data += std::string("\xc0\x3f\x00\xc0\x00\x38\0\0", 8) + std::string(1 << 20, '\0');
    std::ofstream(path_, std::ios::binary) << file_of(header, 0) << data;
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(SafetensorsFile, TheReaderReadsOneTensorAtItsOffset) {
  const SafetensorsReader r(path_);
  EXPECT_EQ(r.header().metadata.at("format"), "pt");
  ASSERT_EQ(r.header().tensors.size(), 4u);
  ASSERT_NE(r.header().find("b"), nullptr);
  EXPECT_EQ(r.header().find("missing"), nullptr);
  EXPECT_TRUE(torch::equal(r.read(*r.header().find("b")), torch::tensor({1.5f, -2.0f})));
  EXPECT_TRUE(torch::equal(r.read(*r.header().find("f")), torch::tensor({3.25f, -1.0f})));
  EXPECT_TRUE(torch::equal(r.read(*r.header().find("h")), torch::tensor({0.5f})));
  EXPECT_EQ(read_safetensors(path_).tensors.size(), 4u);
}

TEST_F(SafetensorsFile, AFileCutAfterItWasOpenedIsRefusedNamingIt) {
  const SafetensorsReader r(path_);
  std::filesystem::resize_file(path_, 4096);
  EXPECT_TRUE(torch::equal(r.read(*r.header().find("f")), torch::tensor({3.25f, -1.0f})));
  try {
    r.read(*r.header().find("big"));
    ADD_FAILURE() << "a tensor past the end of the file was read";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("safetensors " + path_ + ": the file ends before byte"), std::string::npos) << e.what();
  }
  // Opened again, the header no longer fits the file.
  try {
    SafetensorsReader again(path_);
    ADD_FAILURE() << "a cut file was opened";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("big.data_offsets: [16,1048592] outside the"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SafetensorsReader(path_ + ".missing"), std::runtime_error);
}

TEST(Safetensors, OffsetsMustLieInTheDataInOrderWithoutOverlap) {
  const std::string p = "safetensors m.safetensors: ";
  EXPECT_EQ(error_of("{" + tensor("w", "[250]", "[0,1000]") + "}", 16), p + "w.data_offsets: [0,1000] outside the 16 data bytes");
  EXPECT_EQ(error_of("{" + tensor("w", "[0]", "[18446744073709551615,18446744073709551615]") + "}", 16),
            p + "w.data_offsets: [18446744073709551615,18446744073709551615] outside the 16 data bytes");
  EXPECT_EQ(error_of("{" + tensor("w", "[1]", "[8,4]") + "}"), p + "w.data_offsets: begins after it ends, got [8,4]");
  EXPECT_EQ(error_of("{" + tensor("w", "[1]", "[0,-4]") + "}"), p + "w.data_offsets: must be two unsigned integers, got [0,-4]");
  EXPECT_EQ(error_of("{" + tensor("w", "[1]", "[0]") + "}"), p + "w.data_offsets: must be two unsigned integers, got [0]");
  EXPECT_EQ(error_of("{" + tensor("a", "[4]", "[0,16]") + "," + tensor("b", "[4]", "[8,24]") + "}", 24),
            p + "b.data_offsets: [8,24] overlaps a's [0,16]");
  // An empty tensor inside another's bytes shares them too.
  EXPECT_EQ(error_of("{" + tensor("a", "[4]", "[0,16]") + "," + tensor("e", "[0]", "[8,8]") + "}", 16),
            p + "e.data_offsets: [8,8] overlaps a's [0,16]");
  // Touching is fine, and tensors come back in the order of their offsets.
  const TensorFile f = parse_safetensors(
      file_of("{" + tensor("z", "[2]", "[8,16]") + "," + tensor("a", "[2]", "[0,8]") + "}", 16), "m");
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "a");
  EXPECT_EQ(f.tensors[1].first, "z");
}

TEST(Safetensors, MalformedHeadersAreRefused) {
  const std::string p = "safetensors m.safetensors: ";
  EXPECT_EQ(error_of("[1,2]"), p + "header: not a JSON object");
  EXPECT_EQ(error_of("{\"w\":5}"), p + "w: needs dtype, shape and data_offsets, got 5");
  EXPECT_EQ(error_of("{\"__metadata__\":{\"k\":1}}"), p + "__metadata__.k: not a string, got 1");
  const std::string long_name(1000, 'n');
  EXPECT_EQ(error_of("{" + tensor(long_name, "[-1]", "[0,0]") + "}"),
            p + std::string(80, 'n') + "....shape[0]: must not be negative, got -1");
  try {
    parse_safetensors(std::string("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10), "m.safetensors");
    ADD_FAILURE() << "a header length past the file was read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), p + "header length: 18446744073709551615 does not fit the file's 10 bytes");
  }
}

}  // namespace
}  // namespace swarm::runtime
