// DeviceRunner for the CPU and (when built) the CUDA executor; see device_runner.h.

#include "runtime/device_runner.h"

#include <cstdlib>

#include "streamline/streamline.h"
#if SL_HAVE_CUDA
#include "exec/cuda/device.h"
#include "exec/cuda/executor.h"
#include "ops/cuda/cuda_kernels.h"
#endif

namespace streamline::runtime {

std::string DeviceSpec::to_string() const {
  if (kind == ops::Device::kCpu) return "cpu";
  return all_gpus ? "cuda" : "cuda:" + std::to_string(ordinal);
}

Result<DeviceSpec> parse_device(const std::string& text) {
  DeviceSpec d;
  if (text.empty() || text == "cpu") return d;
  if (text == "cuda" || text == "gpu") {
    d.kind = ops::Device::kCuda;
    d.all_gpus = true;
    return d;
  }
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    const std::string n = text.substr(5);
    char* end = nullptr;
    const long v = std::strtol(n.c_str(), &end, 10);
    if (end && *end == '\0' && v >= 0 && v < 1024) {
      d.kind = ops::Device::kCuda;
      d.ordinal = static_cast<int>(v);
      return d;
    }
  }
  return invalid_argument("unknown device '" + text + "' (expected cpu, cuda or cuda:N)");
}

Result<ops::Precision> parse_precision(const std::string& text) {
  if (text.empty() || text == "fp32") return ops::Precision::kFp32;
  if (text == "tf32") return ops::Precision::kTf32;
  if (text == "fp16") return ops::Precision::kFp16;
  return invalid_argument("unknown precision '" + text + "' (expected fp32, tf32 or fp16)");
}

namespace {

class CpuRunner final : public DeviceRunner {
 public:
  explicit CpuRunner(exec::ContextOptions co) : ctx_(std::move(co)) {}
  Status run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
             const exec::RunOptions& options) override {
    return exec::run_plan(plan, ctx_, inputs, outputs, options);
  }
  size_t arena_bytes() const override { return ctx_.arena_bytes(); }
  std::string device() const override { return "cpu"; }

 private:
  exec::ExecutionContext ctx_;
};

#if SL_HAVE_CUDA
class CudaRunner final : public DeviceRunner {
 public:
  CudaRunner(std::unique_ptr<exec::cuda::CudaExecutionContext> ctx, int ordinal)
      : ctx_(std::move(ctx)), ordinal_(ordinal) {}
  Status run(const plan::ExecutionPlan& plan, std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
             const exec::RunOptions& options) override {
    return ctx_->run(plan, inputs, outputs, options);
  }
  size_t arena_bytes() const override { return ctx_->device_bytes(); }
  std::string device() const override { return "cuda:" + std::to_string(ordinal_); }

 private:
  std::unique_ptr<exec::cuda::CudaExecutionContext> ctx_;
  int ordinal_;
};
#endif

}  // namespace

#if SL_HAVE_CUDA
bool cuda_built() { return true; }

int cuda_device_count() {
  auto n = exec::cuda::device_count();
  return n.ok() ? *n : 0;
}

Result<const ops::KernelRegistry*> cuda_kernel_registry() {
  static const Result<const ops::KernelRegistry*> reg = []() -> Result<const ops::KernelRegistry*> {
    auto* r = new ops::KernelRegistry();
    SL_RETURN_IF_ERROR(ops::register_cpu_kernels(*r));
    SL_RETURN_IF_ERROR(ops::cuda::register_cuda_kernels(*r));
    return r;
  }();
  return reg;
}

std::shared_ptr<void> DeviceWeights::on(int ordinal) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& s = stores_[ordinal];
  if (!s) s = std::make_shared<exec::cuda::DeviceConstants>(ordinal);
  return s;
}

size_t DeviceWeights::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [_, s] : stores_) n += static_cast<const exec::cuda::DeviceConstants*>(s.get())->bytes();
  return n;
}
#else
bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
Result<const ops::KernelRegistry*> cuda_kernel_registry() {
  return unsupported("this build has no CUDA backend (configure with the CUDA toolkit and cuDNN, SL_CUDA=ON)");
}
std::shared_ptr<void> DeviceWeights::on(int) { return nullptr; }
size_t DeviceWeights::bytes() const { return 0; }
#endif

Result<std::unique_ptr<DeviceRunner>> make_device_runner(const Model& model, int ordinal, const RunnerOptions& options) {
  if (model.device().kind == ops::Device::kCpu) return std::unique_ptr<DeviceRunner>(new CpuRunner(options.cpu));
#if SL_HAVE_CUDA
  if (Status s = exec::cuda::require_device(); !s.ok())
    return s.with_context("running on " + model.device().to_string());
  exec::cuda::CudaContextOptions co;
  co.device = ordinal;
  co.cuda_graphs = options.cuda_graphs;
  auto store = std::static_pointer_cast<exec::cuda::DeviceConstants>(model.device_weights()->on(ordinal));
  SL_ASSIGN_OR_RETURN(auto ctx, exec::cuda::CudaExecutionContext::create(store, co));
  return std::unique_ptr<DeviceRunner>(new CudaRunner(std::move(ctx), ordinal));
#else
  (void)ordinal;
  return unsupported("model loaded for " + model.device().to_string() + " but this build has no CUDA backend");
#endif
}

}  // namespace streamline::runtime
