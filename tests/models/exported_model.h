#pragma once
// The path of an exported model in the model tests' cache (SL_MODEL_DIR), exported with
// scripts/export_models.py first when it is missing (the Python model tests export into the same
// cache; the exporter locks per model, so both at once is safe).
//
//   const std::filesystem::path path = exported_model("bert_tiny");
//   ASSERT_TRUE(std::filesystem::exists(path)) << path;

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace streamline::testing {

inline std::filesystem::path exported_model(const std::string& name) {
  const std::filesystem::path dir = SL_MODEL_DIR;
  const std::filesystem::path path = dir / (name + ".onnx");
  if (!std::filesystem::exists(path)) {
    const std::string cmd = std::string("cd '") + SL_SOURCE_DIR + "' && .venv/bin/python scripts/export_models.py" +
                            " --out '" + dir.string() + "' --models " + name + " > /dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << "exporting " << name << " failed: " << cmd;
  }
  return path;
}

}  // namespace streamline::testing
