#include "common/cpu_cores.h"

#include <sched.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

namespace swarm {
namespace {

std::optional<double> number(const std::string& text) {
  std::istringstream in(text);
  double v = 0;
  if (!(in >> v) || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int> cores_of(double quota, double period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return std::max(1, static_cast<int>(std::ceil(quota / period - 1e-9)));
}

std::string read_file(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::optional<int> quota_cores_v2(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota, period;
  if (!(in >> quota >> period) || quota == "max") return std::nullopt;
  const auto q = number(quota), p = number(period);
  if (!q || !p) return std::nullopt;
  return cores_of(*q, *p);
}

std::optional<int> quota_cores_v1(const std::string& quota_us, const std::string& period_us) {
  const auto q = number(quota_us), p = number(period_us);
  if (!q || !p) return std::nullopt;
  return cores_of(*q, *p);
}

int cores_given(int affinity_cpus, std::optional<int> quota_cores) {
  int cores = affinity_cpus > 0 ? affinity_cpus : static_cast<int>(std::thread::hardware_concurrency());
  if (quota_cores && *quota_cores < cores) cores = *quota_cores;
  return std::max(1, cores);
}

int usable_cores() {
  int affinity = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) affinity = CPU_COUNT(&set);
  std::optional<int> quota = quota_cores_v2(read_file("/sys/fs/cgroup/cpu.max"));
  if (!quota) {
    quota = quota_cores_v1(read_file("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                           read_file("/sys/fs/cgroup/cpu/cpu.cfs_period_us"));
  }
  return cores_given(affinity, quota);
}

}  // namespace swarm
