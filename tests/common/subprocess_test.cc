// common/subprocess: spawn, reap, signal real child processes (/bin/true, /bin/sh, sleep).
#include "common/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace swarm::subprocess {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  auto d = fs::temp_directory_path() / ("swarm-subprocess-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// True while `pid` names a live process (not a zombie).
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'Z';
}

bool gone_within(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (alive(pid)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Starts `sh -c 'sleep 60 & echo $! > FILE; wait'` (a child with a grandchild); returns the
// grandchild's pid once the child wrote it, -1 if it did not within 10 s.
pid_t grandchild_of(const std::string& pid_file) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream f(pid_file);
    pid_t gc = -1;
    if (f >> gc && gc > 0) return gc;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::vector<std::string> sleeper_with_grandchild(const std::string& pid_file) {
  return {"-c", "sleep 60 & echo $! > " + pid_file + ".tmp && mv " + pid_file + ".tmp " + pid_file + "; wait"};
}

TEST(Subprocess, SpawnTrueExitsZero) {
  const pid_t pid = spawn("/bin/true", {});
  int status = -1;
  ASSERT_TRUE(reap_within(pid, 10, &status));
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(exit_code(status), 0);
  EXPECT_EQ(describe_exit(status), "exit code 0");
}

TEST(Subprocess, ExitCodeOfAShell) {
  const pid_t pid = spawn("/bin/sh", {"-c", "exit 3"});
  int status = -1;
  ASSERT_TRUE(reap_within(pid, 10, &status));
  EXPECT_EQ(exit_code(status), 3);
  EXPECT_EQ(describe_exit(status), "exit code 3");
}

TEST(Subprocess, ExecFailureExits127) {
  const pid_t pid = spawn("/nonexistent/program", {});
  int status = -1;
  ASSERT_TRUE(reap_within(pid, 10, &status));
  EXPECT_EQ(exit_code(status), 127);
}

TEST(Subprocess, OutputGoesToTheLogAppendedOrTruncated) {
  const std::string dir = fresh_dir("log");
  const std::string log = dir + "/out.log";
  SpawnOptions o;
  o.log_path = log;
  ASSERT_TRUE(reap_within(spawn("/bin/sh", {"-c", "echo one; echo two >&2"}, o), 10));
  ASSERT_TRUE(reap_within(spawn("/bin/sh", {"-c", "echo three"}, o), 10));
  EXPECT_EQ(read_text(log), "one\ntwo\nthree\n");
  o.append_log = false;
  ASSERT_TRUE(reap_within(spawn("/bin/sh", {"-c", "echo four"}, o), 10));
  EXPECT_EQ(read_text(log), "four\n");
  fs::remove_all(dir);
}

TEST(Subprocess, StdinIsDevNull) {
  const pid_t pid = spawn("/bin/sh", {"-c", "read line; exit $?"});
  int status = -1;
  ASSERT_TRUE(reap_within(pid, 10, &status));
  EXPECT_NE(exit_code(status), 0);  // end of input at once, no hang on the test's stdin
}

TEST(Subprocess, OwnProcessGroupOrTheParents) {
  const pid_t own = spawn("/bin/sleep", {"60"});
  EXPECT_EQ(::getpgid(own), own);
  SpawnOptions same;
  same.own_group = false;
  const pid_t shared = spawn("/bin/sleep", {"60"}, same);
  EXPECT_EQ(::getpgid(shared), ::getpgrp());
  EXPECT_TRUE(WIFSIGNALED(kill_and_reap(own, true)));
  EXPECT_TRUE(WIFSIGNALED(kill_and_reap(shared, false)));
}

TEST(Subprocess, ReapWithDeadlineWaitsThenGivesUp) {
  const pid_t pid = spawn("/bin/sleep", {"60"});
  EXPECT_FALSE(try_reap(pid));  // non-blocking while it runs
  const auto t0 = std::chrono::steady_clock::now();
  int status = -1;
  EXPECT_FALSE(reap_within(pid, 0.3, &status));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(signal(pid, SIGTERM), 0);
  ASSERT_TRUE(reap_within(pid, 10, &status));
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(exit_code(status), 128 + SIGTERM);
}

TEST(Subprocess, SignalGroupReachesTheGrandchild) {
  const std::string dir = fresh_dir("group");
  const pid_t pid = spawn("/bin/sh", sleeper_with_grandchild(dir + "/gc.pid"));
  const pid_t gc = grandchild_of(dir + "/gc.pid");
  ASSERT_GT(gc, 0);
  EXPECT_EQ(::getpgid(gc), pid);
  ASSERT_EQ(signal_group(pid, SIGKILL), 0);
  int status = -1;
  ASSERT_TRUE(reap_within(pid, 10, &status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_TRUE(gone_within(gc, 10));
  fs::remove_all(dir);
}

TEST(Subprocess, DestructorKillsTheGroupOfARunningChild) {
  const std::string dir = fresh_dir("dtor");
  pid_t pid = -1, gc = -1;
  {
    Subprocess p("/bin/sh", sleeper_with_grandchild(dir + "/gc.pid"));
    pid = p.pid();
    gc = grandchild_of(dir + "/gc.pid");
    ASSERT_GT(gc, 0);
    EXPECT_TRUE(p.running());
    EXPECT_FALSE(p.poll());
  }
  EXPECT_FALSE(try_reap(pid));  // reaped by the destructor already: no child of ours any more
  EXPECT_NE(::kill(pid, 0), 0);
  EXPECT_TRUE(gone_within(gc, 10));
  fs::remove_all(dir);
}

TEST(Subprocess, OwnerReapsAndKeepsTheStatus) {
  Subprocess p("/bin/sh", {"-c", "exit 3"});
  ASSERT_TRUE(p.wait_for(10));
  EXPECT_FALSE(p.running());
  EXPECT_EQ(exit_code(p.status()), 3);
  EXPECT_GT(p.pid(), 0);  // the pid stays known after the reap
  Subprocess moved = std::move(p);
  EXPECT_EQ(exit_code(moved.status()), 3);
  EXPECT_EQ(p.pid(), -1);
}

TEST(Subprocess, StopEscalatesToKillWhenTermIsIgnored) {
  Subprocess obeys("/bin/sleep", {"60"});
  EXPECT_EQ(WTERMSIG(obeys.stop(10)), SIGTERM);
  Subprocess ignores("/bin/sh", {"-c", "trap '' TERM; while :; do sleep 0.05; done"});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the trap is set
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(WTERMSIG(ignores.stop(0.3)), SIGKILL);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_FALSE(ignores.running());
}

TEST(Subprocess, ReleaseHandsThePidOver) {
  pid_t pid = -1;
  {
    Subprocess p("/bin/sleep", {"60"});
    pid = p.release();
    EXPECT_FALSE(p.running());
  }
  EXPECT_EQ(::kill(pid, 0), 0);  // the destructor left it alone
  EXPECT_TRUE(WIFSIGNALED(kill_and_reap(pid, true)));
}

}  // namespace
}  // namespace swarm::subprocess
