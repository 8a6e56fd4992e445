// Model repository: folder scan, per-model load (config, version, Model, ServingModel), atomic
// replacement on reload, and draining on unload.

#include "serve/repository.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/cpu_set.h"
#include "core/logging.h"

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

// The highest numeric version folder that holds model.onnx; "" when none does.
std::string served_version(const fs::path& dir, std::vector<std::string>* without_model) {
  std::string best;
  int64_t best_v = -1;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string v = it->path().filename().string();
    std::error_code e2;
    if (!all_digits(v) || !it->is_directory(e2)) continue;
    if (!fs::is_regular_file(it->path() / kModelFile, e2)) {
      without_model->push_back(v);
      continue;
    }
    const int64_t n = std::stoll(v);
    if (n > best_v) {
      best_v = n;
      best = v;
    }
  }
  return best;
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

Repository::Repository(std::string root, RepositoryOptions options) : root_(std::move(root)), options_(options) {}

Repository::~Repository() {
  std::map<std::string, std::shared_ptr<LoadedModel>> models;
  {
    std::lock_guard<std::mutex> lock(mu_);
    models.swap(models_);
  }
  for (auto& [name, m] : models) m->serving->shutdown(ShutdownMode::kDrain);
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

Result<std::shared_ptr<LoadedModel>> Repository::load_model(const std::string& name, std::string* version) const {
  const fs::path dir = fs::path(root_) / name;
  std::error_code ec;

  // Pass 1: config.pbtxt, when there is one (cheap, and its errors need no model).
  ModelConfig config;
  const bool have_config = fs::exists(dir / kConfigFile, ec);
  // Errors name the file by its path in the repository.
  const std::string config_label = name + "/" + kConfigFile;
  if (have_config) {
    SL_ASSIGN_OR_RETURN(std::string text, read_text(dir / kConfigFile, config_label));
    SL_ASSIGN_OR_RETURN(config, parse_model_config(text, config_label));
    if (!config.name.empty() && config.name != name)
      return invalid_argument(config_label + ": name '" + config.name + "' does not match the model folder '" + name +
                              "'");
  }
  config.name = name;
  if (!config.instance_group_given) config.instance_count = std::max(1, options_.default_instances);

  // Pass 2: the version to serve.
  std::vector<std::string> empty_versions;
  *version = served_version(dir, &empty_versions);
  if (version->empty()) {
    std::string msg =
        "no version folder holding " + std::string(kModelFile) + " (expected " + name + "/<n>/" + kModelFile + ")";
    if (!empty_versions.empty()) msg += "; version folder " + empty_versions.front() + " has none";
    return not_found(msg);
  }
  const std::string path = (dir / *version / kModelFile).string();

  // Pass 3: the model. Plans use the threads each instance will have.
  ModelOptions mo = model_options(config);
  ServingOptions probe = serving_options(config);
  const int threads = core::share_threads(
      probe.threads_per_instance > 0 ? probe.threads_per_instance : options_.default_threads, 0, config.instance_count);
  if (mo.num_threads == 0) mo.num_threads = threads;
  SL_ASSIGN_OR_RETURN(std::shared_ptr<Model> model, Model::load(path, mo));

  // Pass 4: the configuration completed (or derived) against the model.
  if (have_config) {
    SL_RETURN_IF_ERROR(complete_config(config, *model).with_context(config_label));
  } else {
    ModelConfig derived = derive_model_config(name, *model);
    derived.instance_count = config.instance_count;
    config = std::move(derived);
  }

  // Pass 5: serving (plans for the batch sizes, instance threads, warm-up).
  ServingOptions so = serving_options(config);
  so.threads_per_instance = threads;
  SL_ASSIGN_OR_RETURN(std::unique_ptr<ServingModel> serving, ServingModel::create(model, so));
  auto loaded = std::make_shared<LoadedModel>();
  loaded->config = std::move(config);
  loaded->version = *version;
  loaded->path = path;
  loaded->serving = std::move(serving);
  return loaded;
}

Status Repository::load(const std::string& name) {
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
  Result<std::shared_ptr<LoadedModel>> loaded = load_model(name, &version);
  if (!loaded.ok()) loaded = relative_to(root_, loaded.status());
  std::shared_ptr<LoadedModel> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RepositoryEntry& e = entries_[name];
    if (!loaded.ok()) {
      // A failed reload leaves the served version in place.
      if (!serving_old) {
        e.state = ModelState::kUnavailable;
        e.version = version;
        e.reason = loaded.status().message();
      }
      return loaded.status().with_context("model '" + name + "'");
    }
    auto it = models_.find(name);
    if (it != models_.end()) old = std::move(it->second);
    models_[name] = *loaded;
    e.state = ModelState::kReady;
    e.version = version;
    e.reason.clear();
  }
  // Requests already queued on the old version finish there; new ones go to the new one.
  if (old) old->serving->shutdown(ShutdownMode::kDrain);
  SL_LOG(kInfo) << "model '" << name << "' version " << version << " is ready";
  return ok_status();
}

Status Repository::unload(const std::string& name) {
  std::lock_guard<std::mutex> lifecycle(lifecycle_mu_);
  std::shared_ptr<LoadedModel> m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto e = entries_.find(name);
    if (e == entries_.end()) return not_found("unknown model '" + name + "'");
    auto it = models_.find(name);
    if (it == models_.end()) return ok_status();  // not served: nothing to stop
    m = std::move(it->second);
    models_.erase(it);
    e->second.state = ModelState::kUnloading;
  }
  m->serving->shutdown(ShutdownMode::kDrain);
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
  if (it != models_.end()) {
    if (!version.empty() && version != it->second->version)
      return not_found("model '" + name + "' has no version '" + version + "' being served (it serves version " +
                       it->second->version + ")");
    return it->second;
  }
  auto e = entries_.find(name);
  if (e == entries_.end()) return not_found("unknown model '" + name + "'");
  std::string msg = "model '" + name + "' is " + model_state_name(e->second.state);
  if (!e->second.reason.empty()) msg += ": " + e->second.reason;
  return unavailable(msg);
}

std::vector<RepositoryEntry> Repository::index() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RepositoryEntry> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(e);
  return out;
}

std::vector<std::shared_ptr<LoadedModel>> Repository::ready_models() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<LoadedModel>> out;
  out.reserve(models_.size());
  for (const auto& [name, m] : models_) out.push_back(m);
  return out;
}

}  // namespace streamline::serve
