#pragma once
// Helpers for server-layer tests: a throw-away model repository folder and tiny ONNX models.
//
//   TempRepo repo;                                          // removed when it goes out of scope
//   repo.write("mm/1/model.onnx", matmul_relu_onnx());
//   repo.write("mm/config.pbtxt", "max_batch_size: 8");
//   Repository r(repo.path(), {});

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/onnx_test_models.h"

namespace streamline::serve::testing {

constexpr int kIn = 4, kOut = 3;

// Fixed-seed weights of the test model, row-major [kIn, kOut].
inline std::vector<float> matmul_weights() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> w(kIn * kOut);
  for (float& v : w) v = u(rng);
  return w;
}

// x[N,4] float -> h = x @ W [N,3] -> y = Relu(h). Outputs h and y.
inline std::string matmul_relu_onnx() {
  graph::testing::OnnxModel m(13);
  m.input("x", onnx::TensorProto::FLOAT, {"N", "4"});
  m.initializer(graph::testing::float_tensor("W", {kIn, kOut}, matmul_weights()));
  m.node("MatMul", "matmul", {"x", "W"}, {"h"});
  m.node("Relu", "relu", {"h"}, {"y"});
  m.output("h", onnx::TensorProto::FLOAT, {"N", "3"});
  m.output("y", onnx::TensorProto::FLOAT, {"N", "3"});
  return m.bytes();
}

// x[2,4] float -> y = Relu(x): no batch dimension the server may use.
inline std::string fixed_relu_onnx() {
  graph::testing::OnnxModel m(13);
  m.input("x", onnx::TensorProto::FLOAT, {"2", "4"});
  m.node("Relu", "relu", {"x"}, {"y"});
  m.output("y", onnx::TensorProto::FLOAT, {"2", "4"});
  return m.bytes();
}

// The reference for matmul_relu_onnx: (h, y) of x [rows, 4].
inline void matmul_relu_reference(const std::vector<float>& x, int rows, std::vector<float>* h, std::vector<float>* y) {
  const std::vector<float> w = matmul_weights();
  h->assign(static_cast<size_t>(rows) * kOut, 0.f);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < kOut; ++o) {
      float acc = 0;
      for (int i = 0; i < kIn; ++i) acc += x[static_cast<size_t>(r * kIn + i)] * w[static_cast<size_t>(i * kOut + o)];
      (*h)[static_cast<size_t>(r * kOut + o)] = acc;
    }
  y->resize(h->size());
  for (size_t i = 0; i < h->size(); ++i) (*y)[i] = std::max(0.f, (*h)[i]);
}

inline Tensor random_input(int rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor t = Tensor::empty(DType::kFloat32, Shape{rows, kIn});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// A fresh folder under the system temp dir, removed with everything in it on destruction.
class TempRepo {
 public:
  TempRepo() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("sl_serve_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempRepo() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempRepo(const TempRepo&) = delete;
  TempRepo& operator=(const TempRepo&) = delete;

  std::string path() const { return path_.string(); }
  // Writes `content` to root/relative, creating folders on the way.
  void write(const std::string& relative, const std::string& content) const {
    const auto p = path_ / relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
  }
  void mkdir(const std::string& relative) const { std::filesystem::create_directories(path_ / relative); }
  void remove(const std::string& relative) const { std::filesystem::remove_all(path_ / relative); }

 private:
  std::filesystem::path path_;
};

}  // namespace streamline::serve::testing
