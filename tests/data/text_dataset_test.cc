#include "worker/data/text_dataset.h"

#include "worker/data/token_file.h"

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

TEST(BatchSampler, DeterministicPerSeedTrainerAndTrainerCount) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 100000; ++i) text += char('a' + (i * 31 + i / 7) % 26);
  dir.write("t.txt", text);
  const TextDataset ds = TextDataset::load(dir.path().string());
  auto draw = [&](uint64_t seed, int stream, int shards) {
    BatchSampler s(ds, 32, seed, stream, shards);
    std::vector<int64_t> all, in, tg;
    for (int i = 0; i < 5; ++i) {
      s.next(8, in, tg);
      all.insert(all.end(), in.begin(), in.end());
    }
    return all;
  };
  EXPECT_EQ(draw(1, 0, 1), draw(1, 0, 1));
  EXPECT_EQ(draw(1, 3, 4), draw(1, 3, 4));
  EXPECT_NE(draw(1, 0, 2), draw(1, 1, 2));
  EXPECT_NE(draw(1, 0, 1), draw(2, 0, 1));
  EXPECT_NE(draw(uint64_t{1} << 40, 0, 1), draw(0, 0, 1));  // the high half of the seed counts

  // Same across processes and platforms: the permutation and offsets are our own arithmetic.
  TempDir digits("_digits");
  std::string d;
  for (int i = 0; i < 1000; ++i) d += std::to_string(i) + " ";
  digits.write("d.txt", d);
  BatchSampler g(TextDataset::load(digits.path().string(), 0.0), 6, 7, 1, 2);
  std::vector<int64_t> in, tg;
  g.next(2, in, tg);
  std::string got;
  for (auto v : in) got += char(v);
  EXPECT_EQ(got, "7 228 58 59 ");
}

// Two trainers never feed the same window in one epoch; together they feed every window once.
TEST(BatchSampler, TheTrainersShardsOfAnEpochAreDisjointAndCoverIt) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 4000; ++i) text += char('a' + (i * 7 + i / 13) % 26);
  dir.write("t.txt", text);
  const TextDataset ds = TextDataset::load(dir.path().string(), 0.0);
  const int64_t T = 16;
  const int N = 3;
  std::vector<BatchSampler> trainers;
  for (int i = 0; i < N; ++i) trainers.emplace_back(ds, T, 99, i, N);
  const uint64_t W = trainers[0].windows();
  EXPECT_EQ(W, (4000 - T) / T);
  std::vector<std::set<int64_t>> epochs(2);
  std::vector<std::vector<int64_t>> first_trainer(2);  // its windows (start / T) in order, per epoch
  size_t drawn = 0;
  for (auto& s : trainers) {
    for (uint64_t e = 0; e < 2; ++e) {
      std::set<int64_t> mine;
      while (true) {
        BatchSampler probe = s;  // where the next window comes from, without taking it
        probe.next_start();
        if (probe.epoch() != e) break;
        const int64_t start = s.next_start();
        ++drawn;
        if (&s == &trainers[0]) first_trainer[e].push_back(start / T);
        EXPECT_TRUE(mine.insert(start).second) << "trainer drew window " << start << " twice in epoch " << e;
        EXPECT_TRUE(epochs[e].insert(start).second) << "two trainers drew window " << start << " in epoch " << e;
        EXPECT_LE(start + T + 1, 4000);
      }
    }
  }
  EXPECT_EQ(drawn, 2 * W);
  for (const auto& e : epochs) {
    ASSERT_EQ(e.size(), W);
    for (int64_t start : e) EXPECT_EQ(start % T, *e.begin() % T);  // one offset per epoch
  }
  EXPECT_NE(first_trainer[0], first_trainer[1]) << "each epoch draws its own order";
  // More trainers than windows: refused by name.
  TempDir small("_small");
  small.write("s.txt", std::string(3 * T, 'x'));
  const std::string e = error_of([&] { BatchSampler(TextDataset::load(small.path().string(), 0.0), T, 1, 2, 3); });
  EXPECT_NE(e.find("fewer than the 3 trainers"), std::string::npos) << e;
  EXPECT_THROW(BatchSampler(ds, T, 1, 3, 3), std::invalid_argument);
}

TEST(WindowPermutation, IsAPermutationForEverySizeAndDependsOnTheKey) {
  for (uint64_t n : {1, 2, 3, 5, 16, 17, 100, 255, 256, 257, 1000, 4099}) {
    WindowPermutation p(n, 12345);
    std::vector<bool> seen(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t x = p(i);
      ASSERT_LT(x, n);
      ASSERT_FALSE(seen[x]) << "n " << n << ": " << x << " twice";
      seen[x] = true;
    }
  }
  WindowPermutation a(1000, 1), b(1000, 2);
  int same = 0;
  for (uint64_t i = 0; i < 1000; ++i) same += a(i) == b(i);
  EXPECT_LT(same, 20);
  EXPECT_THROW(a(1000), std::out_of_range);
  // A corpus of 2^40 windows costs nothing to permute.
  WindowPermutation big(uint64_t{1} << 40, 7);
  EXPECT_LT(big(123456789), uint64_t{1} << 40);
}

TEST(TextDataset, JsonLinesGiveTheTextFieldOfEachLine) {
  TempDir dir;
  dir.write("a.jsonl", "{\"text\": \"first doc\", \"id\": 1}\n\n  \n{\"text\": \"second\\ndoc\"}\n");
  dir.write("b.txt", "plain");
  DatasetOptions o;
  o.validation_fraction = 0;
  const TextDataset ds = TextDataset::load(dir.path().string(), o);
  EXPECT_EQ(std::string(ds.train()), "first doc\nsecond\ndoc\nplain");
  EXPECT_EQ(ds.files().size(), 2u);
  // Another field name; format jsonl reads any file name as JSON Lines.
  TempDir other("_field");
  const auto p = other.write("data.txt", "{\"body\": \"x y\"}\n");
  o.format = DatasetFormat::Jsonl;
  o.text_field = "body";
  EXPECT_EQ(std::string(TextDataset::load(p.string(), o).train()), "x y\n");
  // format text reads a .jsonl file as it is.
  o.format = DatasetFormat::Text;
  EXPECT_EQ(std::string(TextDataset::load((dir.path() / "a.jsonl").string(), o).train()).substr(0, 9), "{\"text\": ");
}

// A token file among text files: the samplers draw ids (the text's bytes as ids).
TEST(TextDataset, TokenFilesAndTextInOneDirectoryBecomeOneStreamOfIds) {
  TempDir dir;
  write_token_file((dir.path() / "a.tok").string(), 256, Sha256{}, {104, 105, 33});
  dir.write("b.txt", "ok");
  DatasetOptions o;
  o.validation_fraction = 0;
  const TextDataset ds = TextDataset::load(dir.path().string(), o);
  ASSERT_EQ(ds.train_tokens(), 5u);
  BatchSampler s(ds, 4, 1);
  std::vector<int64_t> in, tg;
  s.next(1, in, tg);
  EXPECT_EQ(in, (std::vector<int64_t>{104, 105, 33, 'o'}));
  EXPECT_EQ(tg, (std::vector<int64_t>{105, 33, 'o', 'k'}));
  // Another vocabulary than the job's tokenizer (bytes: 256): refused naming the file.
  write_token_file((dir.path() / "c.tok").string(), 1000, Sha256{}, {1, 2});
  const std::string e = error_of([&] { TextDataset::load(dir.path().string(), o); });
  EXPECT_NE(e.find("c.tok: written with a vocabulary of 1000"), std::string::npos) << e;
}

TEST(TextDataset, BadJsonLinesAndFormatsAreRefusedNamingTheFileAndLine) {
  TempDir dir;
  const auto bad = dir.write("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{not json\n");
  std::string e = error_of([&] { TextDataset::load(bad.string()); });
  EXPECT_NE(e.find(bad.string() + ": line 3: not JSON"), std::string::npos) << e;
  const auto field = dir.write("field.jsonl", "{\"txt\": \"x\"}\n");
  e = error_of([&] { TextDataset::load(field.string()); });
  EXPECT_NE(e.find(field.string() + ": line 1: needs a string field \"text\""), std::string::npos) << e;
  EXPECT_NE(e.find("got none"), std::string::npos) << e;
  const auto number = dir.write("number.jsonl", "{\"text\": 7}\n");
  e = error_of([&] { TextDataset::load(number.string()); });
  EXPECT_NE(e.find("line 1: needs a string field \"text\" (spec.training.dataset.textField), got a number"),
            std::string::npos) << e;
  const auto array = dir.write("array.jsonl", "[1, 2]\n");
  e = error_of([&] { TextDataset::load(array.string()); });
  EXPECT_NE(e.find("line 1: must be a JSON object, got an array"), std::string::npos) << e;
  DatasetOptions o;
  o.format = DatasetFormat::Tokens;
  const auto text = dir.write("t.txt", "hello");
  e = error_of([&] { TextDataset::load(text.string(), o); });
  EXPECT_NE(e.find(text.string() + ": not a token file"), std::string::npos) << e;
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
  EXPECT_NE(e2.find("no data found"), std::string::npos) << e2;

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
