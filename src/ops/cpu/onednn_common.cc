#include "ops/cpu/onednn_common.h"

#include <omp.h>

#include <algorithm>

#include "ops/cpu/task_runner.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {}  // namespace streamline::ops::cpu

namespace streamline::ops {

int native_block() {
  static const int block = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    switch (isa) {
      case dnnl::cpu_isa::avx512_core:
      case dnnl::cpu_isa::avx512_core_vnni:
      case dnnl::cpu_isa::avx512_core_bf16:
      case dnnl::cpu_isa::avx512_core_amx:
        return 16;
      default:
        return 8;
    }
  }();
  return block;
}

}  // namespace streamline::ops

namespace streamline::ops::cpu {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

Status dnnl_error_status(const dnnl::error& e, const std::string& what) {
  if (e.status == dnnl_unimplemented) return unsupported(what + ": oneDNN has no implementation (" + e.what() + ")");
  return internal_error(what + ": oneDNN error " + std::to_string(static_cast<int>(e.status)) + " (" + e.what() + ")");
}

void ensure_omp_threads(int n) {
  if (n < 1) n = 1;
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

int current_omp_threads() {
  return omp_get_max_threads();
}

OmpThreadsGuard::OmpThreadsGuard(int n) : saved_(omp_get_max_threads()) {
  ensure_omp_threads(n);
}
OmpThreadsGuard::~OmpThreadsGuard() {
  ensure_omp_threads(saved_);
}

Result<Activation> parse_activation(const graph::Node& node) {
  SL_ASSIGN_OR_RETURN(ActivationAttrs a, read_activation(node, /*allow_gelu=*/false));
  return to_backend_activation<Activation>(a);
}

void append_activation(dnnl::post_ops& po, const Activation& act) {
  using dnnl::algorithm;
  switch (act.kind) {
    case ActKind::kNone:
      break;
    case ActKind::kRelu:
      po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
      break;
    case ActKind::kLeakyRelu:
      po.append_eltwise(1.f, algorithm::eltwise_relu, act.alpha, 0.f);
      break;
    case ActKind::kClip:
      po.append_eltwise(1.f, algorithm::eltwise_clip_v2, act.alpha, act.beta);
      break;
    case ActKind::kSigmoid:
      po.append_eltwise(1.f, algorithm::eltwise_logistic, 0.f, 0.f);
      break;
    case ActKind::kTanh:
      po.append_eltwise(1.f, algorithm::eltwise_tanh, 0.f, 0.f);
      break;
    case ActKind::kHardSigmoid:
      // max(0, min(1, alpha * x + beta)): oneDNN 2.6 has no hardsigmoid, so linear then clip.
      po.append_eltwise(1.f, algorithm::eltwise_linear, act.alpha, act.beta);
      po.append_eltwise(1.f, algorithm::eltwise_clip_v2, 0.f, 1.f);
      break;
  }
}

dnnl::memory::desc plain_md(const dnnl::memory::dims& dims) {
  dnnl::memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * std::max<dnnl::memory::dim>(dims[i], 1);
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

dnnl::memory::desc permuted_md(const dnnl::memory::dims& dims, const std::vector<int>& order) {
  dnnl::memory::dims strides(dims.size(), 1);
  dnnl::memory::dim s = 1;
  for (size_t i = order.size(); i-- > 0;) {
    strides[static_cast<size_t>(order[i])] = s;
    s *= std::max<dnnl::memory::dim>(dims[static_cast<size_t>(order[i])], 1);
  }
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

dnnl::memory::dims to_dims(const Shape& s) {
  return dnnl::memory::dims(s.begin(), s.end());
}

Status reorder_into(const dnnl::memory::desc& src_md, const void* src, const dnnl::memory::desc& dst_md, void* dst) {
  try {
    dnnl::memory s = wrap(src_md, src);
    dnnl::memory d(dst_md, cpu_engine(), dst);
    dnnl::reorder(s, d).execute(thread_stream(), s, d);
    thread_stream().wait();
  } catch (const dnnl::error& e) {
    return dnnl_error_status(e, "weights reorder");
  }
  return ok_status();
}

Result<std::shared_ptr<AlignedBuffer>> reorder_to_buffer(const dnnl::memory::desc& src_md, const void* src,
                                                         const dnnl::memory::desc& dst_md) {
  auto buf = AlignedBuffer::allocate(dst_md.get_size());
  if (!buf)
    return resource_exhausted("weights reorder: out of memory for " + std::to_string(dst_md.get_size()) + " bytes");
  SL_RETURN_IF_ERROR(reorder_into(src_md, src, dst_md, buf->data()));
  return buf;
}

Status resolve_weights(BuiltPrimitive& p, int num_threads, const dnnl::memory::desc& user_md, bool constant,
                       const PackedWeights& packed, const void* plain, const std::string& who) {
  if (p.weights_md == user_md) {
    p.weights_source = WeightsSource::kInput;
  } else if (constant) {
    if (packed.buf && p.weights_md == packed.md) {
      p.weights_source = WeightsSource::kKernelPacked;
      return ok_status();
    }
    const bool from_packed = packed.buf != nullptr;
    if (!from_packed && !plain) return internal_error(who + ": constant weights unavailable for prepacking");
    OmpThreadsGuard guard(num_threads);
    SL_ASSIGN_OR_RETURN(p.packed_weights, reorder_to_buffer(from_packed ? packed.md : user_md,
                                                            from_packed ? packed.buf->data() : plain, p.weights_md));
    p.weights_source = WeightsSource::kBuiltPacked;
  } else {
    OmpThreadsGuard guard(num_threads);
    try {
      const auto& eng = cpu_engine();
      p.weights_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, user_md, eng, p.weights_md));
    } catch (const dnnl::error& e) {
      return dnnl_error_status(e, who + ": weights reorder");
    }
    p.weights_source = WeightsSource::kWorkspace;
  }
  return ok_status();
}

Result<const void*> run_weights(const BuiltPrimitive& p, const dnnl::memory::desc& user_md, const void* input,
                                const PackedWeights& packed, void* ws, size_t ws_bytes, const std::string& who) {
  switch (p.weights_source) {
    case WeightsSource::kKernelPacked:
      return static_cast<const void*>(packed.buf->data());
    case WeightsSource::kBuiltPacked:
      return static_cast<const void*>(p.packed_weights->data());
    case WeightsSource::kWorkspace: {
      if (p.weights_md.get_size() > ws_bytes) return internal_error(who + ": workspace too small for weights");
      try {
        dnnl::memory src = wrap(user_md, input);
        dnnl::memory dst(p.weights_md, cpu_engine(), ws);
        p.weights_reorder->execute(thread_stream(), src, dst);
      } catch (const dnnl::error& e) {
        return dnnl_error_status(e, who + ": weights reorder");
      }
      return static_cast<const void*>(ws);
    }
    default:
      return input;
  }
}

Status execute(const BuiltPrimitive& p, std::unordered_map<int, dnnl::memory>& args, void* workspace) {
  try {
    if (p.user_scratchpad && p.scratchpad_bytes > 0) {
      dnnl::memory::desc md({static_cast<dnnl::memory::dim>(p.scratchpad_bytes)}, dnnl::memory::data_type::u8,
                            dnnl::memory::format_tag::a);
      args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(md, cpu_engine(), workspace));
    }
    dnnl::stream& s = thread_stream();
    p.prim.execute(s, args);
    s.wait();
    if (omp_get_max_threads() > 1 && !omp_in_parallel()) note_openmp_region();
  } catch (const dnnl::error& e) {
    return dnnl_error_status(e, "oneDNN execute");
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu
