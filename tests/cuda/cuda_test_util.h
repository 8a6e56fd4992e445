#pragma once
// Helpers for the CUDA tests: the GPU check that skips a test, the CUDA kernel registry, and a
// runner that executes one node's CUDA kernel on device copies of host inputs.
//
//   TEST(GpuKernels, Relu) {
//     SL_REQUIRE_GPU();
//     expect_matches_reference("Relu", "", 14, {random_tensor({3, 5}, rng)}, {}, 1e-6);
//   }
//
// Test suites named Gpu* need a GPU (ctest label gpu); the others run anywhere (label unit).

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/cuda/cuda_status.h"
#include "exec/cuda/device.h"
#include "exec/cuda/memory.h"
#include "exec/cuda/stream.h"
#include "ops/cuda/cuda_kernels.h"
#include "ops/op_test_util.h"

// Skips the current test, with the reason, unless a usable CUDA device is present.
#define SL_REQUIRE_GPU()                                                             \
  do {                                                                               \
    const ::streamline::Status sl_gpu_ = ::streamline::exec::cuda::require_device(); \
    if (!sl_gpu_.ok()) GTEST_SKIP() << "needs a CUDA GPU: " << sl_gpu_.message();    \
  } while (0)

namespace streamline::ops::cuda_test {

using testing::floats;
using testing::ints;
using testing::make_node;
using testing::one_int;
using testing::random_tensor;
using testing::str;

inline const KernelRegistry& cuda_reg() {
  static const KernelRegistry* r = [] {
    auto* reg = new KernelRegistry();
    EXPECT_TRUE(cuda::register_cuda_kernels(*reg).ok());
    return reg;
  }();
  return *r;
}

// Creates the node's CUDA kernel and reshapes it for `inputs` (host only; no device needed).
struct Prepared {
  std::unique_ptr<Kernel> kernel;
  ReshapeResult rr;
};
inline Result<Prepared> prepare_cuda(const graph::Graph& g, const graph::Node& node,
                                     const std::vector<Tensor>& inputs) {
  std::vector<DType> dtypes;
  std::vector<const Tensor*> constants(inputs.size(), nullptr);
  std::vector<TensorInfo> infos(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    dtypes.push_back(inputs[i].defined() ? inputs[i].dtype() : DType::kUndefined);
    if (inputs[i].defined()) {
      infos[i].dtype = inputs[i].dtype();
      infos[i].shape = inputs[i].shape();
    }
  }
  SL_ASSIGN_OR_RETURN(const KernelDef* def,
                      cuda_reg().find(node.op_type, node.domain, node.opset, Device::kCuda, DType::kFloat32));
  KernelCreateArgs args{g, node, constants, dtypes, KernelOptions{}};
  Prepared p;
  SL_ASSIGN_OR_RETURN(p.kernel, def->create(args));
  SL_ASSIGN_OR_RETURN(p.rr, p.kernel->reshape(infos));
  return p;
}

// A float attribute.
inline graph::Attribute one_float(float v) {
  graph::Attribute a;
  a.kind = graph::Attribute::Kind::kFloat;
  a.f = v;
  return a;
}

// Float32 tensors of these shapes (contents unset) for shape-only tests; a shape {-1} stands for
// an omitted optional input (an undefined Tensor).
inline std::vector<Tensor> zeros(const std::vector<Shape>& shapes) {
  std::vector<Tensor> t;
  for (const Shape& s : shapes) t.push_back(s.rank() == 1 && s[0] < 0 ? Tensor() : Tensor::empty(DType::kFloat32, s));
  return t;
}

// Device copies of `inputs`, taken from `arena` and uploaded on `stream` (not synchronised); an
// undefined input stays undefined. The arena must outlive the returned views.
inline Result<std::vector<Tensor>> upload_inputs(exec::cuda::DeviceArena& arena, const std::vector<Tensor>& inputs,
                                                 cudaStream_t stream) {
  std::vector<Tensor> dev_in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    SL_ASSIGN_OR_RETURN(void* d, arena.take(inputs[i].nbytes()));
    if (inputs[i].nbytes() > 0)
      SL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d, inputs[i].raw(), inputs[i].nbytes(), cudaMemcpyHostToDevice, stream),
                              "input");
    dev_in[i] = Tensor::view(inputs[i].dtype(), inputs[i].shape(), d);
  }
  return dev_in;
}

// The RunContext of a prepared kernel on device tensors: its reshape state, `workspace` when it
// asked for one (else null), enqueued on `stream`. The context views dev_in and dev_out, which
// must outlive it.
inline RunContext device_run_context(const Prepared& p, const std::vector<Tensor>& dev_in, std::vector<Tensor>& dev_out,
                                     void* workspace, cudaStream_t stream) {
  RunContext rc;
  rc.inputs = dev_in;
  rc.outputs = dev_out;
  rc.workspace = p.rr.workspace_bytes > 0 ? workspace : nullptr;
  rc.state = p.rr.state.get();
  rc.device_stream = stream;
  return rc;
}

// Runs `kernel` on `rc` through a CUDA graph: run() captured on `stream` (so it must not
// synchronise, allocate or copy synchronously), the graph instantiated, launched, and waited for.
inline Status run_in_cuda_graph(const Kernel& kernel, const RunContext& rc, cudaStream_t stream) {
  SL_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  const Status run = kernel.run(rc);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  SL_RETURN_IF_ERROR(run);
  SL_CUDA_RETURN_IF_ERROR(end, "end capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  SL_CUDA_RETURN_IF_ERROR(made, "graph instantiation");
  const cudaError_t launched = cudaGraphLaunch(exec, stream);
  const cudaError_t done = cudaStreamSynchronize(stream);
  (void)cudaGraphExecDestroy(exec);
  SL_CUDA_RETURN_IF_ERROR(launched, "graph launch");
  SL_CUDA_RETURN_IF_ERROR(done, "graph run");
  return ok_status();
}

// Runs the node's CUDA kernel: inputs copied into a device arena, outputs pre-filled with NaN
// bytes (so an unwritten element fails the comparison), run on its own stream, outputs copied back.
inline Result<std::vector<Tensor>> run_cuda(const graph::Graph& g, const graph::Node& node,
                                            const std::vector<Tensor>& inputs) {
  SL_ASSIGN_OR_RETURN(Prepared p, prepare_cuda(g, node, inputs));
  size_t total = p.rr.workspace_bytes + exec::cuda::kDeviceAlignment;
  for (const Tensor& t : inputs) total += t.nbytes() + exec::cuda::kDeviceAlignment;
  for (const OutputInfo& o : p.rr.outputs)
    total += static_cast<size_t>(o.shape.numel()) * dtype_size(o.dtype) + exec::cuda::kDeviceAlignment;
  SL_ASSIGN_OR_RETURN(auto arena, exec::cuda::DeviceArena::create(total));
  SL_ASSIGN_OR_RETURN(exec::cuda::CudaStream stream, exec::cuda::CudaStream::create());
  SL_ASSIGN_OR_RETURN(std::vector<Tensor> dev_in, upload_inputs(*arena, inputs, stream.get()));
  std::vector<Tensor> dev_out;
  for (const OutputInfo& o : p.rr.outputs) {
    const size_t bytes = static_cast<size_t>(o.shape.numel()) * dtype_size(o.dtype);
    SL_ASSIGN_OR_RETURN(void* d, arena->take(bytes));
    SL_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(d, 0xFF, bytes, stream.get()), "output");
    dev_out.push_back(Tensor::view(o.dtype, o.shape, d));
  }
  SL_ASSIGN_OR_RETURN(void* ws, arena->take(p.rr.workspace_bytes));
  SL_RETURN_IF_ERROR(p.kernel->run(device_run_context(p, dev_in, dev_out, ws, stream.get())));
  std::vector<Tensor> out;
  for (const Tensor& d : dev_out) {
    Tensor h = Tensor::empty(d.dtype(), d.shape());
    SL_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(h.raw(), d.raw(), d.nbytes(), cudaMemcpyDeviceToHost, stream.get()),
                            "output");
    out.push_back(h);
  }
  SL_RETURN_IF_ERROR(stream.synchronize());
  return out;
}

// max |got - want| <= rel * max |want|, and no NaN where the reference has a number.
inline void expect_close(const Tensor& got, const Tensor& want, double rel) {
  ASSERT_EQ(got.shape(), want.shape());
  double max_ref = 0.0, max_diff = 0.0;
  int64_t nan = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double w = want.data<float>()[i], g = got.data<float>()[i];
    if (std::isnan(g) && !std::isnan(w)) ++nan;
    max_ref = std::max(max_ref, std::fabs(w));
    if (!std::isnan(g)) max_diff = std::max(max_diff, std::fabs(g - w));
  }
  EXPECT_EQ(nan, 0) << "elements left unwritten or NaN";
  EXPECT_LE(max_diff, rel * std::max(max_ref, 1e-3)) << "max |reference| " << max_ref;
}

// Output 0 of the CUDA kernel against the reference kernel, within rel * max|reference|.
inline void expect_matches_reference(const std::string& op, const std::string& domain, int opset,
                                     const std::vector<Tensor>& inputs, std::map<std::string, graph::Attribute> attrs,
                                     double rel) {
  auto n = make_node(op, domain, inputs, std::move(attrs));
  n->g.node(n->id).opset = opset;
  auto want = evaluate_node(testing::ref_reg(), n->g, n->node(), inputs);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = run_cuda(n->g, n->node(), inputs);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_FALSE(got->empty());
  expect_close((*got)[0], (*want)[0], rel);
}

}  // namespace streamline::ops::cuda_test
