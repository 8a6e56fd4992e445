#pragma once
// Greedy autoregressive generation served as a decoupled model: one response per generated token.
//
//   config.pbtxt of an ONNX decoder (input_ids [batch, seq] -> logits [batch, seq, vocab]):
//     model_transaction_policy { decoupled: true }
//     parameters { key: "generate" value: { string_value: "greedy" } }
//     parameters { key: "max_new_tokens" value: { string_value: "32" } }   // default 16
//     parameters { key: "eos_token_id" value: { string_value: "50256" } }  // default: none
//
//   SL_ASSIGN_OR_RETURN(GeneratorSpec g, generator_spec(config, model));  // at load: checks the model
//   generate(core, std::move(job), [](Status s, GeneratedToken t, bool last) { ... });
//
// Each step is one ordinary request through ServerCore::infer (the model's queue and instances),
// so the steps of several generations and other requests interleave: the step of a generation is
// queued behind whatever arrived while the previous one ran. A step takes the prompt and every
// token so far as input_ids ([1, seq], no KV cache), attention_mask of ones and position_ids
// 0..seq-1 when the model has them, and picks the argmax of the logits at the last position. The
// generation ends after max_new_tokens tokens, or with the eos token (which is sent). A failed
// step, a cancellation (the client went away) or a step refused because the server drains ends
// the generation with that error as its last answer. Thread-safe.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "serve/model_config.h"
#include "streamline/serving.h"
#include "streamline/streamline.h"

namespace streamline::serve {

class ServerCore;

// The model's input and output names a generator uses.
inline constexpr const char* kInputIds = "input_ids";
inline constexpr const char* kAttentionMask = "attention_mask";
inline constexpr const char* kPositionIds = "position_ids";
inline constexpr const char* kLogits = "logits";
// The outputs of each response: the token and its 0-based index among the generated ones, both
// INT64 [1, 1].
inline constexpr const char* kTokenOutput = "token";
inline constexpr const char* kIndexOutput = "index";
// Most tokens one request may ask for (config default and request parameter alike).
inline constexpr int64_t kMaxNewTokensLimit = 4096;

// What the configuration and the model say about generation; `enabled` false for other models.
struct GeneratorSpec {
  bool enabled = false;
  // Tokens generated per request unless the request's max_new_tokens says otherwise.
  int64_t max_new_tokens = 16;
  // Generation stops after this token; -1 = none (only max_new_tokens ends it).
  int64_t eos_token_id = -1;
  // The dtype of input_ids (and of attention_mask, position_ids when present): kInt64 or kInt32.
  DType ids_dtype = DType::kInt64;
  DType mask_dtype = DType::kInt64, position_dtype = DType::kInt64;
  bool has_attention_mask = false;
  bool has_position_ids = false;
};

// Reads parameters "generate", "max_new_tokens", "eos_token_id" and checks the model fits:
// input_ids int64/int32 of rank 2, no inputs but attention_mask / position_ids besides, output
// logits float32 of rank 3, and model_transaction_policy decoupled. InvalidArgument naming the
// misfit otherwise (the caller adds the model's name). A model without "generate" gets a disabled
// spec.
[[nodiscard]] Result<GeneratorSpec> generator_spec(const ModelConfig& config, const Model& model);
// Checks the parameters alone (config parsing, before the model is read): known keys, values.
[[nodiscard]] Status check_generate_parameters(const std::map<std::string, std::string>& params,
                                               const std::string& where);

// One token of a generation.
struct GeneratedToken {
  int64_t token = 0;
  int64_t index = 0;  // 0 for the first generated token
};

// Called once per token, in order; `last` is true on the final call. A non-ok status is the
// generation's error (always the last call; the token is then empty).
using GenerateRespond = std::function<void(const Status& status, const GeneratedToken& token, bool last)>;

struct GenerateJob {
  std::string model;
  std::string version;  // the version the first step resolved; every step runs on it
  GeneratorSpec spec;
  uint64_t id = 0;                // the core's request id of every step
  std::vector<int64_t> prompt;    // the request's input_ids (one sequence, at least one token)
  int64_t max_new_tokens = 0;     // in [1, kMaxNewTokensLimit]
  int64_t eos_token_id = -1;      // -1 = none
  std::function<bool()> stopped;  // true once the client is gone: no further step runs (may be empty)
  int priority = -1;              // each step's (the request's): 0 = highest, -1 = the model's default
  int64_t timeout_us = 0;         // each step's queueing budget (the request's); 0 = the policy's
};

// Checks one request for a generator model `model` and makes its job (`version` and `stopped`
// left for the caller): the only input is input_ids [1, seq >= 1] of the model's id dtype; the
// request's max_new_tokens in [1, kMaxNewTokensLimit] and eos_token_id (>= 0, or -1 for none)
// replace the configured ones when given; its priority and timeout hold for every step.
// InvalidArgument naming the misfit otherwise.
[[nodiscard]] Result<GenerateJob> generate_job(const std::string& model, const GeneratorSpec& spec,
                                               const InferRequest& request, std::optional<int64_t> max_new_tokens,
                                               std::optional<int64_t> eos_token_id);

// Runs `job` step by step and answers through `respond` (maybe before this returns). Never throws;
// `respond` gets at least one call and its last call has `last` true.
void generate(ServerCore& core, GenerateJob job, GenerateRespond respond);

// Index of the largest of `n` values (the first of equal ones; NaN never wins unless all are).
int64_t argmax(const float* values, int64_t n);

}  // namespace streamline::serve
