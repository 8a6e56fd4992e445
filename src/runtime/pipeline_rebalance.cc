// Pipeline rebalancing at run time: each window reads every stage's counters, asks balance_step
// (runtime/pipeline_balance.h) what to do, and moves at most one worker. A plain stage gains a
// worker by waking a parked thread (or starting one, with its own Stage object for
// add_stage_per_instance) and loses one by letting its highest worker park after its current
// item; a model stage gains one by taking requests to one more serving model over the same Model
// (one more execution context, the weights shared) and loses one by no longer sending it requests.

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/logging.h"
#include "runtime/pipeline_impl.h"

namespace streamline::runtime {
namespace {

constexpr size_t kRecentMoves = 32;

// Why a move was not made: the core budget had no room for it.
void hold_for_cores(BalanceDecision& d, const RebalanceOptions& ro, int held_after) {
  d.hold = "no room in the core budget (" + std::to_string(ro.cores->held_by_others(nullptr)) + " of " +
           std::to_string(ro.cores->cores()) + " cores held, " + std::to_string(held_after) +
           " needed by this pipeline): " + d.move->reason;
}

// Instance busy time of `models` since each was made, all together.
int64_t busy_of(const std::vector<ServingModel*>& models) {
  int64_t busy = 0;
  for (ServingModel* m : models)
    for (int64_t b : m->stats().instance_busy_us) busy += b;
  return busy;
}

}  // namespace

int PipelineImpl::workers_of(const StageRuntime& st) {
  if (!st.is_model) return st.active;
  int n = 0;
  for (size_t i = 0; i < st.active_replicas; ++i) n += std::max(1, st.replicas[i]->options().instances);
  return n;
}

int PipelineImpl::cores_for(const std::vector<int>& workers) const {
  int cores = 0;
  for (size_t i = 0; i < workers.size() && i < stages.size(); ++i) {
    const StageRuntime& st = *stages[i];
    cores += workers[i] * (st.is_model ? std::max(1, st.model->threads_per_instance()) : 1);
  }
  return cores;
}

bool PipelineImpl::set_workers(StageRuntime& st, int n) {
  const std::string where = "pipeline stage '" + st.spec.name + "': ";
  if (!st.is_model) {
    // Threads and their Stage objects are only ever added here (balance_mu_ held), so this
    // thread may read how many exist without st.mu.
    const int have = static_cast<int>(st.threads.size());
    std::vector<std::unique_ptr<Stage>> made;
    for (int w = have; st.factory && w < n; ++w) {
      std::unique_ptr<Stage> obj;
      try {
        obj = st.factory();
      } catch (...) {
        obj = nullptr;
      }
      const Status v = obj ? obj->validate(st.spec) : invalid_argument("its factory returned no stage");
      if (!v.ok()) {
        SL_LOG(kWarning) << where << "no new worker: " << v.to_string();
        return false;
      }
      made.push_back(std::move(obj));
    }
    {
      std::lock_guard<std::mutex> lock(st.mu);
      for (size_t i = 0; i < made.size(); ++i) st.owned[static_cast<size_t>(have) + i] = std::move(made[i]);
      for (int w = have; w < n; ++w) st.threads.emplace_back([this, s = &st, w] { worker_main(*s, w); });
      st.active = n;
    }
    st.park.notify_all();
    st.not_empty.notify_all();  // a worker taken away parks once it is between items
    return true;
  }
  // Model stage: n instances = the first model's own plus one per further replica.
  const int own = std::max(1, st.model->options().instances);
  const size_t want = static_cast<size_t>(std::clamp(n - own + 1, 1, st.max_replicas));
  while (st.replicas.size() < want) {
    std::shared_ptr<ServingModel> first;
    for (const auto& m : models)
      if (m.get() == st.model) first = m;
    ServingOptions o = st.model->options();
    o.instances = 1;
    o.threads_per_instance = st.model->threads_per_instance();
    o.controller = ControllerOptions{};
    o.pin = false;  // pinning would put it on the cores of the first model's first instance
    // The replica serves the first model's Model (weights shared) and keeps that model alive.
    auto made = ServingModel::create(std::shared_ptr<const Model>(first, &first->model()), o);
    if (!made.ok()) {
      SL_LOG(kWarning) << where << "no new model instance: " << made.status().to_string();
      return false;
    }
    std::shared_ptr<ServingModel> replica = std::move(made).value();
    models.push_back(replica);
    std::lock_guard<std::mutex> lock(st.mu);
    st.replicas.push_back(replica.get());
    st.replica_in_flight.push_back(0);
  }
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.active_replicas = want;
    if (st.auto_in_flight)
      st.max_in_flight = 2 * std::max(1, st.model->options().batching.max_batch_size) * workers_of(st);
  }
  st.not_empty.notify_all();
  return true;
}

std::vector<RebalanceMove> PipelineImpl::rebalance_window() {
  std::vector<RebalanceMove> moves;
  if (!rebalancing_) return moves;
  std::lock_guard<std::mutex> serial(balance_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return moves;  // shutdown joins the workers: none may start now
  }
  // Pass 1: what each stage did since the previous window.
  const int64_t now = steady_now_us();
  BalanceWindow w;
  w.length_us = now - mark_us_;
  std::vector<StageMark> next(stages.size());
  for (size_t i = 0; i < stages.size(); ++i) {
    StageRuntime& st = *stages[i];
    StageWindow sw;
    sw.name = st.spec.name;
    sw.min_workers = st.min_workers;
    sw.max_workers = st.max_workers;
    std::vector<ServingModel*> models_now;
    {
      std::lock_guard<std::mutex> lock(st.mu);
      st.note_depth(now);
      sw.workers = workers_of(st);
      next[i].done = st.processed + st.failed;
      next[i].busy_us = st.busy_us;
      next[i].depth_integral = st.depth_integral;
      sw.queue_depth_max = st.window_depth_max;
      st.window_depth_max = static_cast<int64_t>(st.queue.size());
      models_now = st.replicas;
    }
    if (st.is_model) next[i].busy_us = busy_of(models_now);
    sw.done = next[i].done - marks_[i].done;
    sw.busy_us = next[i].busy_us - marks_[i].busy_us;
    sw.queue_depth_mean =
        w.length_us > 0 ? (next[i].depth_integral - marks_[i].depth_integral) / static_cast<double>(w.length_us) : 0;
    w.stages.push_back(std::move(sw));
  }
  marks_ = std::move(next);
  mark_us_ = now;

  // Pass 2: the decision, then the move: the donor first, so the budget is never exceeded.
  const RebalanceOptions& ro = options.rebalance;
  int budget = worker_budget_;
  std::vector<int> now_workers;
  int total = 0;
  for (const StageWindow& sw : w.stages) {
    now_workers.push_back(sw.workers);
    total += sw.workers;
  }
  const int held_now = cores_for(now_workers);
  if (ro.cores) {
    // The unused budget is what the cores others leave us allow (at least one core a worker).
    const int spare = ro.cores->cores() - ro.cores->held_by_others(this) - held_now;
    budget = std::max(total, std::min(worker_budget_, total + std::max(0, spare)));
  }
  BalanceDecision d = balance_step(w, balance_limits(ro, budget), &balance_state_);
  if (d.move) {
    const BalanceMove& bm = *d.move;
    StageRuntime& to = *stages[static_cast<size_t>(bm.to)];
    StageRuntime* from = bm.from >= 0 ? stages[static_cast<size_t>(bm.from)].get() : nullptr;
    // Cores first: a move that needs more than the budget leaves is not made.
    const int held_after = cores_for(d.workers);
    bool ok = !ro.cores || held_after <= held_now || ro.cores->try_hold(this, held_after, cores_floor_);
    if (!ok) hold_for_cores(d, ro, held_after);
    ok = ok && (!from || set_workers(*from, d.workers[static_cast<size_t>(bm.from)]));
    if (ok && !set_workers(to, d.workers[static_cast<size_t>(bm.to)])) {
      ok = false;
      if (from) (void)set_workers(*from, w.stages[static_cast<size_t>(bm.from)].workers);
    }
    if (ro.cores) (void)ro.cores->try_hold(this, ok ? held_after : held_now, cores_floor_);
    if (ok && ro.cores) {
      std::lock_guard<std::mutex> lock(mu_);
      cores_held_ = held_after;
    }
    if (ok) {
      RebalanceMove m;
      m.from = from ? from->spec.name : "";
      m.to = to.spec.name;
      m.from_workers = from ? d.workers[static_cast<size_t>(bm.from)] : 0;
      m.to_workers = d.workers[static_cast<size_t>(bm.to)];
      m.reason = bm.reason;
      m.time_us = now;
      SL_LOG(kInfo) << "pipeline rebalance: " << m.reason;
      moves.push_back(std::move(m));
    } else if (d.hold.empty()) {
      d.hold = "the move failed (see the log): " + bm.reason;
    }
  }
  // Pass 3: what stats() shows.
  for (size_t i = 0; i < stages.size(); ++i) {
    std::lock_guard<std::mutex> lock(stages[i]->mu);
    stages[i]->capacity_per_s = d.capacity[i];
    stages[i]->busy_fraction = d.busy[i];
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++windows_;
    bottleneck_ = d.bottleneck >= 0 ? stages[static_cast<size_t>(d.bottleneck)]->spec.name : "";
    imbalance_ = d.imbalance;
    last_hold_ = d.hold;
    for (const RebalanceMove& m : moves) {
      ++moves_;
      recent_.push_back(m);
      if (recent_.size() > kRecentMoves) recent_.pop_front();
    }
  }
  for (const RebalanceMove& m : moves) {
    if (!ro.on_move) break;
    try {
      ro.on_move(m);
    } catch (const std::exception& e) {
      SL_LOG(kError) << "a pipeline on_move callback threw: " << e.what();
    } catch (...) {
      SL_LOG(kError) << "a pipeline on_move callback threw";
    }
  }
  return moves;
}

void PipelineImpl::balance_main() {
  std::unique_lock<std::mutex> lock(balance_wait_mu_);
  for (;;) {
    if (balance_cv_.wait_for(lock, std::chrono::microseconds(options.rebalance.window_us),
                             [&] { return balance_stop_; }))
      return;
    lock.unlock();
    (void)rebalance_window();
    lock.lock();
  }
}

}  // namespace streamline::runtime
