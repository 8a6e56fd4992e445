// A program built against an installed streamline, with nothing but its public headers and
// library: loads an ONNX model, runs it once with an observer and checks the output (Relu of a
// ramp) and what the observer saw.
//
//   consumer MODEL.onnx      exit 0 when the output is right, 1 otherwise (the reason on stderr)

#include <streamline/serving.h>
#include <streamline/streamline.h>

#include <atomic>
#include <iostream>
#include <string>

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

int main(int argc, char** argv) {
  using namespace streamline;
  if (argc != 2) {
    std::cerr << "usage: consumer MODEL.onnx\n";
    return 1;
  }
  std::cout << version_string() << "\n";
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
  std::cout << "ok: " << y.numel() << " outputs\n";
  return 0;
}
