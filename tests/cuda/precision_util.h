#pragma once
// Helpers for the fp16 / TF32 and fused-op CUDA tests: host fp16 conversion, a runner that picks
// the def by dtype and passes KernelOptions, and the reference output on the values the kernel
// sees (fp16-rounded inputs for fp16).
//
//   TEST(GpuKernelsFp16, Relu) {
//     SL_REQUIRE_GPU();
//     Spec s{"Relu", "", 14, {random_tensor({3, 5}, rng)}, {}};
//     expect_cuda_matches_reference(s, DType::kFloat16, {}, 2e-3);
//   }
//
// Inputs are always given as float32; for a float16 run they are rounded to fp16 on the host,
// uploaded as float16, and the float16 output is widened back before the comparison.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cuda/cuda_test_util.h"

namespace streamline::ops::cuda_test {

// float32 -> float16 (round to nearest even); other dtypes unchanged.
inline Tensor to_fp16(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::kFloat32) return t;
  Tensor h = Tensor::empty(DType::kFloat16, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) h.data<uint16_t>()[i] = float_to_half(t.data<float>()[i]);
  return h;
}
// float16 -> float32 (exact); other dtypes unchanged.
inline Tensor to_fp32(const Tensor& t) {
  if (!t.defined() || t.dtype() != DType::kFloat16) return t;
  Tensor f = Tensor::empty(DType::kFloat32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = half_to_float(t.data<uint16_t>()[i]);
  return f;
}

// One node: op, domain, opset, float32 inputs (undefined = omitted optional input), attributes.
struct Spec {
  std::string op;
  std::string domain;
  int opset = 13;
  std::vector<Tensor> inputs;
  std::map<std::string, graph::Attribute> attrs;

  std::unique_ptr<testing::OneNode> node() const {
    auto n = make_node(op, domain, inputs, attrs);
    n->g.node(n->id).opset = opset;
    return n;
  }
};

// How run_spec runs the kernel.
struct RunSpec {
  DType dtype = DType::kFloat32;  // the def (and the tensors' dtype)
  KernelOptions options;          // options.precision: kTf32 for TF32 runs
  int output_shares_input = -1;   // >= 0: output 0 is written into this input's device buffer
  bool capture_graph = false;     // run once, then again through a captured and replayed CUDA graph
};

// The inputs as the kernel gets them: converted to the run's dtype.
inline std::vector<Tensor> inputs_for(const Spec& s, DType dtype) {
  std::vector<Tensor> in;
  for (const Tensor& t : s.inputs) in.push_back(dtype == DType::kFloat16 ? to_fp16(t) : t);
  return in;
}

// Creates the spec's CUDA kernel for `r.dtype` with `r.options` and reshapes it (host only).
inline Result<Prepared> prepare_spec(const testing::OneNode& n, const Spec& s, const RunSpec& r) {
  const std::vector<Tensor> in = inputs_for(s, r.dtype);
  std::vector<DType> dtypes(in.size(), DType::kUndefined);
  std::vector<TensorInfo> infos(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].defined()) continue;
    infos[i].dtype = dtypes[i] = in[i].dtype();
    infos[i].shape = in[i].shape();
  }
  SL_ASSIGN_OR_RETURN(const KernelDef* def, cuda_reg().find(s.op, s.domain, s.opset, Device::kCuda, r.dtype));
  KernelCreateArgs args{n.g, n.node(), std::vector<const Tensor*>(in.size(), nullptr), dtypes, r.options};
  Prepared p;
  SL_ASSIGN_OR_RETURN(p.kernel, def->create(args));
  SL_ASSIGN_OR_RETURN(p.rr, p.kernel->reshape(infos));
  return p;
}

// Output 0 of the spec's CUDA kernel, widened to float32. Outputs start as NaN bytes so an
// unwritten element fails the comparison.
inline Result<Tensor> run_spec(const Spec& s, const RunSpec& r) {
  auto n = s.node();
  SL_ASSIGN_OR_RETURN(Prepared p, prepare_spec(*n, s, r));
  const std::vector<Tensor> in = inputs_for(s, r.dtype);
  const OutputInfo& o = p.rr.outputs.at(0);
  const size_t out_bytes = static_cast<size_t>(o.shape.numel()) * dtype_size(o.dtype);
  size_t total = p.rr.workspace_bytes + out_bytes + 2 * exec::cuda::kDeviceAlignment;
  for (const Tensor& t : in) total += t.nbytes() + exec::cuda::kDeviceAlignment;
  SL_ASSIGN_OR_RETURN(auto arena, exec::cuda::DeviceArena::create(total));
  SL_ASSIGN_OR_RETURN(exec::cuda::CudaStream stream, exec::cuda::CudaStream::create());
  SL_ASSIGN_OR_RETURN(std::vector<Tensor> dev_in, upload_inputs(*arena, in, stream.get()));
  void* out = nullptr;
  if (r.output_shares_input >= 0) {
    const Tensor& shared = dev_in.at(static_cast<size_t>(r.output_shares_input));
    if (shared.nbytes() != out_bytes) return invalid_argument("the shared input has another size than the output");
    out = shared.raw();
  } else {
    SL_ASSIGN_OR_RETURN(out, arena->take(out_bytes));
    SL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out, 0xFF, out_bytes, stream.get()), "output");
  }
  std::vector<Tensor> dev_out{Tensor::view(o.dtype, o.shape, out)};
  SL_ASSIGN_OR_RETURN(void* ws, arena->take(p.rr.workspace_bytes));
  const RunContext rc = device_run_context(p, dev_in, dev_out, ws, stream.get());
  SL_RETURN_IF_ERROR(p.kernel->run(rc));
  if (r.capture_graph && r.output_shares_input < 0) {
    // The first run made the library handles; now the same run must be capturable (no
    // synchronisation, allocation or blocking copy) and its replay must produce the output again.
    SL_RETURN_IF_ERROR(stream.synchronize());
    SL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out, 0xFF, out_bytes, stream.get()), "output");
    SL_RETURN_IF_ERROR(run_in_cuda_graph(*p.kernel, rc, stream.get()));
  }
  Tensor host = Tensor::empty(o.dtype, o.shape);
  SL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.raw(), out, out_bytes, cudaMemcpyDeviceToHost, stream.get()), "output");
  SL_RETURN_IF_ERROR(stream.synchronize());
  return to_fp32(host);
}

// Output 0 of the plain reference kernel for `ref` on the values a `dtype` kernel sees.
inline Result<Tensor> reference_for(const Spec& ref, DType dtype) {
  std::vector<Tensor> in;
  for (const Tensor& t : ref.inputs) in.push_back(dtype == DType::kFloat16 ? to_fp32(to_fp16(t)) : t);
  auto n = ref.node();
  SL_ASSIGN_OR_RETURN(std::vector<Tensor> out, evaluate_node(testing::ref_reg(), n->g, n->node(), in));
  return out.at(0);
}

// The CUDA kernel of `s` run as `r` against `want`, within rel * max|want|.
inline void expect_cuda_output(const Spec& s, const RunSpec& r, const Tensor& want, double rel) {
  auto got = run_spec(s, r);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_close(*got, want, rel);
}

// The CUDA kernel of `s` run as `r` against the reference kernel of the same node.
inline void expect_cuda_matches_reference(const Spec& s, const RunSpec& r, double rel) {
  auto want = reference_for(s, r.dtype);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  expect_cuda_output(s, r, *want, rel);
}

inline RunSpec as_fp16() {
  RunSpec r;
  r.dtype = DType::kFloat16;
  r.options.precision = Precision::kFp16;
  return r;
}
inline RunSpec as_tf32() {
  RunSpec r;
  r.options.precision = Precision::kTf32;
  return r;
}

}  // namespace streamline::ops::cuda_test
