// Child processes: spawn (fork + exec, optionally in a process group of its own, output to a log
// file), reap (non-blocking, or within a deadline), signal a process or its group. One
// implementation for `swarm local` (worker/local/launcher.cc) and for the tests that run
// programs (tests/local/swarm_process.h, tests/operator/testenv.cc, ...). POSIX only; no threads.
//
// Ownership: the free functions work on raw pids and own nothing: whoever spawned a pid reaps it
// (a pid that is never reaped stays a zombie until this process exits; a pid reaped twice may
// name an unrelated process by then). `Subprocess` is the owning form: it holds one pid from
// spawn until it reaps it, and its destructor kills (SIGKILL, to the whole group when the child
// leads one) and reaps a child still running, so a Subprocess never leaves a process behind.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace swarm::subprocess {

struct SpawnOptions {
  // Where the child's stdout and stderr go; "" = this process's own (inherited).
  std::string log_path;
  // true: the log is appended to (created if missing); false: it is truncated first.
  bool append_log = true;
  // The child leads a new process group (setpgid(0, 0)): a Ctrl-C on the terminal then reaches
  // this process only, and signal_group() reaches the child and everything it started.
  bool own_group = true;
  // The kernel SIGKILLs the child when this process dies (PR_SET_PDEATHSIG; the thread that
  // spawned it, strictly: spawn from a thread that lives as long as the child should).
  bool die_with_parent = true;
  // The child's stdin reads /dev/null instead of this process's stdin.
  bool null_stdin = true;
};

// Starts `exe` with argv[0] = exe and then `args` (execv: `exe` is a path, PATH is not searched).
// Returns the child's pid; the caller owns it (must reap it). Throws std::runtime_error when fork
// fails; a failed exec shows as the child exiting with status 127.
pid_t spawn(const std::string& exe, const std::vector<std::string>& args, const SpawnOptions& options = {});

// Non-blocking: true when `pid` has exited, and it is reaped now (`*status` gets its wait
// status when not null); false while it runs (or when it is not a child of this process).
bool try_reap(pid_t pid, int* status = nullptr);

// Polls try_reap every `poll_ms` until `pid` exits or `seconds` pass; true when it was reaped.
bool reap_within(pid_t pid, double seconds, int* status = nullptr, int poll_ms = 20);

// Blocks until `pid` exits; returns its wait status (0 when it was no child of this process).
int reap_blocking(pid_t pid);

// Sends `sig` to `pid` alone / to the process group `pid` leads (kill(-pid)). Return kill(2)'s
// result: 0 when delivered, -1 (errno set) when there is no such process (group).
int signal(pid_t pid, int sig);
int signal_group(pid_t pid, int sig);

// SIGKILLs `pid` (its group too when `group`) and reaps it; returns its wait status.
int kill_and_reap(pid_t pid, bool group);

// A wait status as an exit code: the code of a normal exit, 128 + signal for a killed process.
int exit_code(int status);
// A wait status in words: "exit code 3", "signal Killed".
std::string describe_exit(int status);

// The owning form: move-only; holds a pid from spawn until reaped (then pid() stays the old pid
// and running() is false). Destroying one whose child still runs SIGKILLs it (its group when
// spawned with own_group) and reaps it. release() hands the pid over to the caller instead.
class Subprocess {
 public:
  Subprocess() = default;
  Subprocess(const std::string& exe, const std::vector<std::string>& args, const SpawnOptions& options = {});
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  // Started and not reaped yet (a child that exited but is not reaped counts as running).
  bool running() const { return pid_ > 0 && !reaped_; }
  // The wait status once reaped; 0 before.
  int status() const { return status_; }

  // try_reap / reap_within on the owned pid; true once it is reaped (now or before).
  bool poll();
  bool wait_for(double seconds);
  // Signals the child (alone, or its group when it leads one); a no-op once reaped.
  void signal(int sig) const;
  void signal_group(int sig) const;
  // SIGKILL (to its group when it leads one) and reap, now; a no-op once reaped.
  void kill();
  // SIGTERM, then kill() after `grace_seconds` if still running; reaps it. Returns the status.
  int stop(double grace_seconds);
  // Gives up ownership: returns the pid (or -1 once reaped); the caller reaps it from now on.
  pid_t release();

 private:
  pid_t pid_ = -1;
  bool own_group_ = false;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace swarm::subprocess
