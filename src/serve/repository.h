#pragma once
// The model repository: a folder laid out as Triton users have it, and the lifecycle of each model.
//
//   models/
//     resnet50/config.pbtxt            (optional: derived from the model when missing)
//     resnet50/1/model.onnx
//     resnet50/2/model.onnx            (version_policy picks the versions: the latest by default)
//
//   Repository repo("models", {});
//   repo.load_all();                         // each model loads or fails on its own
//   auto m = repo.get("resnet50");           // Result<std::shared_ptr<LoadedModel>>
//   (*m)->serving->submit(request, done);
//   repo.unload("resnet50");                 // drains it; holders of the shared_ptr finish first
//
// Thread-safe. A LoadedModel stays valid while a shared_ptr to it is held, also after unload.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "serve/generate.h"
#include "serve/model_config.h"
#include "streamline/serving.h"

namespace streamline::serve {

enum class ModelState { kLoading, kReady, kUnavailable, kUnloading };
const char* model_state_name(ModelState s);  // "LOADING", "READY", "UNAVAILABLE", "UNLOADING"

// Per output name: its class labels (label_filename), for the classification extension.
using LabelMap = std::map<std::string, std::vector<std::string>>;

struct LoadedModel {
  ModelConfig config;
  std::shared_ptr<const LabelMap> labels;  // never null; empty when no output has a label file
  std::string version;                     // the folder name, e.g. "1"
  std::string path;                        // the .onnx file
  std::unique_ptr<ServingModel> serving;   // never null in a LoadedModel handed out
  GeneratorSpec generator;                 // enabled: a greedy generator (serve/generate.h)
};

struct RepositoryEntry {
  std::string name;
  std::string version;  // "" when no version folder was found
  ModelState state = ModelState::kUnavailable;
  std::string reason;  // why it is unavailable; "" when ready
};

// How one load goes.
struct LoadOptions {
  // A model configuration in JSON (Triton's load "config" parameter) used instead of the
  // folder's config.pbtxt for this load; "" = the folder's own.
  std::string config_json;
};

struct RepositoryOptions {
  // Defaults applied to every model unless its config says otherwise.
  int default_instances = 1;
  int default_threads = 0;  // intra-op threads per instance; 0 = cores / instances
  // Bounds of every model's latency histograms (ServingOptions::latency_buckets_us); empty =
  // kDefaultLatencyBucketsUs. Read at each load.
  std::vector<double> latency_buckets_us;
  // Cores the controllers of every model share (active instances x threads stay within it);
  // 0 = the cores this process may use. A larger number lets them oversubscribe.
  int core_budget = 0;
  // Cores held but left idle by one model's instances may be lent to another's (CoreBudget);
  // false: a strict budget.
  bool lend_idle_cores = true;
};

// Told of each controller decision of any model (on that model's control thread).
using DecisionListener = std::function<void(const std::string& model, const ControllerDecision& decision)>;

// Adds `from`'s counters, sums and histograms to `into` (a model's counters over its reloads).
// Percentiles, in-flight and queued counts are `from`'s, the live ones.
void accumulate_stats(ServingStats& into, const ServingStats& from);

class Repository {
 public:
  Repository(std::string root, RepositoryOptions options);
  ~Repository();  // unloads everything (drains)

  // Scans the root and loads every model folder. A model that fails is recorded UNAVAILABLE with
  // its reason; the others still load. Returns an error only when the root cannot be read.
  [[nodiscard]] Status load_all();
  // Loads (or reloads, replacing the served one once the new one is ready) one model by folder name.
  [[nodiscard]] Status load(const std::string& name, const LoadOptions& options = {});
  // Stops serving: new requests get NotFound/Unavailable, queued ones are drained.
  [[nodiscard]] Status unload(const std::string& name);

  // NotFound when unknown; Unavailable when known but not ready (with the reason). `version` ""
  // = the highest served version; another version -> NotFound unless it is served.
  [[nodiscard]] Result<std::shared_ptr<LoadedModel>> get(const std::string& name,
                                                         const std::string& version = "") const;
  // Every served version of a model, lowest first (empty when it is not served).
  std::vector<std::shared_ptr<LoadedModel>> versions(const std::string& name) const;
  // Every model folder whose load was tried (loaded or not), sorted by name; a model serving
  // several versions has an entry per version.
  std::vector<RepositoryEntry> index() const;
  // Triton's repository index: index() plus every model folder of the repository not tried yet
  // (explicit model control: not loaded), UNAVAILABLE with the reason "not loaded"; sorted by name.
  std::vector<RepositoryEntry> full_index() const;
  // Every served version of every model, sorted by name and version.
  std::vector<std::shared_ptr<LoadedModel>> ready_models() const;
  // The counters of this model version since the server started: those of every earlier load of
  // the same name and version (reloads, unload and load again) plus `m`'s own. Monotonic.
  ServingStats cumulative_stats(const LoadedModel& m) const;
  const std::string& root() const { return root_; }
  // The core budget every model's controller shares.
  const std::shared_ptr<CoreBudget>& core_budget() const { return budget_; }
  // Sets who hears of controller decisions from now on (models loaded earlier included); an
  // empty function stops it. Thread-safe.
  void set_decision_listener(DecisionListener listener);

 private:
  // Every version the model's version_policy serves, highest first; *version = the highest.
  [[nodiscard]] Result<std::vector<std::shared_ptr<LoadedModel>>> load_model(const std::string& name,
                                                                             const LoadOptions& options,
                                                                             std::string* version) const;
  using Versions = std::map<int64_t, std::shared_ptr<LoadedModel>>;  // by version number
  std::string root_;
  RepositoryOptions options_;
  std::shared_ptr<CoreBudget> budget_;
  mutable std::mutex listener_mu_;
  DecisionListener listener_;
  // Hands a decision to the listener.
  void notify_decision(const std::string& model, const ControllerDecision& d) const;
  mutable std::mutex mu_;    // guards entries_ and models_; never held while loading or draining
  std::mutex lifecycle_mu_;  // one load/unload at a time
  std::map<std::string, RepositoryEntry> entries_;
  std::map<std::string, Versions> models_;
  // Final counters of loads that were replaced or unloaded, by (name, version).
  std::map<std::pair<std::string, std::string>, ServingStats> retired_;
  // Drains `m` and keeps its final counters in retired_.
  void retire(const std::shared_ptr<LoadedModel>& m);
};

}  // namespace streamline::serve
