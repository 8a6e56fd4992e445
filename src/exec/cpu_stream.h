#pragma once
// CPU streams and events, with the nouns and record/wait semantics of CUDA's (exec/cuda/stream.h):
// a stream runs its work in order; record(event) marks the point the stream has reached; wait(event)
// holds the stream's later work until the event's last record has happened.
//
//   CpuEvent ready;                          // one per plan event, owned by the context
//   CpuStream producer(1), consumer(2);
//   producer.begin_run(gen);  consumer.begin_run(gen);     // each on its own thread
//   ... producer's step ...;  producer.record(ready);
//   consumer.wait(ready);     ... consumer's step ...      // sees the producer's writes
//
// Unlike a CUDA stream, a CPU stream is the thread running it: record() and wait() act at once on
// the calling thread. An event carries the generation of the run that last recorded it, so events
// are never reset or allocated per run: a wait in run g returns once the event is stamped g.
// A wait polls for up to 2 ms (the pause instruction for the first 50 us, then yielding the core)
// and then sleeps on the atomic, unless more stream threads of the process are running than there
// are cores: then it sleeps at once (a poller would take time from the very producer it waits for).
// Thread-safety: one thread drives a CpuStream; events are shared between streams.

#include <atomic>
#include <cstdint>

namespace streamline::exec {

class CpuEvent {
 public:
  CpuEvent() = default;
  CpuEvent(const CpuEvent&) = delete;
  CpuEvent& operator=(const CpuEvent&) = delete;
  // The generation of the run that last recorded it (0: never).
  uint64_t stamp() const { return stamp_.load(std::memory_order_acquire); }

 private:
  friend class CpuStream;
  std::atomic<uint64_t> stamp_{0};
};

class CpuStream {
 public:
  explicit CpuStream(int index = 0) : index_(index) {}
  int index() const { return index_; }

  // Starts run `generation` (increasing per context) on the calling thread, which counts as a
  // running stream thread until end_run().
  void begin_run(uint64_t generation);
  void end_run();
  // Everything this stream did so far happens-before any wait() that returns for `event`.
  void record(CpuEvent& event) const;
  // Blocks until `event` has been recorded in this run.
  void wait(const CpuEvent& event) const;

 private:
  int index_;
  uint64_t generation_ = 0;
};

}  // namespace streamline::exec
