// Greedy generation: the load-time checks of a generator model and the step loop that runs each
// step as an ordinary request of the core.

#include "serve/generate.h"

#include <cmath>
#include <memory>
#include <utility>

#include "serve/config_params.h"
#include "serve/server_core.h"

namespace streamline::serve {
namespace {

const TensorDesc* find_desc(const std::vector<TensorDesc>& ds, const std::string& name) {
  for (const auto& d : ds)
    if (d.name == name) return &d;
  return nullptr;
}

bool is_id_dtype(DType t) {
  return t == DType::kInt64 || t == DType::kInt32;
}

// An id tensor [1, n] of `dtype` with values f(i).
template <typename F>
Tensor id_tensor(DType dtype, int64_t n, F f) {
  Tensor t = Tensor::empty(dtype, Shape{1, n});
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::kInt64)
      t.data<int64_t>()[i] = f(i);
    else
      t.data<int32_t>()[i] = static_cast<int32_t>(f(i));
  }
  return t;
}

// One generation in progress; keeps itself alive through the callback of its running step.
class Generation : public std::enable_shared_from_this<Generation> {
 public:
  Generation(ServerCore& core, GenerateJob job, GenerateRespond respond)
      : core_(core), job_(std::move(job)), respond_(std::move(respond)), ids_(job_.prompt) {}

  // Queues the next step (or ends the generation when the client is gone).
  void step() {
    if (job_.stopped && job_.stopped())
      return respond_(
          cancelled("generation stopped after " + std::to_string(produced_) + " tokens: the client closed the stream"),
          {}, true);
    const auto n = static_cast<int64_t>(ids_.size());
    const GeneratorSpec& g = job_.spec;
    InferRequest r;
    r.id = job_.id;
    r.inputs.emplace(kInputIds, id_tensor(g.ids_dtype, n, [this](int64_t i) { return ids_[static_cast<size_t>(i)]; }));
    if (g.has_attention_mask) r.inputs.emplace(kAttentionMask, id_tensor(g.mask_dtype, n, [](int64_t) { return 1; }));
    if (g.has_position_ids) r.inputs.emplace(kPositionIds, id_tensor(g.position_dtype, n, [](int64_t i) { return i; }));
    r.requested_outputs = {kLogits};
    r.priority = job_.priority;
    r.timeout_us = job_.timeout_us;
    core_.infer(job_.model, job_.version, std::move(r),
                [self = shared_from_this()](InferResponse out) { self->on_step(std::move(out)); });
  }

 private:
  void on_step(InferResponse r) {
    const std::string at = "generation step " + std::to_string(produced_) + ": ";
    if (!r.status.ok()) return respond_(Status(r.status.code(), at + r.status.message()), {}, true);
    auto it = r.outputs.find(kLogits);
    if (it == r.outputs.end()) return respond_(internal_error(at + "the model returned no logits"), {}, true);
    const Tensor& logits = it->second;
    const Shape& s = logits.shape();
    if (logits.dtype() != DType::kFloat32 || s.rank() != 3 || s[0] != 1 || s[1] < 1 || s[2] < 1)
      return respond_(invalid_argument(at + "logits must be float32 [1, seq, vocab], got " + logits.describe()), {},
                      true);
    const float* last_row = logits.data<float>() + (s[1] - 1) * s[2];
    const GeneratedToken t{.token = argmax(last_row, s[2]), .index = produced_};
    ++produced_;
    ids_.push_back(t.token);
    const bool last = produced_ >= job_.max_new_tokens || t.token == job_.eos_token_id;
    respond_(ok_status(), t, last);
    if (!last) step();
  }

  ServerCore& core_;
  const GenerateJob job_;
  const GenerateRespond respond_;
  std::vector<int64_t> ids_;  // prompt and tokens so far
  int64_t produced_ = 0;
};

}  // namespace

int64_t argmax(const float* values, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (values[i] > values[best] || (std::isnan(values[best]) && !std::isnan(values[i]))) best = i;
  return best;
}

Status check_generate_parameters(const std::map<std::string, std::string>& params, const std::string& where) {
  auto it = params.find("generate");
  if (it != params.end() && it->second != "greedy")
    return invalid_argument(where + ": parameters[\"generate\"]: only \"greedy\" is served, got '" + it->second + "'");
  if (auto m = params.find("max_new_tokens"); m != params.end()) {
    const auto v = parse_config_int(m->second);
    if (!v || *v < 1 || *v > kMaxNewTokensLimit)
      return invalid_argument(where + ": parameters[\"max_new_tokens\"]: expected an integer in [1, " +
                              std::to_string(kMaxNewTokensLimit) + "], got '" + m->second + "'");
  }
  if (auto e = params.find("eos_token_id"); e != params.end()) {
    const auto v = parse_config_int(e->second);
    if (!v || *v < 0)
      return invalid_argument(where + ": parameters[\"eos_token_id\"]: expected an integer >= 0, got '" + e->second +
                              "'");
  }
  return ok_status();
}

Result<GeneratorSpec> generator_spec(const ModelConfig& config, const Model& model) {
  GeneratorSpec g;
  auto it = config.parameters.find("generate");
  if (it == config.parameters.end()) return g;
  // The repository names the model; the values were checked with the configuration already.
  const std::string where = "generate: ";
  SL_RETURN_IF_ERROR(check_generate_parameters(config.parameters, "generate"));
  g.enabled = true;
  if (auto m = config.parameters.find("max_new_tokens"); m != config.parameters.end())
    g.max_new_tokens = *parse_config_int(m->second);
  if (auto e = config.parameters.find("eos_token_id"); e != config.parameters.end())
    g.eos_token_id = *parse_config_int(e->second);
  if (!config.decoupled)
    return invalid_argument(where +
                            "a generator sends a response per token: it needs model_transaction_policy { "
                            "decoupled: true }");
  // Pass 1: inputs. input_ids is required; the server fills attention_mask and position_ids.
  const TensorDesc* ids = find_desc(model.inputs(), kInputIds);
  if (!ids) return invalid_argument(where + "the model has no input 'input_ids'");
  for (const TensorDesc& d : model.inputs()) {
    const bool known = d.name == kInputIds || d.name == kAttentionMask || d.name == kPositionIds;
    if (!known)
      return invalid_argument(where + "input '" + d.name +
                              "' is not one a generator can fill (input_ids, attention_mask, position_ids)");
    if (d.kind != ValueKind::kTensor || !is_id_dtype(d.dtype))
      return invalid_argument(where + "input '" + d.name + "' must be an int64 or int32 tensor, is " +
                              dtype_name(d.dtype));
    if (!d.dims.empty() && d.dims.size() != 2)
      return invalid_argument(where + "input '" + d.name + "' must have rank 2 [batch, seq], has rank " +
                              std::to_string(d.dims.size()));
    if (d.name == kAttentionMask) g.has_attention_mask = true, g.mask_dtype = d.dtype;
    if (d.name == kPositionIds) g.has_position_ids = true, g.position_dtype = d.dtype;
  }
  g.ids_dtype = ids->dtype;
  // Pass 2: the output.
  const TensorDesc* logits = find_desc(model.outputs(), kLogits);
  if (!logits) return invalid_argument(where + "the model has no output 'logits'");
  if (logits->dtype != DType::kFloat32)
    return invalid_argument(where + "output 'logits' must be float32, is " + dtype_name(logits->dtype));
  if (!logits->dims.empty() && logits->dims.size() != 3)
    return invalid_argument(where + "output 'logits' must have rank 3 [batch, seq, vocab], has rank " +
                            std::to_string(logits->dims.size()));
  return g;
}

Result<GenerateJob> generate_job(const std::string& model, const GeneratorSpec& spec, const InferRequest& request,
                                 std::optional<int64_t> max_new_tokens, std::optional<int64_t> eos_token_id) {
  const std::string where = "generator model '" + model + "': ";
  for (const auto& [name, t] : request.inputs)
    if (name != kInputIds)
      return invalid_argument(where + "input '" + name +
                              "' is not read: send only input_ids (the server makes attention_mask and position_ids)");
  auto it = request.inputs.find(kInputIds);
  if (it == request.inputs.end()) return invalid_argument(where + "the request has no input 'input_ids'");
  const Tensor& ids = it->second;
  if (ids.dtype() != spec.ids_dtype || ids.shape().rank() != 2 || ids.shape()[0] != 1 || ids.shape()[1] < 1)
    return invalid_argument(where + "input 'input_ids' must be " + dtype_name(spec.ids_dtype) +
                            " [1, seq] with seq >= 1 (one sequence), got " + ids.describe());
  for (const std::string& o : request.requested_outputs)
    if (o != kTokenOutput && o != kIndexOutput)
      return invalid_argument(where + "output '" + o + "' is not one a generator sends (token, index)");
  const int64_t n = max_new_tokens.value_or(spec.max_new_tokens);
  if (n < 1 || n > kMaxNewTokensLimit)
    return invalid_argument(where + "parameter max_new_tokens must be in [1, " + std::to_string(kMaxNewTokensLimit) +
                            "], got " + std::to_string(n));
  const int64_t eos = eos_token_id.value_or(spec.eos_token_id);
  if (eos < -1)
    return invalid_argument(where + "parameter eos_token_id must be >= 0 (or -1: none), got " + std::to_string(eos));
  GenerateJob job;
  job.model = model;
  job.spec = spec;
  job.id = request.id;
  job.max_new_tokens = n;
  job.eos_token_id = eos;
  job.priority = request.priority;
  job.timeout_us = request.timeout_us;
  job.prompt.resize(static_cast<size_t>(ids.shape()[1]));
  for (size_t i = 0; i < job.prompt.size(); ++i)
    job.prompt[i] = spec.ids_dtype == DType::kInt64 ? ids.data<int64_t>()[i] : ids.data<int32_t>()[i];
  return job;
}

void generate(ServerCore& core, GenerateJob job, GenerateRespond respond) {
  std::make_shared<Generation>(core, std::move(job), std::move(respond))->step();
}

}  // namespace streamline::serve
