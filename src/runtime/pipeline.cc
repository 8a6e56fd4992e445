// Pipeline at run time: bounded stage queues, stage workers, model stages that submit
// asynchronously, per-request Jobs that fan out and in, and exactly one response per request.

#include <algorithm>
#include <chrono>
#include <exception>

#include "core/cpu_set.h"
#include "core/logging.h"
#include "runtime/pipeline_impl.h"

namespace streamline {
namespace runtime {

int64_t steady_now_us() {
  return SteadyClock::instance().now_us();
}

bool StageRuntime::push(QueueItem item, int64_t deadline_us) {
  const size_t capacity = static_cast<size_t>(spec.queue_capacity);
  std::unique_lock<std::mutex> lock(mu);
  if (queue.size() >= capacity) {
    ++blocked_producers;
    bool room = true;
    if (deadline_us < 0) {
      not_full.wait(lock, [&] { return queue.size() < capacity; });
    } else {
      while (queue.size() >= capacity) {
        const int64_t left = deadline_us - steady_now_us();
        if (left <= 0) {
          room = false;
          break;
        }
        not_full.wait_for(lock, std::chrono::microseconds(left));
      }
    }
    --blocked_producers;
    if (!room) return false;
  }
  item.enqueue_us = steady_now_us();
  note_depth(item.enqueue_us);
  queue.push_back(std::move(item));
  max_depth = std::max(max_depth, static_cast<int64_t>(queue.size()));
  window_depth_max = std::max(window_depth_max, static_cast<int64_t>(queue.size()));
  lock.unlock();
  // Model-stage workers wait on different conditions (answers, room in flight): wake them all.
  if (is_model) {
    not_empty.notify_all();
  } else {
    not_empty.notify_one();
  }
  return true;
}

void PipelineImpl::start() {
  const int64_t now = steady_now_us();
  for (const auto& st : stages) {
    st->depth_since_us = now;
    st->active = st->is_model ? 0 : st->spec.instances;
    for (int w = 0; w < st->spec.instances; ++w) {
      if (st->is_model) {
        st->threads.emplace_back([this, st] { model_worker_main(st); });
      } else {
        st->threads.emplace_back([this, s = st.get(), w] { worker_main(*s, w); });
      }
    }
  }
  mark_us_ = now;
  marks_.assign(stages.size(), StageMark{});
  if (rebalancing_ && options.rebalance.thread) balance_thread_ = std::thread([this] { balance_main(); });
}

void PipelineImpl::invoke(const InferCallback& done, InferResponse r) {
  if (!done) return;
  try {
    done(std::move(r));
  } catch (const std::exception& e) {
    SL_LOG(kError) << "a pipeline response callback threw: " << e.what();
  } catch (...) {
    SL_LOG(kError) << "a pipeline response callback threw";
  }
}

void PipelineImpl::refuse(const InferRequest& request, Status status, const InferCallback& done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++failed_;
    ++failures_[status.code()];
  }
  InferResponse r;
  r.id = request.id;
  r.status = std::move(status);
  invoke(done, std::move(r));
}

void PipelineImpl::submit(InferRequest request, InferCallback done) {
  // Pass 1: the request names exactly the pipeline's inputs and only its outputs.
  if (request.timeout_us < 0) return refuse(request, invalid_argument("timeout_us must be >= 0"), done);
  for (const auto& [name, t] : request.inputs)
    if (std::find(input_names.begin(), input_names.end(), name) == input_names.end())
      return refuse(request, invalid_argument("the pipeline has no input named '" + name + "'"), done);
  auto job = std::make_shared<Job>();
  job->values.resize(tensor_names.size());
  for (size_t i = 0; i < input_names.size(); ++i) {
    auto it = request.inputs.find(input_names[i]);
    if (it == request.inputs.end())
      return refuse(request, invalid_argument("missing input '" + input_names[i] + "'"), done);
    if (!it->second.defined())
      return refuse(request, invalid_argument("input '" + input_names[i] + "' has no tensor"), done);
    job->values[static_cast<size_t>(input_ids[i])] = std::move(it->second);
  }
  if (request.requested_outputs.empty()) {
    job->requested = output_ids;
  } else {
    for (const auto& name : request.requested_outputs) {
      auto it = std::find(output_names.begin(), output_names.end(), name);
      if (it == output_names.end())
        return refuse(request, invalid_argument("the pipeline has no output named '" + name + "'"), done);
      job->requested.push_back(output_ids[static_cast<size_t>(it - output_names.begin())]);
    }
  }
  job->id = request.id;
  job->start_us = steady_now_us();
  job->reads_left = readers;
  job->waiting.resize(stages.size());
  for (size_t s = 0; s < stages.size(); ++s) job->waiting[s] = stages[s]->producers;
  job->tokens = static_cast<int>(entry_stages.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) {
      job.reset();
      ++failed_;
      ++failures_[StatusCode::kUnavailable];
    } else {
      ++accepted_;
      ++in_flight_;
    }
  }
  if (!job) {
    InferResponse r;
    r.id = request.id;
    r.status = unavailable("the pipeline is shutting down");
    return invoke(done, std::move(r));
  }
  job->done = std::move(done);

  // Pass 2: into every entry stage's queue, waiting for room until the entry deadline.
  const int64_t timeout = request.timeout_us > 0 ? request.timeout_us : options.entry_timeout_us;
  const int64_t deadline = job->start_us + timeout;
  size_t pushed = 0;
  for (int s : entry_stages) {
    if (!stages[static_cast<size_t>(s)]->push(QueueItem{job, 0}, deadline)) break;
    ++pushed;
  }
  if (pushed == entry_stages.size()) return;
  const StageRuntime& full = *stages[static_cast<size_t>(entry_stages[pushed])];
  {
    std::lock_guard<std::mutex> lock(mu_);
    --accepted_;
  }
  fail(job,
       resource_exhausted("stage '" + full.spec.name + "': queue full (" + std::to_string(full.spec.queue_capacity) +
                          " requests) for " + std::to_string(timeout) + " us"));
  finish_tokens(job, static_cast<int>(entry_stages.size() - pushed));
}

void PipelineImpl::worker_main(StageRuntime& st, int worker) {
  (void)core::set_current_thread_role(core::ThreadRole::kCompute);  // stages compute, whoever started them
  std::unique_lock<std::mutex> lock(st.mu);
  for (;;) {
    st.not_empty.wait(lock, [&] { return st.stop || !st.queue.empty() || worker >= st.active; });
    if (worker >= st.active && !st.stop) {
      // The rebalancer took this worker away (between items). A wake-up meant for a worker that
      // stays goes on to one.
      if (!st.queue.empty()) st.not_empty.notify_one();
      st.park.wait(lock, [&] { return st.stop || worker < st.active; });
      continue;
    }
    if (st.queue.empty()) return;  // stopped, nothing left
    st.note_depth(steady_now_us());
    QueueItem item = std::move(st.queue.front());
    st.queue.pop_front();
    lock.unlock();
    st.not_full.notify_one();
    run_item(st, worker, std::move(item));
    lock.lock();
  }
}

void PipelineImpl::run_item(StageRuntime& st, int worker, QueueItem item) {
  const std::shared_ptr<Job>& job = item.job;
  const int64_t taken = steady_now_us();
  const int64_t waited = taken - item.enqueue_us;
  StageIO io;
  io.request_id = job->id;
  bool skip = false;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    skip = job->responded || cancelling_.load();
    if (!skip) take_inputs(st, *job, &io.inputs);
  }
  if (skip) {
    {
      std::lock_guard<std::mutex> lock(st.mu);
      ++st.skipped;
    }
    if (cancelling_.load()) fail(job, cancelled("the pipeline was shut down before the request finished"));
    return finish_tokens(job, 1);
  }
  io.outputs.resize(st.out_ids.size());
  Status s;
  try {
    s = st.worker_stage(worker).process(io);
  } catch (const std::exception& e) {
    s = internal_error(std::string("threw an exception: ") + e.what());
  } catch (...) {
    s = internal_error("threw an exception");
  }
  for (size_t i = 0; s.ok() && i < io.outputs.size(); ++i)
    if (!io.outputs[i].defined()) s = internal_error("did not set its output '" + st.spec.outputs[i] + "'");
  const int64_t ran = steady_now_us() - taken;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.queue_window.add(static_cast<double>(waited));
    st.process_window.add(static_cast<double>(ran));
    st.busy_us += ran;
    ++(s.ok() ? st.processed : st.failed);
  }
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->queue_us += waited;
    job->compute_us += ran;
  }
  if (!s.ok()) {
    fail(job, s.with_context("stage '" + st.spec.name + "'"));
    return finish_tokens(job, 1);
  }
  complete(st, job, std::move(io.outputs));
}

void PipelineImpl::model_worker_main(const std::shared_ptr<StageRuntime>& stp) {
  StageRuntime& st = *stp;
  std::unique_lock<std::mutex> lock(st.mu);
  for (;;) {
    st.not_empty.wait(
        lock, [&] { return st.stop || !st.answers.empty() || (!st.queue.empty() && st.in_flight < st.max_in_flight); });
    if (!st.answers.empty()) {
      ModelDone d = std::move(st.answers.front());
      st.answers.pop_front();
      lock.unlock();
      pass_on(st, std::move(d));
      lock.lock();
      --st.in_flight;
      st.not_empty.notify_all();  // room in flight: another worker may submit
      continue;
    }
    if (!st.queue.empty() && st.in_flight < st.max_in_flight) {
      st.note_depth(steady_now_us());
      QueueItem item = std::move(st.queue.front());
      st.queue.pop_front();
      ++st.in_flight;
      lock.unlock();
      st.not_full.notify_one();
      submit_to_model(stp, std::move(item));
      lock.lock();
      continue;
    }
    return;  // stopped, nothing left
  }
}

void PipelineImpl::submit_to_model(const std::shared_ptr<StageRuntime>& stp, QueueItem item) {
  StageRuntime& st = *stp;
  const std::shared_ptr<Job> job = item.job;
  const int64_t taken = steady_now_us();
  const int64_t waited = taken - item.enqueue_us;
  InferRequest r;
  r.id = job->id;
  r.requested_outputs = st.model_outputs;
  bool skip = false;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    skip = job->responded || cancelling_.load();
    if (!skip) {
      std::vector<Tensor> ins;
      take_inputs(st, *job, &ins);
      for (size_t i = 0; i < ins.size(); ++i) r.inputs[st.model_inputs[i]] = std::move(ins[i]);
      job->queue_us += waited;
    }
  }
  if (skip) {
    {
      std::lock_guard<std::mutex> lock(st.mu);
      ++st.skipped;
      --st.in_flight;
    }
    st.not_empty.notify_all();
    if (cancelling_.load()) fail(job, cancelled("the pipeline was shut down before the request finished"));
    return finish_tokens(job, 1);
  }
  // The least loaded active model (in flight per instance) takes the request.
  ServingModel* model = st.model;
  size_t replica = 0;
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.queue_window.add(static_cast<double>(waited));
    double best = 0;
    for (size_t i = 0; i < st.active_replicas; ++i) {
      const double load = static_cast<double>(st.replica_in_flight[i]) /
                          static_cast<double>(std::max(1, st.replicas[i]->options().instances));
      if (i == 0 || load < best) {
        best = load;
        replica = i;
      }
    }
    model = st.replicas[replica];
    ++st.replica_in_flight[replica];
  }
  // The callback runs on a model thread (or here, when the model refuses at once): it only queues
  // the answer for this stage's workers, so the model's instance is never held up. It keeps the
  // stage state alive for as long as it runs.
  model->submit(std::move(r), [stp, item = std::move(item), taken, replica](InferResponse resp) {
    ModelDone d{item, std::move(resp), taken, steady_now_us()};
    {
      std::lock_guard<std::mutex> lock(stp->mu);
      --stp->replica_in_flight[replica];
      stp->answers.push_back(std::move(d));
    }
    stp->not_empty.notify_all();
  });
}

void PipelineImpl::take_inputs(const StageRuntime& st, Job& job, std::vector<Tensor>* out) const {
  for (int id : st.in_ids) {
    const size_t i = static_cast<size_t>(id);
    out->push_back(job.values[i]);
    // Intermediates go as soon as their last reader has them: a decoded image does not wait in
    // the job while the request sits in later queues.
    if (--job.reads_left[i] == 0 && !is_output[i]) job.values[i] = Tensor();
  }
}

void PipelineImpl::pass_on(StageRuntime& st, ModelDone d) {
  const std::shared_ptr<Job>& job = d.item.job;
  const int64_t ran = d.done_us - d.submit_us;
  Status s = d.response.status;
  std::vector<Tensor> outputs;
  for (size_t i = 0; s.ok() && i < st.model_outputs.size(); ++i) {
    auto it = d.response.outputs.find(st.model_outputs[i]);
    if (it == d.response.outputs.end()) {
      s = internal_error("the model returned no output '" + st.model_outputs[i] + "'");
    } else {
      outputs.push_back(std::move(it->second));
    }
  }
  {
    std::lock_guard<std::mutex> lock(st.mu);
    st.process_window.add(static_cast<double>(ran));
    ++(s.ok() ? st.processed : st.failed);
  }
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->compute_us += ran;
    job->batch_size = d.response.batch_size;
  }
  if (!s.ok()) {
    fail(job, s.with_context("stage '" + st.spec.name + "'"));
    return finish_tokens(job, 1);
  }
  complete(st, job, std::move(outputs));
}

void PipelineImpl::complete(StageRuntime& st, const std::shared_ptr<Job>& job, std::vector<Tensor> outputs) {
  std::vector<int> ready;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    if (!job->responded) {
      for (size_t i = 0; i < outputs.size(); ++i)
        job->values[static_cast<size_t>(st.out_ids[i])] = std::move(outputs[i]);
      for (int c : st.consumers)
        if (--job->waiting[static_cast<size_t>(c)] == 0) ready.push_back(c);
      job->tokens += static_cast<int>(ready.size());
    }
  }
  // Blocks while a consumer's queue is full: backpressure up the DAG.
  for (int c : ready) stages[static_cast<size_t>(c)]->push(QueueItem{job, 0}, -1);
  finish_tokens(job, 1);
}

void PipelineImpl::fail(const std::shared_ptr<Job>& job, Status status) {
  InferResponse r;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    if (job->responded) return;
    job->responded = true;
    r.queue_us = job->queue_us;
    r.compute_us = job->compute_us;
    r.batch_size = job->batch_size;
    // Stages still running hold their own references; nothing else will read these.
    for (auto& v : job->values) v = Tensor();
  }
  r.id = job->id;
  r.status = std::move(status);
  deliver(job, std::move(r));
}

void PipelineImpl::finish_tokens(const std::shared_ptr<Job>& job, int n) {
  bool last = false;
  bool respond = false;
  InferResponse r;
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->tokens -= n;
    last = job->tokens == 0;
    if (last && !job->responded) {
      job->responded = true;
      respond = true;
      for (int id : job->requested)
        r.outputs[tensor_names[static_cast<size_t>(id)]] = job->values[static_cast<size_t>(id)];
      r.queue_us = job->queue_us;
      r.compute_us = job->compute_us;
      r.batch_size = job->batch_size;
      job->values.clear();
    }
  }
  if (respond) {
    r.id = job->id;
    deliver(job, std::move(r));
  }
  if (last) {
    std::lock_guard<std::mutex> lock(mu_);
    if (--in_flight_ == 0) idle_cv_.notify_all();
  }
}

void PipelineImpl::deliver(const std::shared_ptr<Job>& job, InferResponse r) {
  const int64_t total = steady_now_us() - job->start_us;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (r.status.ok()) {
      ++succeeded_;
      total_window_.add(static_cast<double>(total));
    } else {
      ++failed_;
      ++failures_[r.status.code()];
    }
  }
  invoke(job->done, std::move(r));
}

void PipelineImpl::shutdown(ShutdownMode mode) {
  std::lock_guard<std::mutex> serial(shutdown_mu_);
  if (balance_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(balance_wait_mu_);
      balance_stop_ = true;
    }
    balance_cv_.notify_all();
    balance_thread_.join();
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    stopping_ = true;
    if (mode == ShutdownMode::kCancel) cancelling_.store(true);
    idle_cv_.wait(lock, [&] { return in_flight_ == 0; });
  }
  if (joined_) return;
  // A rebalancing window in progress (step_rebalancer on another thread) finishes first; later
  // ones see stopping_ and start no worker.
  std::lock_guard<std::mutex> balance(balance_mu_);
  for (const auto& st : stages) {
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->stop = true;
    }
    st->not_empty.notify_all();
    st->park.notify_all();
  }
  for (const auto& st : stages)
    for (auto& t : st->threads) t.join();
  joined_ = true;
  if (options.rebalance.cores) {
    options.rebalance.cores->release(this);
    std::lock_guard<std::mutex> lock(mu_);
    cores_held_ = 0;
  }
}

PipelineStats PipelineImpl::stats() const {
  PipelineStats p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p.accepted = accepted_;
    p.succeeded = succeeded_;
    p.failed = failed_;
    p.failures = failures_;
    p.total = total_window_.summarize();
    p.in_flight = in_flight_;
    p.rebalance.windows = windows_;
    p.rebalance.moves = moves_;
    p.rebalance.cores = cores_held_;
    p.rebalance.bottleneck = bottleneck_;
    p.rebalance.imbalance = imbalance_;
    p.rebalance.last_hold = last_hold_;
    p.rebalance.recent.assign(recent_.begin(), recent_.end());
  }
  for (const auto& st : stages) {
    StageStats s;
    s.name = st->spec.name;
    s.model = st->is_model;
    s.instances = st->spec.instances;
    s.queue_capacity = st->spec.queue_capacity;
    std::lock_guard<std::mutex> lock(st->mu);
    s.processed = st->processed;
    s.failed = st->failed;
    s.skipped = st->skipped;
    s.queue = st->queue_window.summarize();
    s.process = st->process_window.summarize();
    s.queue_depth = static_cast<int64_t>(st->queue.size());
    s.max_queue_depth = st->max_depth;
    s.blocked_producers = st->blocked_producers;
    s.in_flight = st->in_flight;
    s.workers = workers_of(*st);
    s.max_workers = st->max_workers;
    s.capacity_per_s = st->capacity_per_s;
    s.busy_fraction = st->busy_fraction;
    p.rebalance.workers += s.workers;
    p.stages.push_back(std::move(s));
  }
  p.rebalance.enabled = rebalancing_;
  p.rebalance.worker_budget = worker_budget_;
  return p;
}

}  // namespace runtime

Pipeline::Pipeline(std::unique_ptr<runtime::PipelineImpl> impl) : impl_(std::move(impl)) {}

Pipeline::~Pipeline() {
  if (impl_) impl_->shutdown(ShutdownMode::kDrain);
}

void Pipeline::submit(InferRequest request, InferCallback done) {
  impl_->submit(std::move(request), std::move(done));
}

std::future<InferResponse> Pipeline::submit(InferRequest request) {
  auto promise = std::make_shared<std::promise<InferResponse>>();
  std::future<InferResponse> f = promise->get_future();
  impl_->submit(std::move(request), [promise](InferResponse r) { promise->set_value(std::move(r)); });
  return f;
}

InferResponse Pipeline::infer(InferRequest request) {
  return submit(std::move(request)).get();
}

void Pipeline::shutdown(ShutdownMode mode) {
  impl_->shutdown(mode);
}

PipelineStats Pipeline::stats() const {
  return impl_->stats();
}

std::vector<RebalanceMove> Pipeline::step_rebalancer() {
  return impl_->rebalance_window();
}

const std::vector<std::string>& Pipeline::input_names() const {
  return impl_->input_names;
}
const std::vector<std::string>& Pipeline::output_names() const {
  return impl_->output_names;
}

}  // namespace streamline
