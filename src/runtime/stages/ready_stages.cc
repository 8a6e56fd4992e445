// The ready-made pipeline stages (decode, resize, normalise, layout, top-k) and the image
// classifier assembled from them.

#include <algorithm>
#include <string>

#include "runtime/stages/image_ops.h"
#include "streamline/pipeline.h"

namespace streamline {
namespace stages {
namespace {

Status check_arity(const StageSpec& spec, size_t inputs, size_t outputs) {
  if (spec.inputs.size() != inputs || spec.outputs.size() != outputs)
    return invalid_argument("expects " + std::to_string(inputs) + " input(s) and " + std::to_string(outputs) +
                            " output(s), got " + std::to_string(spec.inputs.size()) + " and " +
                            std::to_string(spec.outputs.size()));
  return ok_status();
}

Status check_resize(const ResizeImageOptions& o) {
  if (o.height < 1 || o.width < 1) return invalid_argument("resize height and width must be >= 1");
  if (o.shorter_side < 0) return invalid_argument("shorter_side must be >= 0");
  if (o.shorter_side > 0 && o.shorter_side < std::max(o.height, o.width))
    return invalid_argument("shorter_side " + std::to_string(o.shorter_side) + " is smaller than the " +
                            std::to_string(o.height) + "x" + std::to_string(o.width) + " crop");
  return ok_status();
}

Status check_normalize(const NormalizeImageOptions& o) {
  if (o.mean.empty() || o.std.empty()) return invalid_argument("mean and std need at least one value");
  if (o.mean.size() != o.std.size() && o.mean.size() != 1 && o.std.size() != 1)
    return invalid_argument("mean has " + std::to_string(o.mean.size()) + " values but std has " +
                            std::to_string(o.std.size()));
  for (float s : o.std)
    if (s == 0.f) return invalid_argument("std values must be non-zero");
  return ok_status();
}

Result<Tensor> resize(const Tensor& image, const ResizeImageOptions& o) {
  if (o.shorter_side == 0) return runtime::resize_bilinear(image, o.height, o.width);
  SL_ASSIGN_OR_RETURN(Tensor scaled, runtime::resize_shorter_side(image, o.shorter_side));
  return runtime::center_crop(scaled, o.height, o.width);
}

Result<Tensor> normalize(const Tensor& image, const NormalizeImageOptions& o) {
  return runtime::normalize_hwc(image, o.mean, o.std, o.scale);
}

class DecodeImage final : public Stage {
 public:
  explicit DecodeImage(DecodeImageOptions o) : o_(o) {}
  Status validate(const StageSpec& spec) const override {
    SL_RETURN_IF_ERROR(check_arity(spec, 1, 1));
    if (o_.channels != 1 && o_.channels != 3) return invalid_argument("channels must be 1 or 3");
    if (o_.max_pixels < 1) return invalid_argument("max_pixels must be >= 1");
    return ok_status();
  }
  Status process(StageIO& io) override {
    const Tensor& bytes = io.inputs[0];
    if (bytes.dtype() != DType::kUInt8) return invalid_argument("expects uint8 file bytes, got " + bytes.describe());
    SL_ASSIGN_OR_RETURN(io.outputs[0], runtime::decode_image(bytes.data<uint8_t>(), bytes.nbytes(),
                                                             {.channels = o_.channels, .max_pixels = o_.max_pixels}));
    return ok_status();
  }

 private:
  DecodeImageOptions o_;
};

class ResizeImage final : public Stage {
 public:
  explicit ResizeImage(ResizeImageOptions o) : o_(o) {}
  Status validate(const StageSpec& spec) const override {
    SL_RETURN_IF_ERROR(check_arity(spec, 1, 1));
    return check_resize(o_);
  }
  Status process(StageIO& io) override {
    SL_ASSIGN_OR_RETURN(io.outputs[0], resize(io.inputs[0], o_));
    return ok_status();
  }

 private:
  ResizeImageOptions o_;
};

class NormalizeImage final : public Stage {
 public:
  explicit NormalizeImage(NormalizeImageOptions o) : o_(std::move(o)) {}
  Status validate(const StageSpec& spec) const override {
    SL_RETURN_IF_ERROR(check_arity(spec, 1, 1));
    return check_normalize(o_);
  }
  Status process(StageIO& io) override {
    SL_ASSIGN_OR_RETURN(io.outputs[0], normalize(io.inputs[0], o_));
    return ok_status();
  }

 private:
  NormalizeImageOptions o_;
};

class HwcToNchw final : public Stage {
 public:
  Status validate(const StageSpec& spec) const override { return check_arity(spec, 1, 1); }
  Status process(StageIO& io) override {
    SL_ASSIGN_OR_RETURN(io.outputs[0], runtime::hwc_to_nchw(io.inputs[0]));
    return ok_status();
  }
};

class PreprocessImage final : public Stage {
 public:
  explicit PreprocessImage(ImagePreprocessOptions o) : o_(std::move(o)) {}
  Status validate(const StageSpec& spec) const override {
    SL_RETURN_IF_ERROR(check_arity(spec, 1, 1));
    SL_RETURN_IF_ERROR(check_resize(o_.resize));
    return check_normalize(o_.normalize);
  }
  Status process(StageIO& io) override {
    SL_ASSIGN_OR_RETURN(Tensor sized, resize(io.inputs[0], o_.resize));
    SL_ASSIGN_OR_RETURN(Tensor normed, normalize(sized, o_.normalize));
    SL_ASSIGN_OR_RETURN(io.outputs[0], runtime::hwc_to_nchw(normed));
    return ok_status();
  }

 private:
  ImagePreprocessOptions o_;
};

class TopKStage final : public Stage {
 public:
  explicit TopKStage(TopKOptions o) : o_(o) {}
  Status validate(const StageSpec& spec) const override {
    SL_RETURN_IF_ERROR(check_arity(spec, 1, 2));
    if (o_.k < 1) return invalid_argument("k must be >= 1, got " + std::to_string(o_.k));
    return ok_status();
  }
  Status process(StageIO& io) override {
    Tensor scores = io.inputs[0];
    if (o_.softmax) {
      SL_ASSIGN_OR_RETURN(scores, runtime::softmax_last_axis(scores));
    }
    SL_ASSIGN_OR_RETURN(runtime::TopK top, runtime::top_k_last_axis(scores, o_.k));
    io.outputs[0] = std::move(top.indices);
    io.outputs[1] = std::move(top.scores);
    return ok_status();
  }

 private:
  TopKOptions o_;
};

}  // namespace

std::shared_ptr<Stage> decode_image(DecodeImageOptions options) {
  return std::make_shared<DecodeImage>(options);
}
std::shared_ptr<Stage> resize_image(ResizeImageOptions options) {
  return std::make_shared<ResizeImage>(options);
}
std::shared_ptr<Stage> normalize_image(NormalizeImageOptions options) {
  return std::make_shared<NormalizeImage>(std::move(options));
}
std::shared_ptr<Stage> hwc_to_nchw() {
  return std::make_shared<HwcToNchw>();
}
std::shared_ptr<Stage> preprocess_image(ImagePreprocessOptions options) {
  return std::make_shared<PreprocessImage>(std::move(options));
}
std::shared_ptr<Stage> top_k(TopKOptions options) {
  return std::make_shared<TopKStage>(options);
}

}  // namespace stages

Result<std::unique_ptr<Pipeline>> build_image_classifier(std::shared_ptr<ServingModel> model,
                                                         const ImageClassifierOptions& options) {
  if (!model) return invalid_argument("no model given");
  const auto& ins = model->model().inputs();
  const auto& outs = model->model().outputs();
  // Pass 1: which model input and output, and the crop size the input implies.
  const TensorDesc* in = nullptr;
  if (options.model_input.empty()) {
    if (ins.size() != 1)
      return invalid_argument("the model has " + std::to_string(ins.size()) + " inputs; name the image input");
    in = &ins[0];
  } else {
    auto it = std::find_if(ins.begin(), ins.end(), [&](const TensorDesc& d) { return d.name == options.model_input; });
    if (it == ins.end()) return invalid_argument("the model has no input named '" + options.model_input + "'");
    in = &*it;
  }
  if (outs.empty()) return invalid_argument("the model has no outputs");
  const std::string out_name = options.model_output.empty() ? outs[0].name : options.model_output;
  if (in->dtype != DType::kFloat32)
    return invalid_argument("the model input '" + in->name + "' is " + dtype_name(in->dtype) + ", not float32");
  if (!in->dims.empty() && in->dims.size() != 4)
    return invalid_argument("the model input '" + in->name + "' is not NCHW (rank " + std::to_string(in->dims.size()) +
                            ")");
  const auto fixed = [&](size_t i) { return in->dims.size() == 4 && in->dims[i] > 0 ? in->dims[i] : int64_t{0}; };
  int64_t height = options.size, width = options.size;
  if (options.size <= 0) {
    height = fixed(2) ? fixed(2) : 224;
    width = fixed(3) ? fixed(3) : height;
  }
  if (options.size < 0 || options.resize < 0) return invalid_argument("size and resize must be >= 0");
  const int64_t resize = options.resize > 0 ? options.resize : std::max(height, width) * 256 / 224;
  const int channels = fixed(1) == 1 ? 1 : 3;

  // Pass 2: decode -> pre-process -> model -> top-k.
  const int q = options.queue_capacity;
  PipelineBuilder b;
  b.input("image");
  b.add_stage({.name = "decode",
               .inputs = {"image"},
               .outputs = {"pixels"},
               .instances = options.decode_instances,
               .queue_capacity = q},
              stages::decode_image({.channels = channels}));
  b.add_stage({.name = "preprocess",
               .inputs = {"pixels"},
               .outputs = {"tensor"},
               .instances = options.preprocess_instances,
               .queue_capacity = q},
              stages::preprocess_image({.resize = {.height = height, .width = width, .shorter_side = resize},
                                        .normalize = options.normalize}));
  b.add_model({.name = "model", .inputs = {"tensor"}, .outputs = {"logits"}, .instances = 1, .queue_capacity = q},
              std::move(model), {.model_inputs = {in->name}, .model_outputs = {out_name}});
  b.add_stage({.name = "top_k", .inputs = {"logits"}, .outputs = {"classes", "scores"}, .queue_capacity = q},
              stages::top_k(options.top_k));
  b.output("classes").output("scores");
  return b.build(options.pipeline);
}

}  // namespace streamline
