// Instances share the Model's weights: adding instances costs their arenas, not more weights.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "graph/ir.h"
#include "streamline/serving.h"

namespace streamline {
namespace {

// Under AddressSanitizer RSS says nothing (its allocator keeps freed memory): that build leaves the
// test out, the plain build runs it.
#if !defined(__SANITIZE_ADDRESS__)

// Resident set size in bytes, from /proc/self/statm.
size_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

size_t weight_bytes(const Model& m) {
  size_t total = 0;
  const graph::Graph& g = m.graph();
  for (size_t v = 0; v < g.num_values(); ++v) {
    const auto& val = g.value(static_cast<graph::ValueId>(v));
    if (val.constant) total += val.constant->nbytes();
  }
  return total;
}

TEST(ServingMemory, InstancesGrowByArenasNotWeights) {
  const std::filesystem::path path = std::filesystem::path(SL_SOURCE_DIR) / "build" / "models" / "resnet50.onnx";
  if (!std::filesystem::exists(path)) {
    // The model tests export it too; the exporter locks per model, so running both at once is safe.
    const std::string cmd = std::string("cd '") + SL_SOURCE_DIR + "' && .venv/bin/python scripts/export_models.py" +
                            " --out build/models --models resnet50 > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "exporting ResNet-50 failed: " << cmd;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  ModelOptions mo;
  mo.num_threads = 1;
  auto model = Model::load(path.string(), mo);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const size_t weights = weight_bytes(**model);
  ASSERT_GT(weights, 50u << 20);  // ResNet-50: ~100 MB of float weights

  ServingOptions o;
  o.instances = 1;
  o.threads_per_instance = 1;
  o.warmup = true;  // each instance sizes its arena at load
  auto first = ServingModel::create(*model, o);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  const size_t before = resident_bytes();
  const size_t arena = (*first)->arena_bytes()[0];
  ASSERT_GT(arena, 0u);

  o.instances = 3;  // instances 2..4
  auto more = ServingModel::create(*model, o);
  ASSERT_TRUE(more.ok()) << more.status().to_string();
  const size_t after = resident_bytes();
  for (size_t a : (*more)->arena_bytes()) EXPECT_EQ(a, arena);
  const size_t growth = after > before ? after - before : 0;
  std::cout << "weights " << (weights >> 20) << " MiB, arena per instance " << (arena >> 20)
            << " MiB, RSS growth for 3 "
            << "more instances " << (growth >> 20) << " MiB" << std::endl;
  // Three more arenas plus thread stacks and allocator slack; not even one more copy of the weights.
  EXPECT_LT(growth, 3 * arena + (32u << 20));
  EXPECT_LT(growth, weights);

  Tensor x = Tensor::empty(DType::kFloat32, Shape{1, 3, 224, 224});
  InferRequest r;
  r.inputs["input"] = x;
  InferResponse resp = (*more)->infer(r);
  ASSERT_TRUE(resp.status.ok()) << resp.status.to_string();
  EXPECT_EQ(resp.outputs.at("output").shape(), (Shape{1, 1000}));
}
#endif  // !__SANITIZE_ADDRESS__

}  // namespace
}  // namespace streamline
