// A program built against an installed streamline, with nothing but its public headers and
// library: writes a one-node ONNX model (Relu over [3, 4, 5]) to MODEL.onnx, loads it, runs it once
// with an observer and checks the output (Relu of a ramp) and what the observer saw; then runs a
// one-stage pipeline (streamline/pipeline.h) and checks its answer.
//
//   consumer MODEL.onnx      exit 0 when every result is right, 1 otherwise (the reason on stderr)
//
// The model is written here, not taken from a test-data package, so the install check needs nothing
// beyond the build.

#include <streamline/pipeline.h>
#include <streamline/serving.h>
#include <streamline/streamline.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

// Just enough of the protobuf wire format for a one-node ONNX model: varint fields (wire type 0)
// and length-delimited ones (wire type 2).
std::string varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
  return out;
}
std::string int_field(uint64_t field, uint64_t v) {
  return varint(field << 3) + varint(v);
}
std::string bytes_field(uint64_t field, const std::string& bytes) {
  return varint((field << 3) | 2) + varint(bytes.size()) + bytes;
}

// ValueInfoProto {name = 1, type = 2 {tensor_type = 1 {elem_type = 1 (FLOAT), shape = 2 {dim = 1
// {dim_value = 1}}}}}.
std::string float_value(const std::string& name, const std::vector<int64_t>& dims) {
  std::string shape;
  for (int64_t d : dims) shape += bytes_field(1, int_field(1, static_cast<uint64_t>(d)));
  const std::string tensor_type = int_field(1, 1) + bytes_field(2, shape);
  return bytes_field(1, name) + bytes_field(2, bytes_field(1, tensor_type));
}

// ModelProto {ir_version = 1: 8, graph = 7 {node = 1 {input = 1, output = 2, name = 3, op_type = 4},
// name = 2, input = 11, output = 12}, opset_import = 8 {version = 2: 13}}.
std::string relu_model() {
  const std::vector<int64_t> dims = {3, 4, 5};
  const std::string node = bytes_field(1, "x") + bytes_field(2, "y") + bytes_field(3, "relu") + bytes_field(4, "Relu");
  const std::string graph = bytes_field(1, node) + bytes_field(2, "relu_graph") +
                            bytes_field(11, float_value("x", dims)) + bytes_field(12, float_value("y", dims));
  return int_field(1, 8) + bytes_field(7, graph) + bytes_field(8, int_field(2, 13));
}

// A user's observer: counts the steps that ran and remembers the last op.
class Steps final : public streamline::exec::ExecObserver {
 public:
  void on_step_end(const streamline::plan::ExecutionPlan& plan, int step, int stream) override {
    ++count;
    last_op = std::string(streamline::describe_step(plan, step).op);
  }
  std::atomic<int> count{0};
  std::string last_op;
};

// A pipeline of one ready-made stage (top 2 of four scores); no model needed.
bool pipeline_works() {
  using namespace streamline;
  PipelineBuilder b;
  b.input("logits");
  b.add_stage({.name = "top2", .inputs = {"logits"}, .outputs = {"classes", "scores"}},
              stages::top_k({.k = 2, .softmax = false}));
  b.output("classes").output("scores");
  PipelineOptions po;
  po.entry_timeout_us = 10'000'000;
  auto pipe = b.build(po);
  if (!pipe.ok()) {
    std::cerr << "pipeline: " << pipe.status().to_string() << "\n";
    return false;
  }
  InferRequest req;
  req.inputs["logits"] = Tensor::from_vector<float>(Shape{1, 4}, {0.5f, 3.f, -1.f, 2.f});
  InferResponse r = (*pipe)->infer(std::move(req));
  if (!r.status.ok()) {
    std::cerr << "pipeline: " << r.status.to_string() << "\n";
    return false;
  }
  const Tensor& classes = r.outputs["classes"];
  if (classes.dtype() != DType::kInt64 || classes.shape() != Shape{1, 2} || classes.data<int64_t>()[0] != 1 ||
      classes.data<int64_t>()[1] != 3) {
    std::cerr << "pipeline: classes " << classes.shape().to_string() << ", expected [1, 2] = {1, 3}\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace streamline;
  if (argc != 2) {
    std::cerr << "usage: consumer MODEL.onnx\n";
    return 1;
  }
  std::cout << version_string() << "\n";
  {
    std::ofstream out(argv[1], std::ios::binary);
    out << relu_model();
    if (!out) {
      std::cerr << "cannot write " << argv[1] << "\n";
      return 1;
    }
  }
  auto model = Model::load(argv[1]);
  if (!model.ok()) {
    std::cerr << model.status().to_string() << "\n";
    return 1;
  }
  auto shapes = (*model)->default_shapes();
  if (!shapes.ok() || shapes->size() != 1) {
    std::cerr << "expected one input with a known shape\n";
    return 1;
  }
  Tensor x = Tensor::empty(DType::kFloat32, (*shapes)[0]);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 3.f;
  Session session(*model);
  Steps steps;
  RunOptions ro;
  ro.observer = &steps;
  auto outs = session.run({x}, ro);
  if (!outs.ok()) {
    std::cerr << outs.status().to_string() << "\n";
    return 1;
  }
  const Tensor& y = (*outs)[0];
  if (y.shape() != x.shape()) {
    std::cerr << "output shape " << y.shape().to_string() << ", expected " << x.shape().to_string() << "\n";
    return 1;
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float want = x.data<float>()[i] > 0 ? x.data<float>()[i] : 0.f;
    if (y.data<float>()[i] != want) {
      std::cerr << "element " << i << " is " << y.data<float>()[i] << ", expected " << want << "\n";
      return 1;
    }
  }
  if (steps.count != 1 || steps.last_op != "Relu") {
    std::cerr << "the observer saw " << steps.count << " steps, the last '" << steps.last_op << "'\n";
    return 1;
  }
  // The serving API links too (no model needs serving here: options are checked first).
  ServingOptions so;
  so.instances = 0;
  auto bad = ServingModel::create(*model, so);
  if (bad.ok()) {
    std::cerr << "zero instances were accepted\n";
    return 1;
  }
  if (!pipeline_works()) return 1;
  std::cout << "ok: " << y.numel() << " outputs, and a pipeline\n";
  return 0;
}
