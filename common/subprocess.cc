#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

namespace swarm::subprocess {
namespace {

// In the child, between fork and exec: only async-signal-safe calls from here on.
[[noreturn]] void exec_child(const char* exe, char* const* argv, const SpawnOptions& o, pid_t parent) {
  if (o.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl took effect
  }
  if (!o.log_path.empty()) {
    const int fd = ::open(o.log_path.c_str(), O_WRONLY | O_CREAT | (o.append_log ? O_APPEND : O_TRUNC), 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      if (fd > 2) ::close(fd);
    }
  }
  if (o.null_stdin) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (devnull > 2) ::close(devnull);
  }
  if (o.own_group) ::setpgid(0, 0);
  ::execv(exe, argv);
  ::_exit(127);
}

}  // namespace

pid_t spawn(const std::string& exe, const std::vector<std::string>& args, const SpawnOptions& options) {
  // argv is built before fork: the child must not allocate (another thread may hold malloc's lock).
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) exec_child(exe.c_str(), argv.data(), options, parent);
  // The parent sets the group too, so a signal_group() right after spawn cannot miss the child
  // (fails harmlessly once the child has exec'd and set it itself).
  if (options.own_group) ::setpgid(pid, pid);
  return pid;
}

bool try_reap(pid_t pid, int* status) {
  if (pid <= 0) return false;
  int st = 0;
  if (::waitpid(pid, &st, WNOHANG) != pid) return false;
  if (status) *status = st;
  return true;
}

bool reap_within(pid_t pid, double seconds, int* status, int poll_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (true) {
    if (try_reap(pid, status)) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

int reap_blocking(pid_t pid) {
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return 0;
  }
  return st;
}

int signal(pid_t pid, int sig) { return pid > 0 ? ::kill(pid, sig) : -1; }

int signal_group(pid_t pid, int sig) { return pid > 0 ? ::kill(-pid, sig) : -1; }

int kill_and_reap(pid_t pid, bool group) {
  if (pid <= 0) return 0;
  if (group) signal_group(pid, SIGKILL);
  signal(pid, SIGKILL);
  return reap_blocking(pid);
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "unknown status";
}

Subprocess::Subprocess(const std::string& exe, const std::vector<std::string>& args, const SpawnOptions& options)
    : pid_(spawn(exe, args, options)), own_group_(options.own_group) {}

Subprocess::Subprocess(Subprocess&& other) noexcept { *this = std::move(other); }

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    kill();
    pid_ = std::exchange(other.pid_, -1);
    own_group_ = other.own_group_;
    reaped_ = std::exchange(other.reaped_, false);
    status_ = std::exchange(other.status_, 0);
  }
  return *this;
}

Subprocess::~Subprocess() { kill(); }

void Subprocess::kill() {
  if (!running()) return;
  status_ = kill_and_reap(pid_, own_group_);
  reaped_ = true;
}

bool Subprocess::poll() {
  if (running() && try_reap(pid_, &status_)) reaped_ = true;
  return reaped_;
}

bool Subprocess::wait_for(double seconds) {
  if (running() && reap_within(pid_, seconds, &status_)) reaped_ = true;
  return reaped_;
}

void Subprocess::signal(int sig) const {
  if (running()) subprocess::signal(pid_, sig);
}

void Subprocess::signal_group(int sig) const {
  if (!running()) return;
  if (own_group_)
    subprocess::signal_group(pid_, sig);
  else
    subprocess::signal(pid_, sig);
}

int Subprocess::stop(double grace_seconds) {
  if (!running()) return status_;
  signal(SIGTERM);
  if (!wait_for(grace_seconds)) kill();
  return status_;
}

pid_t Subprocess::release() {
  if (!running()) return -1;
  reaped_ = true;  // no longer ours: the destructor leaves it alone
  return std::exchange(pid_, -1);
}

}  // namespace swarm::subprocess
