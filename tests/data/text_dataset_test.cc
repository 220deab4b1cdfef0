#include "worker/data/text_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace swarm::data {
namespace {

namespace fs = std::filesystem;

const char* kFortunes = "/usr/share/games/fortunes";

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("swarm_data_" + std::string(info->name()) + tag + "_" +
                                         std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& rel, const std::string& content) const {
    const fs::path p = path_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  fs::path path_;
};

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const DatasetError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DatasetError thrown";
  return "";
}

TEST(TextDataset, LoadsFortunesWithoutIndexFiles) {
  if (!fs::is_directory(kFortunes)) GTEST_SKIP() << kFortunes << " not installed";
  const TextDataset ds = TextDataset::load(kFortunes);
  EXPECT_GT(ds.train_bytes() + ds.validation_bytes(), 1000000u);
  EXPECT_GT(ds.validation_bytes(), 0u);
  EXPECT_NEAR(double(ds.validation_bytes()) / double(ds.train_bytes() + ds.validation_bytes()),
              0.02, 0.001);
  size_t expected_files = 0;
  for (const auto& e : fs::directory_iterator(kFortunes)) {
    if (!e.is_symlink() && e.is_regular_file() && e.path().extension() != ".dat") {
      ++expected_files;
    }
  }
  const auto files = ds.files();
  EXPECT_EQ(files.size(), expected_files);
  for (const auto& f : files) {
    EXPECT_NE(fs::path(f).extension(), ".dat") << f;
    EXPECT_NE(fs::path(f).extension(), ".u8") << f;  // symlinks to files already read
  }
  EXPECT_EQ(ds.train().find('\0'), std::string_view::npos);
  BatchSampler sampler(ds, 128, 1);
  std::vector<int64_t> in, tg;
  sampler.next(8, in, tg);
  EXPECT_EQ(in.size(), 8u * 128);
  EXPECT_GT(sampler.validation_windows(), 100);
}

TEST(TextDataset, SkipsBinaryHiddenDuplicateAndIndexFiles) {
  TempDir dir;
  TempDir outside("_outside");
  const std::string a = repeat("alpha text line\n", 50);
  dir.write("a.txt", a);
  dir.write("sub/c.txt", repeat("gamma\n", 40));
  dir.write("b.bin", std::string("BIN\0\1\2", 6) + repeat("x", 100));
  dir.write(".hidden.txt", repeat("hidden\n", 30));
  dir.write(".git/config", repeat("hidden dir\n", 30));
  dir.write("foo", repeat("%\nfortune\n", 20));
  dir.write("foo.dat", "looks like text but is foo's index");
  dir.write("empty.txt", "");
  const fs::path ext = outside.write("ext.txt", repeat("outside\n", 10));
  fs::create_symlink(dir.path() / "a.txt", dir.path() / "link.txt");
  fs::create_symlink(dir.path() / "a.txt", dir.path() / "sub" / "a.u8");
  fs::create_symlink(ext, dir.path() / "ext-link.txt");
  fs::create_symlink(dir.path() / "missing", dir.path() / "broken.txt");

  const TextDataset ds = TextDataset::load(dir.path().string(), 0.0);
  const std::vector<std::string> expected = {
      (dir.path() / "a.txt").string(), (dir.path() / "ext-link.txt").string(),
      (dir.path() / "foo").string(), (dir.path() / "sub" / "c.txt").string()};
  EXPECT_EQ(ds.files(), expected);
  EXPECT_EQ(ds.train_bytes(), a.size() + 40 * 6 + 10 * 8 + 20 * 10);
  EXPECT_EQ(ds.validation_bytes(), 0u);
  EXPECT_EQ(std::string(ds.train().substr(0, a.size())), a);

  // A symlink given as the path itself is read; a binary file given directly is an error.
  EXPECT_EQ(TextDataset::load((dir.path() / "link.txt").string()).files().size(), 1u);
  const std::string bin = (dir.path() / "b.bin").string();
  EXPECT_NE(error_of([&] { TextDataset::load(bin); }).find(bin), std::string::npos);
}

TEST(TextDataset, ValidationIsTheTailOfEachFile) {
  TempDir dir;
  std::string one, two;
  for (int i = 0; i < 1000; ++i) one += char('a' + i % 26);
  for (int i = 0; i < 500; ++i) two += char('A' + i % 26);
  dir.write("1.txt", one);
  dir.write("2.txt", two);
  const TextDataset ds = TextDataset::load(dir.path().string(), 0.1);
  EXPECT_EQ(ds.validation_bytes(), 150u);
  EXPECT_EQ(ds.train_bytes(), 1350u);
  EXPECT_EQ(std::string(ds.validation()), one.substr(900) + two.substr(450));
  EXPECT_EQ(std::string(ds.train()), one.substr(0, 900) + two.substr(0, 450));
}

TEST(BatchSampler, TargetsAreInputsShiftedByOne) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i) text += char(32 + (i * 7919) % 95);
  dir.write("t.txt", text + "\xc3\xa9\xff");  // high bytes come out as 0..255
  const TextDataset ds = TextDataset::load(dir.path().string(), 0.02);
  const int64_t T = 16;
  BatchSampler s(ds, T, 42);
  std::vector<int64_t> in, tg;
  const std::string train(ds.train());
  for (int step = 0; step < 20; ++step) {
    s.next(4, in, tg);
    ASSERT_EQ(in.size(), size_t(4 * T));
    ASSERT_EQ(tg.size(), size_t(4 * T));
    for (int64_t r = 0; r < 4; ++r) {
      std::string window;
      for (int64_t j = 0; j < T; ++j) {
        ASSERT_GE(in[r * T + j], 0);
        ASSERT_LT(in[r * T + j], 256);
        window += char(in[r * T + j]);
        if (j + 1 < T) EXPECT_EQ(tg[r * T + j], in[r * T + j + 1]);
      }
      window += char(tg[r * T + T - 1]);
      EXPECT_NE(train.find(window), std::string::npos);
    }
  }
  // Validation windows: fixed, stride T from the start of the split, wrapping around.
  ASSERT_GT(s.validation_windows(), 2);
  s.validation_batch(2, 0, in, tg);
  const std::string val(ds.validation());
  for (int64_t j = 0; j < T; ++j) {
    EXPECT_EQ(in[j], (unsigned char)val[j]);
    EXPECT_EQ(tg[j], (unsigned char)val[j + 1]);
    EXPECT_EQ(in[T + j], (unsigned char)val[T + j]);
  }
  std::vector<int64_t> in2, tg2;
  s.validation_batch(2, s.validation_windows(), in2, tg2);  // windows 2W.. == 0.. (mod W)
  s.validation_batch(2, 0, in, tg);
  EXPECT_EQ(in, in2);
  EXPECT_EQ(tg, tg2);
}

TEST(BatchSampler, DeterministicPerSeedAndStream) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 100000; ++i) text += char('a' + (i * 31 + i / 7) % 26);
  dir.write("t.txt", text);
  const TextDataset ds = TextDataset::load(dir.path().string());
  auto draw = [&](uint64_t seed, int stream) {
    BatchSampler s(ds, 32, seed, stream);
    std::vector<int64_t> all, in, tg;
    for (int i = 0; i < 5; ++i) {
      s.next(8, in, tg);
      all.insert(all.end(), in.begin(), in.end());
    }
    return all;
  };
  EXPECT_EQ(draw(1, 0), draw(1, 0));
  EXPECT_EQ(draw(1, 3), draw(1, 3));
  EXPECT_NE(draw(1, 0), draw(1, 1));
  EXPECT_NE(draw(1, 0), draw(2, 0));
  EXPECT_NE(draw(uint64_t{1} << 40, 0), draw(0, 0));  // the high half of the seed counts

  // Same across processes and platforms: std::seed_seq + mt19937_64 + our own bounded draw.
  TempDir digits("_digits");
  std::string d;
  for (int i = 0; i < 1000; ++i) d += std::to_string(i) + " ";  // windows ~ positions
  digits.write("d.txt", d);
  BatchSampler g(TextDataset::load(digits.path().string(), 0.0), 6, 7, 1);
  std::vector<int64_t> in, tg;
  g.next(2, in, tg);
  std::string got;
  for (auto v : in) got += char(v);
  EXPECT_EQ(got, " 101 1 851 8");
}

TEST(TextDataset, ErrorsNameThePath) {
  TempDir dir;
  const std::string missing = (dir.path() / "nope").string();
  const std::string e1 = error_of([&] { TextDataset::load(missing); });
  EXPECT_NE(e1.find(missing), std::string::npos) << e1;

  dir.write("only.bin", std::string("\0\0\0", 3));
  dir.write(".hidden", "text");
  const std::string root = dir.path().string();
  const std::string e2 = error_of([&] { TextDataset::load(root); });
  EXPECT_NE(e2.find(root), std::string::npos) << e2;
  EXPECT_NE(e2.find("no text files"), std::string::npos) << e2;

  TempDir small("_small");
  small.write("tiny.txt", "just a few bytes");
  const std::string sroot = small.path().string();
  const TextDataset ds = TextDataset::load(sroot);
  const std::string e3 = error_of([&] { BatchSampler(ds, 128, 1); });
  EXPECT_NE(e3.find(sroot), std::string::npos) << e3;
  EXPECT_NE(e3.find("sequence"), std::string::npos) << e3;
  BatchSampler ok(ds, 4, 1);
  EXPECT_EQ(ok.validation_windows(), 0);
  std::vector<int64_t> in, tg;
  const std::string e4 = error_of([&] { ok.validation_batch(1, 0, in, tg); });
  EXPECT_NE(e4.find(sroot), std::string::npos) << e4;

  const std::string e5 = error_of([&] { TextDataset::load(sroot, 1.0); });
  EXPECT_NE(e5.find(sroot), std::string::npos) << e5;
  EXPECT_THROW(BatchSampler(ds, 0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace swarm::data
