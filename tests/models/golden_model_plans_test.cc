// Golden plan dumps of an exported model (tests/plan/golden/, plan/golden_util.h): the encoder
// bert_tiny imported, rewritten by the graph passes (attention and LayerNorm fused; the Gelu
// epilogue left out, which the reference FusedMatMul lacks) and planned on the reference kernels,
// with the CPU kernels only for the ops those lack (Reshape here, a view). So the dump depends on
// the importer, the passes and the planner, not on the CPU: it is the same with oneDNN held to AVX2
// or SSE4.1 (ONEDNN_MAX_CPU_ISA), where the CPU kernels' workspaces differ. The export is Debian's
// PyTorch with fixed seeds (scripts/export_models.py), whose node names hold for one PyTorch
// version; after an upgrade renames them, scripts/update_golden_plans.sh rewrites the dumps. The
// files are found through SL_SOURCE_DIR.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "graph/onnx_import.h"
#include "graph/passes.h"
#include "models/exported_model.h"
#include "ops/evaluator.h"
#include "ops/registry.h"
#include "plan/golden_util.h"
#include "plan/planner.h"

namespace streamline {
namespace {

TEST(GoldenModelPlans, BertTinyOnReferenceKernels) {
  const std::filesystem::path path = testing::exported_model("bert_tiny");
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  auto g = graph::import_onnx_file(path.string());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  // The reference kernels, and the CPU kernels for the ops they lack (shape and data movement ops,
  // which size nothing by the CPU's instruction set).
  ops::KernelRegistry reg;
  ASSERT_TRUE(ops::register_reference_kernels(reg).ok());
  for (const ops::KernelDef& def : ops::default_cpu_registry().defs())
    if (!reg.has_op(def.op, def.domain, def.since_version, def.device)) (void)reg.add(def);
  ops::KernelEvaluator evaluator(reg);
  graph::PassReport report;
  graph::PassOptions po;
  po.fuse_gelu = false;  // the reference FusedMatMul has no Gelu epilogue
  ASSERT_TRUE(graph::run_passes(*g, po, &evaluator, &report).ok());
  EXPECT_EQ(report.attention_fused, 2) << report.to_string();
  auto ks = plan::create_kernels(*g, reg, {});
  ASSERT_TRUE(ks.ok()) << ks.status().to_string();
  for (int streams : {1, 2}) {
    plan::PlannerOptions plo;
    plo.registry = &reg;
    plo.num_streams = streams;
    auto plan = plan::make_plan(*g, *ks, {{"input_ids", Shape{2, 8}}}, plo);
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    testing::expect_golden(**plan, "bert_tiny_reference_streams" + std::to_string(streams));
  }
}

}  // namespace
}  // namespace streamline
