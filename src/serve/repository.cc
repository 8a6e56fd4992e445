// Model repository: folder scan, per-model load (config, version, Model, ServingModel), atomic
// replacement on reload, and draining on unload.

#include "serve/repository.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "core/cpu_set.h"
#include "core/logging.h"
#include "serve/classification.h"

namespace streamline::serve {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfigFile = "config.pbtxt";
constexpr const char* kModelFile = "model.onnx";

// Model names come from clients (load/unload by name): they must name a folder directly under the
// root, never a path out of it.
Status check_name(const std::string& name) {
  if (name.empty()) return invalid_argument("model name is empty");
  if (name.size() > 255) return invalid_argument("model name is longer than 255 characters");
  if (name[0] == '.') return invalid_argument("model name '" + name + "' must not start with '.'");
  for (char c : name)
    if (c == '/' || c == '\\' || c == '\0')
      return invalid_argument("model name '" + name + "' must not contain '/', '\\' or NUL");
  return ok_status();
}

Result<std::string> read_text(const fs::path& path, const std::string& label) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (ec) return not_found(label + ": cannot read: " + ec.message());
  if (size > kMaxConfigBytes)
    return invalid_argument(label + ": " + std::to_string(size) + " bytes; at most " +
                            std::to_string(kMaxConfigBytes >> 20) + " MiB are read");
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(label + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The numeric version folders that hold model.onnx, highest first; folders without it go to
// `without_model`.
std::vector<std::string> version_folders(const fs::path& dir, std::vector<std::string>* without_model) {
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string v = it->path().filename().string();
    std::error_code e2;
    if (!all_digits(v) || !it->is_directory(e2)) continue;
    if (!fs::is_regular_file(it->path() / kModelFile, e2)) {
      without_model->push_back(v);
      continue;
    }
    found.push_back(v);
  }
  std::sort(found.begin(), found.end(),
            [](const std::string& a, const std::string& b) { return std::stoll(a) > std::stoll(b); });
  return found;
}

// Messages name files by their place in the repository ("tiny/1/model.onnx"), never by where the
// repository lies on this machine: clients see them.
Status relative_to(const std::string& root, const Status& s) {
  const std::string prefix = (fs::path(root) / "").string();
  std::string m = s.message();
  for (size_t at = m.find(prefix); at != std::string::npos; at = m.find(prefix, at)) m.erase(at, prefix.size());
  return Status(s.code(), std::move(m));
}

}  // namespace

void accumulate_stats(ServingStats& into, const ServingStats& from) {
  into.accepted += from.accepted;
  into.succeeded += from.succeeded;
  into.failed += from.failed;
  for (const auto& [code, n] : from.failures) into.failures[code] += n;
  const auto summary = [](LatencySummary& a, const LatencySummary& b) {
    a.count += b.count;
    a.sum_us += b.sum_us;
    a.p50_us = b.p50_us;
    a.p90_us = b.p90_us;
    a.p99_us = b.p99_us;
  };
  summary(into.queue, from.queue);
  summary(into.compute, from.compute);
  summary(into.total, from.total);
  summary(into.compute_input, from.compute_input);
  summary(into.compute_infer, from.compute_infer);
  summary(into.compute_output, from.compute_output);
  const auto hist = [](LatencyHistogram& a, const LatencyHistogram& b) {
    if (a.count == 0 && a.bounds_us != b.bounds_us) a = LatencyHistogram(b.bounds_us);  // first, or new buckets
    (void)a.merge(b);
  };
  hist(into.total_hist, from.total_hist);
  hist(into.queue_hist, from.queue_hist);
  hist(into.compute_input_hist, from.compute_input_hist);
  hist(into.compute_infer_hist, from.compute_infer_hist);
  hist(into.compute_output_hist, from.compute_output_hist);
  for (const auto& [b, n] : from.batch_size_hist) into.batch_size_hist[b] += n;
  for (const auto& [b, t] : from.batch_timing) {
    BatchTiming& x = into.batch_timing[b];
    x.runs += t.runs;
    x.input_us += t.input_us;
    x.infer_us += t.infer_us;
    x.output_us += t.output_us;
  }
  into.batches += from.batches;
  into.in_flight = from.in_flight;
  into.queued = from.queued;
  if (into.instance_busy_us.size() < from.instance_busy_us.size())
    into.instance_busy_us.resize(from.instance_busy_us.size(), 0);
  for (size_t i = 0; i < from.instance_busy_us.size(); ++i) into.instance_busy_us[i] += from.instance_busy_us[i];
  // The controller: decisions add up over loads; what is in force is the live load's.
  std::map<std::pair<std::string, std::string>, uint64_t> decisions = std::move(into.controller.decisions);
  for (const auto& [k, n] : from.controller.decisions) decisions[k] += n;
  into.controller = from.controller;
  into.controller.decisions = std::move(decisions);
}

const char* model_state_name(ModelState s) {
  switch (s) {
    case ModelState::kLoading:
      return "LOADING";
    case ModelState::kReady:
      return "READY";
    case ModelState::kUnavailable:
      return "UNAVAILABLE";
    case ModelState::kUnloading:
      return "UNLOADING";
  }
  return "UNAVAILABLE";
}

Repository::Repository(std::string root, RepositoryOptions options)
    : root_(std::move(root)),
      options_(options),
      budget_(std::make_shared<CoreBudget>(options.core_budget, options.lend_idle_cores)) {}

void Repository::set_decision_listener(DecisionListener listener) {
  std::lock_guard<std::mutex> lock(listener_mu_);
  listener_ = std::move(listener);
}

void Repository::notify_decision(const std::string& model, const ControllerDecision& d) const {
  std::lock_guard<std::mutex> lock(listener_mu_);
  if (listener_) listener_(model, d);
}

Repository::~Repository() {
  std::map<std::string, Versions> models;
  {
    std::lock_guard<std::mutex> lock(mu_);
    models.swap(models_);
  }
  for (auto& [name, vs] : models)
    for (auto& [v, m] : vs) m->serving->shutdown(ShutdownMode::kDrain);
}

void Repository::retire(const std::shared_ptr<LoadedModel>& m) {
  m->serving->shutdown(ShutdownMode::kDrain);
  const ServingStats last = m->serving->stats();
  std::lock_guard<std::mutex> lock(mu_);
  ServingStats& r = retired_[{m->config.name, m->version}];
  accumulate_stats(r, last);
  r.in_flight = r.queued = 0;
}

ServingStats Repository::cumulative_stats(const LoadedModel& m) const {
  const ServingStats live = m.serving->stats();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = retired_.find({m.config.name, m.version});
  if (it == retired_.end()) return live;
  ServingStats total = it->second;
  accumulate_stats(total, live);
  return total;
}

Status Repository::load_all() {
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return not_found("model repository '" + root_ + "' is not a readable folder");
  std::vector<std::string> names;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    const std::string n = it->path().filename().string();
    if (it->is_directory(e2) && check_name(n).ok()) names.push_back(n);
  }
  if (ec) return unavailable("model repository '" + root_ + "': " + ec.message());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    Status s = load(n);
    if (!s.ok()) {
      SL_LOG(kWarning) << "unavailable: " << s.message();
    }
  }
  return ok_status();
}

Result<std::vector<std::shared_ptr<LoadedModel>>> Repository::load_model(const std::string& name,
                                                                         const LoadOptions& options,
                                                                         std::string* version) const {
  const fs::path dir = fs::path(root_) / name;
  std::error_code ec;

  // Pass 1: config.pbtxt, when there is one (cheap, and its errors need no model).
  ModelConfig config;
  const bool override_config = !options.config_json.empty();
  const bool have_config = override_config || fs::exists(dir / kConfigFile, ec);
  // Errors name the file by its path in the repository (or the override).
  const std::string config_label = override_config ? "the load request's config" : name + "/" + kConfigFile;
  if (override_config) {
    SL_ASSIGN_OR_RETURN(config, parse_model_config_json(options.config_json, config_label));
    if (!config.name.empty() && config.name != name)
      return invalid_argument(config_label + ": name '" + config.name + "' does not match the model '" + name + "'");
  } else if (have_config) {
    SL_ASSIGN_OR_RETURN(std::string text, read_text(dir / kConfigFile, config_label));
    SL_ASSIGN_OR_RETURN(config, parse_model_config(text, config_label));
    if (!config.name.empty() && config.name != name)
      return invalid_argument(config_label + ": name '" + config.name + "' does not match the model folder '" + name +
                              "'");
  }
  config.name = name;
  if (!config.instance_group_given) config.instance_count = std::max(1, options_.default_instances);

  // Pass 2: the versions to serve (version_policy), highest first.
  std::vector<std::string> empty_versions;
  std::vector<std::string> available = version_folders(dir, &empty_versions);
  if (available.empty()) {
    std::string msg =
        "no version folder holding " + std::string(kModelFile) + " (expected " + name + "/<n>/" + kModelFile + ")";
    if (!empty_versions.empty()) msg += "; version folder " + empty_versions.front() + " has none";
    return not_found(msg);
  }
  std::vector<std::string> chosen;
  if (config.version_policy == VersionPolicyKind::kAll) {
    chosen = available;
  } else if (config.version_policy == VersionPolicyKind::kSpecific) {
    for (int64_t v : config.specific_versions) {
      const std::string want = std::to_string(v);
      if (std::find(available.begin(), available.end(), want) == available.end())
        return not_found(config_label + ": version_policy lists version " + want + " but " + name + "/" + want + "/" +
                         kModelFile + " does not exist");
      if (std::find(chosen.begin(), chosen.end(), want) == chosen.end()) chosen.push_back(want);
    }
    std::sort(chosen.begin(), chosen.end(),
              [](const std::string& x, const std::string& y) { return std::stoll(x) > std::stoll(y); });
  } else {
    chosen.assign(available.begin(),
                  available.begin() + std::min<size_t>(available.size(), static_cast<size_t>(config.latest_versions)));
  }
  *version = chosen.front();

  // Pass 3: each version's model, its configuration completed (or derived) against it, labels and
  // serving (plans for the batch sizes, instance threads, warm-up). Plans use the threads each
  // instance will have.
  ModelOptions mo = model_options(config);
  ServingOptions probe = serving_options(config);
  const int threads = core::share_threads(
      probe.threads_per_instance > 0 ? probe.threads_per_instance : options_.default_threads, 0, config.instance_count);
  // A controlled model's instances share its cores (one alone runs on all of them; `threads` is
  // then each one's least): its plans are made for the most threads one instance may get, the
  // instances' cores within the budget.
  if (probe.controller.enabled && !probe.pin)
    mo.num_threads =
        std::max(mo.num_threads, core::shared_instance_threads(threads, config.instance_count, budget_->cores()));
  else if (mo.num_threads == 0)
    mo.num_threads = threads;
  std::vector<std::shared_ptr<LoadedModel>> out;
  for (const std::string& v : chosen) {
    const std::string path = (dir / v / kModelFile).string();
    SL_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, Model::load(path, mo));
    ModelConfig vc = config;
    if (have_config) {
      SL_RETURN_IF_ERROR(complete_config(vc, *model).with_context(config_label + " (version " + v + ")"));
    } else {
      ModelConfig derived = derive_model_config(name, *model);
      derived.instance_count = config.instance_count;
      vc = std::move(derived);
    }
    Result<GeneratorSpec> generator = generator_spec(vc, *model);
    if (!generator.ok()) return generator.status().with_context(config_label);
    auto labels = std::make_shared<LabelMap>();
    for (const TensorConfig& t : vc.outputs) {
      if (t.label_filename.empty()) continue;
      const std::string label = name + "/" + t.label_filename;
      if (t.label_filename.find("..") != std::string::npos || t.label_filename.front() == '/')
        return invalid_argument(config_label + ": output '" + t.name + "': label_filename must name a file in " + name +
                                "/");
      SL_ASSIGN_OR_RETURN(auto l, read_labels((dir / t.label_filename).string(), label));
      (*labels)[t.name] = std::move(l);
    }
    ServingOptions so = serving_options(vc);
    so.threads_per_instance = threads;
    so.latency_buckets_us = options_.latency_buckets_us;
    so.controller.budget = budget_;
    so.controller.on_decision = [this, name](const ControllerDecision& d) { notify_decision(name, d); };
    SL_ASSIGN_OR_RETURN(std::unique_ptr<ServingModel> serving, ServingModel::create(model, so));
    auto loaded = std::make_shared<LoadedModel>();
    loaded->config = std::move(vc);
    loaded->labels = std::move(labels);
    loaded->version = v;
    loaded->path = path;
    loaded->serving = std::move(serving);
    loaded->generator = *generator;
    out.push_back(std::move(loaded));
  }
  return out;
}

Status Repository::load(const std::string& name, const LoadOptions& options) {
  SL_RETURN_IF_ERROR(check_name(name));
  std::lock_guard<std::mutex> lifecycle(lifecycle_mu_);
  std::error_code ec;
  if (!fs::is_directory(fs::path(root_) / name, ec))
    return not_found("no model folder '" + name + "' in the model repository");
  bool serving_old = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RepositoryEntry& e = entries_[name];
    e.name = name;
    serving_old = models_.count(name) > 0;
    if (!serving_old) {
      e.state = ModelState::kLoading;
      e.reason.clear();
    }
  }
  std::string version;
  Result<std::vector<std::shared_ptr<LoadedModel>>> loaded = load_model(name, options, &version);
  if (!loaded.ok()) loaded = relative_to(root_, loaded.status());
  Versions old;
  std::string served;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RepositoryEntry& e = entries_[name];
    if (!loaded.ok()) {
      // A failed reload leaves the served versions in place.
      if (!serving_old) {
        e.state = ModelState::kUnavailable;
        e.version = version;
        e.reason = loaded.status().message();
      }
      return loaded.status().with_context("model '" + name + "'");
    }
    auto it = models_.find(name);
    if (it != models_.end()) old = std::move(it->second);
    Versions& now = models_[name];
    now.clear();
    for (auto& m : *loaded) {
      served += (served.empty() ? "" : ", ") + m->version;
      now.emplace(std::stoll(m->version), std::move(m));
    }
    e.state = ModelState::kReady;
    e.version = version;
    e.reason.clear();
  }
  // Requests already queued on the old versions finish there; new ones go to the new ones.
  for (auto& [v, m] : old) retire(m);
  SL_LOG(kInfo) << "model '" << name << "' version " << served << " is ready";
  return ok_status();
}

Status Repository::unload(const std::string& name) {
  std::lock_guard<std::mutex> lifecycle(lifecycle_mu_);
  Versions gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto e = entries_.find(name);
    if (e == entries_.end()) return not_found("unknown model '" + name + "'");
    auto it = models_.find(name);
    if (it == models_.end()) return ok_status();  // not served: nothing to stop
    gone = std::move(it->second);
    models_.erase(it);
    e->second.state = ModelState::kUnloading;
  }
  for (auto& [v, m] : gone) retire(m);
  {
    std::lock_guard<std::mutex> lock(mu_);
    RepositoryEntry& e = entries_[name];
    e.state = ModelState::kUnavailable;
    e.reason = "unloaded";
  }
  return ok_status();
}

Result<std::shared_ptr<LoadedModel>> Repository::get(const std::string& name, const std::string& version) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it != models_.end() && !it->second.empty()) {
    const Versions& vs = it->second;
    if (version.empty()) return vs.rbegin()->second;  // the highest served
    for (const auto& [v, m] : vs)
      if (m->version == version) return m;
    std::string list;
    for (const auto& [v, m] : vs) list += (list.empty() ? "" : ", ") + m->version;
    return not_found("model '" + name + "' has no version '" + version + "' being served (it serves version " + list +
                     ")");
  }
  auto e = entries_.find(name);
  if (e == entries_.end()) return not_found("unknown model '" + name + "'");
  std::string msg = "model '" + name + "' is " + model_state_name(e->second.state);
  if (!e->second.reason.empty()) msg += ": " + e->second.reason;
  return unavailable(msg);
}

std::vector<std::shared_ptr<LoadedModel>> Repository::versions(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<LoadedModel>> out;
  if (auto it = models_.find(name); it != models_.end())
    for (const auto& [v, m] : it->second) out.push_back(m);
  return out;
}

std::vector<RepositoryEntry> Repository::index() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RepositoryEntry> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) {
    auto it = models_.find(name);
    if (e.state != ModelState::kReady || it == models_.end() || it->second.size() < 2) {
      out.push_back(e);
      continue;
    }
    for (const auto& [v, m] : it->second) {  // one entry per served version, lowest first
      RepositoryEntry per = e;
      per.version = m->version;
      out.push_back(std::move(per));
    }
  }
  return out;
}

std::vector<RepositoryEntry> Repository::full_index() const {
  // index() is sorted by name with a model's versions lowest first; folders not tried yet join it.
  std::vector<RepositoryEntry> out = index();
  std::set<std::string> tried;
  for (const RepositoryEntry& e : out) tried.insert(e.name);
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    const std::string n = it->path().filename().string();
    if (!it->is_directory(e2) || !check_name(n).ok() || tried.count(n)) continue;
    RepositoryEntry e;
    e.name = n;
    e.state = ModelState::kUnavailable;
    e.reason = "not loaded";
    std::vector<std::string> without;
    const std::vector<std::string> versions = version_folders(it->path(), &without);
    e.version = versions.empty() ? "" : versions.front();
    out.push_back(std::move(e));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RepositoryEntry& a, const RepositoryEntry& b) { return a.name < b.name; });
  return out;
}

std::vector<std::shared_ptr<LoadedModel>> Repository::ready_models() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<LoadedModel>> out;
  for (const auto& [name, vs] : models_)
    for (const auto& [v, m] : vs) out.push_back(m);
  return out;
}

}  // namespace streamline::serve
