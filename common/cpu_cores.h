// How many cores this process is given: the CPUs it may run on (sched_getaffinity: cpusets,
// `taskset`, a container's cpuset) capped by its cgroup's CPU quota (a Kubernetes CPU limit:
// cgroup v2 cpu.max, or v1 cpu.cfs_quota_us / cpu.cfs_period_us), rounded up, at least 1. What
// torch's thread count per process is chosen from (a worker's default --threads, swarm local's
// cores / workers): std::thread::hardware_concurrency() counts the node's cores, and a pod limited
// to 2 of 64 that runs 64 threads spends its quota spinning.
#pragma once

#include <optional>
#include <string>

namespace swarm {

// Cores the quota allows: cgroup v2 "cpu.max" text ("max 100000" = no limit, "150000 100000" = 1.5
// cores -> 2). nullopt when unlimited or unreadable.
std::optional<int> quota_cores_v2(const std::string& cpu_max);
// cgroup v1: cpu.cfs_quota_us ("-1" = no limit) and cpu.cfs_period_us texts.
std::optional<int> quota_cores_v1(const std::string& quota_us, const std::string& period_us);

// min(affinity CPUs, quota cores), at least 1 (affinity 0 or unknown: hardware_concurrency).
int cores_given(int affinity_cpus, std::optional<int> quota_cores);

// This process: reads the affinity mask and /sys/fs/cgroup (v2 at the root of the process's own
// cgroup namespace, as in a container; v1's cpu controller otherwise).
int usable_cores();

}  // namespace swarm
