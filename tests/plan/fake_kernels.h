#pragma once
// Tiny kernels for planner and executor tests, independent of the real CPU kernels.
//   Twice:  y = 2x            (in place allowed)
//   Add2:   y = a + b         (same shapes, no in place)
//   Boom:   fails at run time (error propagation)
//   NoteTwice: y = 2x, and records the intra-op thread count each run was given (thread_notes())

#include <memory>
#include <mutex>
#include <vector>

#include "ops/registry.h"

namespace streamline::testing {

class TwiceKernel final : public ops::Kernel {
 public:
  Result<ops::ReshapeResult> reshape(std::span<const ops::TensorInfo> in) const override {
    ops::ReshapeResult r;
    r.outputs.push_back({in[0].dtype, in[0].shape, in[0].layout});
    r.inplace = {0};
    return r;
  }
  Status run(const ops::RunContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    for (int64_t i = 0; i < ctx.inputs[0].numel(); ++i) y[i] = 2 * x[i];
    return ok_status();
  }
};

class Add2Kernel final : public ops::Kernel {
 public:
  Result<ops::ReshapeResult> reshape(std::span<const ops::TensorInfo> in) const override {
    if (in[0].shape != in[1].shape) return invalid_argument("Add2 shapes differ");
    ops::ReshapeResult r;
    r.outputs.push_back({in[0].dtype, in[0].shape, in[0].layout});
    return r;
  }
  Status run(const ops::RunContext& ctx) const override {
    const float* a = ctx.inputs[0].data<float>();
    const float* b = ctx.inputs[1].data<float>();
    float* y = ctx.outputs[0].data<float>();
    for (int64_t i = 0; i < ctx.inputs[0].numel(); ++i) y[i] = a[i] + b[i];
    return ok_status();
  }
};

class BoomKernel final : public ops::Kernel {
 public:
  Result<ops::ReshapeResult> reshape(std::span<const ops::TensorInfo> in) const override {
    ops::ReshapeResult r;
    r.outputs.push_back({in[0].dtype, in[0].shape, in[0].layout});
    return r;
  }
  Status run(const ops::RunContext&) const override { return invalid_argument("boom"); }
};

// Writes one element past the end of its output (to test safe-mode canaries).
class OverrunKernel final : public ops::Kernel {
 public:
  Result<ops::ReshapeResult> reshape(std::span<const ops::TensorInfo> in) const override {
    ops::ReshapeResult r;
    r.outputs.push_back({in[0].dtype, in[0].shape, in[0].layout});
    return r;
  }
  Status run(const ops::RunContext& ctx) const override {
    float* y = ctx.outputs[0].data<float>();
    for (int64_t i = 0; i <= ctx.outputs[0].numel(); ++i) y[i] = 1.f;
    return ok_status();
  }
};

// (node name, RunContext::num_threads) per NoteTwice run, in completion order.
struct ThreadNotes {
  std::mutex mu;
  std::vector<std::pair<std::string, int>> seen;
};
inline ThreadNotes& thread_notes() {
  static ThreadNotes notes;
  return notes;
}

class NoteTwiceKernel final : public ops::Kernel {
 public:
  explicit NoteTwiceKernel(std::string name) : name_(std::move(name)) {}
  Result<ops::ReshapeResult> reshape(std::span<const ops::TensorInfo> in) const override {
    ops::ReshapeResult r;
    r.outputs.push_back({in[0].dtype, in[0].shape, in[0].layout});
    return r;
  }
  Status run(const ops::RunContext& ctx) const override {
    const float* x = ctx.inputs[0].data<float>();
    float* y = ctx.outputs[0].data<float>();
    for (int64_t i = 0; i < ctx.inputs[0].numel(); ++i) y[i] = 2 * x[i];
    std::lock_guard<std::mutex> lock(thread_notes().mu);
    thread_notes().seen.emplace_back(name_, ctx.num_threads);
    return ok_status();
  }

 private:
  std::string name_;
};

template <typename K>
ops::KernelDef fake_def(const std::string& op) {
  ops::KernelDef d;
  d.op = op;
  d.since_version = 1;
  d.dtype = DType::kFloat32;
  d.provider = "fake";
  d.create = [](const ops::KernelCreateArgs&) -> Result<std::unique_ptr<ops::Kernel>> {
    return std::unique_ptr<ops::Kernel>(new K());
  };
  return d;
}

inline ops::KernelRegistry fake_registry() {
  ops::KernelRegistry reg;
  (void)reg.add(fake_def<TwiceKernel>("Twice"));
  (void)reg.add(fake_def<Add2Kernel>("Add2"));
  (void)reg.add(fake_def<BoomKernel>("Boom"));
  (void)reg.add(fake_def<OverrunKernel>("Overrun"));
  ops::KernelDef note = fake_def<TwiceKernel>("NoteTwice");
  note.create = [](const ops::KernelCreateArgs& a) -> Result<std::unique_ptr<ops::Kernel>> {
    return std::unique_ptr<ops::Kernel>(new NoteTwiceKernel(a.node.name));
  };
  (void)reg.add(std::move(note));
  return reg;
}

}  // namespace streamline::testing
