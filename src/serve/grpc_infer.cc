// The gRPC inference path shared by ModelInfer and ModelStreamInfer: decode, the core, encode, and
// the responses of decoupled models.

#include "serve/grpc_infer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serve/echo.h"
#include "serve/generate.h"
#include "serve/grpc_codec.h"

namespace streamline::serve {
namespace {

namespace pb = ::inference;

constexpr const char* kFinalFlag = "triton_final_response";
constexpr const char* kWantFinal = "triton_enable_empty_final_response";

bool wants_empty_final(const pb::ModelInferRequest& req) {
  auto it = req.parameters().find(kWantFinal);
  return it != req.parameters().end() && it->second.parameter_choice_case() == pb::InferParameter::kBoolParam &&
         it->second.bool_param();
}

// An int64 request parameter, if given (tritonclient sends Python ints as int64_param).
Result<std::optional<int64_t>> int_parameter(const pb::ModelInferRequest& req, const char* key) {
  auto it = req.parameters().find(key);
  if (it == req.parameters().end()) return std::optional<int64_t>();
  if (it->second.parameter_choice_case() != pb::InferParameter::kInt64Param)
    return invalid_argument(std::string("request parameter ") + key + " must be an int64");
  return std::optional<int64_t>(it->second.int64_param());
}

// A generator model's request: one response per token, then the empty final one when asked for.
void grpc_generate(ServerCore& core, const pb::ModelInferRequest& req, const InferRequest& request,
                   const GeneratorSpec& spec, pb::ModelInferResponse head, bool empty_final,
                   std::function<bool()> stopped, GrpcRespond respond) {
  Result<std::optional<int64_t>> max_new = int_parameter(req, "max_new_tokens");
  if (!max_new.ok()) return respond(max_new.status(), {}, true);
  Result<std::optional<int64_t>> eos = int_parameter(req, "eos_token_id");
  if (!eos.ok()) return respond(eos.status(), {}, true);
  Result<GenerateJob> job = generate_job(req.model_name(), spec, request, *max_new, *eos);
  if (!job.ok()) return respond(job.status(), {}, true);
  job->version = head.model_version();
  job->stopped = std::move(stopped);
  std::vector<std::string> order = request.requested_outputs;
  if (order.empty()) order = {kTokenOutput, kIndexOutput};
  generate(core, std::move(*job),
           [head = std::move(head), order = std::move(order), empty_final, respond = std::move(respond)](
               const Status& s, const GeneratedToken& t, bool last) {
             if (!s.ok()) return respond(s, {}, true);
             InferResponse r;
             r.status = ok_status();
             r.outputs.emplace(kTokenOutput, Tensor::from_vector<int64_t>(Shape{1, 1}, {t.token}));
             r.outputs.emplace(kIndexOutput, Tensor::from_vector<int64_t>(Shape{1, 1}, {t.index}));
             pb::ModelInferResponse out = head;
             // A response that cannot be encoded still ends the request when it is the last.
             if (Status e = encode_infer_response(r, order, &out); !e.ok()) return respond(e, {}, last);
             (*out.mutable_parameters())[kFinalFlag].set_bool_param(last && !empty_final);
             respond(ok_status(), std::move(out), last && !empty_final);
             if (last && empty_final) {
               pb::ModelInferResponse final_response = head;
               (*final_response.mutable_parameters())[kFinalFlag].set_bool_param(true);
               respond(ok_status(), std::move(final_response), true);
             }
           });
}

}  // namespace

Result<std::vector<InferResponse>> split_rows(const InferResponse& r) {
  int64_t rows = -1;
  for (const auto& [name, t] : r.outputs) {
    if (t.shape().rank() == 0)
      return invalid_argument("decoupled model: output '" + name + "' is a scalar; its responses are rows of dim 0");
    if (rows >= 0 && t.shape()[0] != rows)
      return invalid_argument("decoupled model: output '" + name + "' has " + std::to_string(t.shape()[0]) +
                              " rows, another output " + std::to_string(rows));
    rows = t.shape()[0];
  }
  std::vector<InferResponse> out(static_cast<size_t>(std::max<int64_t>(0, rows)));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].id = r.id;
    out[i].status = ok_status();
    for (const auto& [name, t] : r.outputs) {
      Shape s = t.shape();
      s[0] = 1;
      Tensor part = Tensor::empty(t.dtype(), s);
      if (t.dtype() == DType::kString) {
        // String elements are std::string objects: copied one by one.
        const auto row = static_cast<size_t>(t.numel() / t.shape()[0]);
        std::copy(t.strings() + i * row, t.strings() + (i + 1) * row, part.strings());
      } else {
        const size_t row_bytes = t.nbytes() / static_cast<size_t>(t.shape()[0]);
        std::memcpy(part.raw(), static_cast<const char*>(t.raw()) + i * row_bytes, row_bytes);
      }
      out[i].outputs.emplace(name, std::move(part));
    }
  }
  return out;
}

void grpc_infer(ServerCore& core, const pb::ModelInferRequest& req, uint64_t id, GrpcInferOptions options,
                GrpcRespond respond) {
  InferRequest request;
  request.id = id;
  std::vector<ShmInput> shm_inputs;
  auto shm_outputs = std::make_shared<std::map<std::string, ShmRef>>();
  auto class_counts = std::make_shared<std::map<std::string, int64_t>>();
  if (Status s = decode_infer_request(req, &request, &shm_inputs, shm_outputs.get(), class_counts.get()); !s.ok())
    return respond(s, {}, true);
  if (Status s = core.shared_memory().read_inputs(shm_inputs, &request); !s.ok()) return respond(s, {}, true);
  // Outputs go back in the order asked for, else in the model's order; the response names the
  // version that served it.
  auto order = std::make_shared<std::vector<std::string>>(request.requested_outputs);
  pb::ModelInferResponse head;
  head.set_model_name(req.model_name());
  head.set_model_version(req.model_version());
  head.set_id(req.id());
  bool decoupled = false, batched = false;
  GeneratorSpec generator;
  std::shared_ptr<const LabelMap> labels;
  {
    auto m = core.repository().get(req.model_name(), req.model_version());
    if (m.ok()) {
      head.set_model_version((*m)->version);
      decoupled = (*m)->config.decoupled;
      batched = (*m)->config.max_batch_size > 0;
      labels = (*m)->labels;
      generator = (*m)->generator;
      if (order->empty())
        for (const auto& d : (*m)->serving->model().outputs()) order->push_back(d.name);
    }
  }
  if (decoupled && !options.streaming)
    return respond(unsupported("model '" + echo(req.model_name()) +
                               "' is decoupled (model_transaction_policy): ModelInfer cannot carry its responses; "
                               "use ModelStreamInfer"),
                   {}, true);
  const bool empty_final = decoupled && wants_empty_final(req);
  if (generator.enabled) {
    if (!shm_outputs->empty() || !class_counts->empty())
      return respond(unsupported("generator model '" + echo(req.model_name()) +
                                 "': its outputs cannot go to shared memory or be classified"),
                     {}, true);
    return grpc_generate(core, req, request, generator, std::move(head), empty_final, std::move(options.stopped),
                         std::move(respond));
  }
  std::shared_ptr<ActiveTrace> trace = core.traces().start(req.model_name(), options.traceparent);
  if (trace) {
    request.trace = true;
    trace->note_inputs(request.inputs);
    trace->note_submit(id);
    if (options.on_trace) options.on_trace(trace->traceparent());
  }
  if (decoupled && !shm_outputs->empty())
    return respond(unsupported("decoupled model '" + echo(req.model_name()) +
                               "': its several responses cannot share one output region"),
                   {}, true);
  core.infer(req.model_name(), req.model_version(), std::move(request),
             [&core, order, shm_outputs, class_counts, labels, batched, trace, head = std::move(head), decoupled,
              empty_final, respond_inner = std::move(respond)](InferResponse r) {
               // A traced request is recorded when its last message is out.
               const GrpcRespond respond = [&](const Status& s, pb::ModelInferResponse m, bool last) {
                 respond_inner(s, std::move(m), last);
                 if (last && trace) core.traces().finish(*trace, r, head.model_version());
               };
               if (!r.status.ok()) return respond(r.status, {}, true);
               if (!decoupled) {
                 for (const auto& [name, ref] : *shm_outputs) {
                   auto it = r.outputs.find(name);
                   if (it == r.outputs.end()) continue;
                   if (Status s = core.shared_memory().write_output(name, it->second, ref); !s.ok())
                     return respond(s, {}, true);
                 }
                 std::map<std::string, ClassifiedOutput> classified;
                 for (const auto& [name, k] : *class_counts) {
                   auto it = r.outputs.find(name);
                   if (it == r.outputs.end()) continue;
                   const std::vector<std::string>* l = nullptr;
                   if (labels)
                     if (auto li = labels->find(name); li != labels->end()) l = &li->second;
                   Result<ClassifiedOutput> c = classify(it->second, k, batched, l);
                   if (!c.ok())
                     return respond(Status(c.status().code(), "output '" + name + "': " + c.status().message()), {},
                                    true);
                   classified.emplace(name, std::move(*c));
                 }
                 pb::ModelInferResponse out = head;
                 Status s = encode_infer_response(r, *order, &out, shm_outputs.get(), &classified);
                 return s.ok() ? respond(s, std::move(out), true) : respond(s, {}, true);
               }
               Result<std::vector<InferResponse>> parts = split_rows(r);
               if (!parts.ok()) return respond(parts.status(), {}, true);
               for (size_t i = 0; i < parts->size(); ++i) {
                 pb::ModelInferResponse out = head;
                 if (Status s = encode_infer_response((*parts)[i], *order, &out); !s.ok()) return respond(s, {}, true);
                 const bool last = !empty_final && i + 1 == parts->size();
                 (*out.mutable_parameters())[kFinalFlag].set_bool_param(last);
                 respond(ok_status(), std::move(out), last);
               }
               if (empty_final || parts->empty()) {
                 pb::ModelInferResponse out = head;
                 (*out.mutable_parameters())[kFinalFlag].set_bool_param(true);
                 // Asked for, or the outputs had no rows: the request still gets its one final
                 // (empty) response, so that the client sees it end.
                 respond(ok_status(), std::move(out), true);
               }
             });
}

}  // namespace streamline::serve
