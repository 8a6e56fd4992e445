#pragma once
// Thread and core policy in one place: how many cores this process may use, which ones, how a
// thread count is shared out, pinning a thread to a set of cores, and a thread's scheduling role.
//
//   const int n = core::usable_cores();                     // e.g. 2 in a container limited to 2 CPUs
//   const int t = core::share_threads(0, n, /*parts=*/4);   // 0 = no explicit count: n / 4, at least 1
//   const std::vector<int> cpus = core::core_block(/*first=*/t, /*count=*/t);  // the second block
//   core::pin_current_thread(cpus);
//
// Every default thread count in streamline comes from usable_cores(); every pinned core set from
// core_block(). Thread-safe; the process's CPU set and limit are read once, at first use.

#include <vector>

namespace streamline::core {

// The CPUs this process may run on (its affinity mask when it was first asked), in ascending
// order; never empty.
const std::vector<int>& allowed_cpus();

// How many threads this process can run at once: the CPUs it may run on, capped by a cgroup CPU
// quota when one is set (a container limited to 1.5 CPUs gets 2). At least 1.
int usable_cores();

// `requested` when positive, else max(1, total / parts): the per-part share of `total` threads
// (total <= 0 means usable_cores()).
int share_threads(int requested, int total, int parts);

// The most threads one of `instances` instances sharing their cores may run with (a controller
// moves cores between them; one alone runs on all of them): the instances' cores, `threads` each,
// within `budget` cores, and never fewer than `threads`. A controlled model's plans are made for
// this many threads.
int shared_instance_threads(int threads, int instances, int budget);

// `count` CPUs starting at position `first` of allowed_cpus(), wrapping around: block k of
// width t is core_block(k * t, t). Empty when count <= 0.
std::vector<int> core_block(int first, int count);

// Pins the calling thread to `cpus` (no-op for an empty set). False when the system refuses.
bool pin_current_thread(const std::vector<int>& cpus);

// How the kernel's scheduler treats a thread: a background thread (network I/O, request decoding)
// that wakes up does not preempt a running one, it waits for the next scheduling tick or a free
// core (SCHED_BATCH); a compute thread (one running inferences) keeps the default policy, so
// background wake-ups do not cut into a running inference. Threads inherit the role of the thread
// that creates them.
enum class ThreadRole { kCompute, kBackground };

// Gives the calling thread `role`, moving it only between the default policy and SCHED_BATCH: a
// real-time or idle policy chosen from outside (chrt) is left alone. False when the system refuses.
bool set_current_thread_role(ThreadRole role);

// The calling thread's role: kBackground under SCHED_BATCH, kCompute otherwise.
ThreadRole current_thread_role();

// Parses a cgroup v2 "cpu.max" line ("max 100000" or "150000 100000") into a core count,
// rounded up; 0 when there is no quota or the text is malformed. Exposed for tests.
int cores_from_cgroup_quota(const char* text);

}  // namespace streamline::core
