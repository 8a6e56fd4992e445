// `streamline classify`: JPEG/PNG images through an image-classification pipeline (decode ->
// resize shorter side + centre crop -> normalise -> NCHW -> model -> softmax top-k).

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli_common.h"
#include "cli_flags.h"
#include "commands.h"
#include "preflight.h"
#include "progress.h"
#include "streamline/pipeline.h"

namespace streamline::tools {
namespace {

struct ClassifyFlags {
  ModelFlags model;
  std::vector<std::string> images;
  int top_k = 5;
  int64_t size = 0;
  int64_t resize = 0;
  std::string mean;
  std::string std;
  std::string labels;
  int max_batch = 8;
  bool stats = false;
};

// "0.485,0.456,0.406" -> floats.
Result<std::vector<float>> parse_floats(const std::string& flag, const std::string& text) {
  std::vector<float> v;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      v.push_back(std::stof(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      return invalid_argument(flag + ": '" + item + "' is not a number");
    }
  }
  if (v.empty()) return invalid_argument(flag + " needs comma-separated numbers");
  return v;
}

Result<Tensor> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) return invalid_argument("'" + path + "' is empty");
  return Tensor::from_vector<uint8_t>(Shape{static_cast<int64_t>(bytes.size())}, bytes);
}

// One label per line; a file that cannot be read is an error, an empty one too.
Result<std::vector<std::string>> read_labels(const std::string& path) {
  SL_RETURN_IF_ERROR(check_input_file("--labels", path));
  std::vector<std::string> labels;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) labels.push_back(line);
  if (in.bad()) return invalid_argument("--labels: cannot read '" + path + "': " + std::strerror(errno));
  if (labels.empty()) return invalid_argument("--labels: no labels in '" + path + "' (it is empty)");
  return labels;
}

void print_stats(const PipelineStats& s) {
  std::vector<std::vector<std::string>> rows{
      {"stage", "processed", "failed", "queue p50 ms", "run p50 ms", "max queued"}};
  for (const auto& st : s.stages)
    rows.push_back({st.name, std::to_string(st.processed), std::to_string(st.failed), fmt(st.queue.p50_us / 1000.0),
                    fmt(st.process.p50_us / 1000.0), std::to_string(st.max_queue_depth)});
  print_table(rows);
}

// Prints a setup error; exit code 2 (bad model or flags), as `run` does.
int report(const Status& s) {
  std::cerr << "error: " << s.to_string() << std::endl;
  return 2;
}

int classify(const ClassifyFlags& f) {
  // Pass 1: options and the model.
  ImageClassifierOptions co;
  co.size = f.size;
  co.resize = f.resize;
  co.top_k.k = f.top_k;
  if (!f.mean.empty()) {
    auto v = parse_floats("--mean", f.mean);
    if (!v.ok()) return report(v.status());
    co.normalize.mean = *v;
  }
  if (!f.std.empty()) {
    auto v = parse_floats("--std", f.std);
    if (!v.ok()) return report(v.status());
    co.normalize.std = *v;
  }
  std::vector<std::string> labels;
  if (!f.labels.empty()) {
    auto read = read_labels(f.labels);
    if (!read.ok()) return report(read.status());
    labels = std::move(*read);
  }
  auto model = load_model(f.model);
  if (!model.ok()) return report(model.status());
  const auto& ins = (*model)->inputs();
  // A dynamic image height or width gets a crop chosen here unless --size gives one; say which (the
  // rule of build_image_classifier: the model's height, else 224; its width, else the height).
  if (f.size == 0 && ins.size() == 1 && ins[0].dims.size() == 4 && (ins[0].dims[2] < 0 || ins[0].dims[3] < 0)) {
    const int64_t h = ins[0].dims[2] > 0 ? ins[0].dims[2] : 224, w = ins[0].dims[3] > 0 ? ins[0].dims[3] : h;
    std::cerr << "note: input '" << ins[0].name << "': the image size is dynamic; using a " << h << "x" << w
              << " crop (set it with --size S)" << std::endl;
  }
  // Batch across images when the model's batch dimension is free.
  const bool free_batch = ins.size() == 1 && !ins[0].dims.empty() && ins[0].dims[0] < 0;
  ServingOptions so;
  so.threads_per_instance = f.model.options.num_threads;
  so.batching.max_batch_size = free_batch ? std::max(1, std::min(f.max_batch, static_cast<int>(f.images.size()))) : 1;
  so.batching.max_queue_delay_us = so.batching.max_batch_size > 1 ? 2000 : 0;
  auto served = ServingModel::create(*model, so);
  if (!served.ok()) return report(served.status());
  auto pipeline = build_image_classifier(std::shared_ptr<ServingModel>(std::move(*served)), co);
  if (!pipeline.ok()) return report(pipeline.status());

  // Pass 2: every image in flight at once; answers printed in the order given.
  const auto t0 = std::chrono::steady_clock::now();
  ProgressOptions po;
  po.title = "classify";
  po.unit = "images";
  po.total = static_cast<int64_t>(f.images.size());
  Progress progress(po);
  std::vector<std::future<InferResponse>> answers(f.images.size());
  std::vector<Status> read_errors(f.images.size());
  for (size_t i = 0; i < f.images.size(); ++i) {
    auto bytes = read_file(f.images[i]);
    if (!bytes.ok()) {
      read_errors[i] = bytes.status();
      continue;
    }
    InferRequest r;
    r.id = i;
    r.inputs["image"] = std::move(*bytes);
    answers[i] = (*pipeline)->submit(std::move(r));
  }
  int failed = 0;
  std::vector<std::vector<std::string>> rows{{"image", "rank", "class", "score"}};
  if (!labels.empty()) rows[0].push_back("label");
  for (size_t i = 0; i < f.images.size(); ++i) {
    InferResponse r;
    if (read_errors[i].ok()) {
      r = answers[i].get();
    } else {
      r.status = read_errors[i];
    }
    progress.advance();
    if (!r.status.ok()) {
      progress.message("error: " + f.images[i] + ": " + r.status.to_string());
      progress.set_note(std::to_string(++failed) + " failed");
      continue;
    }
    const Tensor& classes = r.outputs.at("classes");
    const Tensor& scores = r.outputs.at("scores");
    for (int64_t k = 0; k < classes.numel(); ++k) {
      const int64_t c = classes.data<int64_t>()[k];
      rows.push_back(
          {k == 0 ? f.images[i] : "", std::to_string(k + 1), std::to_string(c), fmt(scores.data<float>()[k], 6)});
      if (!labels.empty())
        rows.back().push_back(c < static_cast<int64_t>(labels.size()) ? labels[static_cast<size_t>(c)] : "?");
    }
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  progress.finish();
  print_table(rows);
  std::cout << f.images.size() << " image(s) in " << fmt(ms) << " ms";
  if (failed) std::cout << ", " << failed << " failed";
  std::cout << std::endl;
  if (f.stats) print_stats((*pipeline)->stats());
  return failed ? 1 : 0;
}

}  // namespace

Runner add_classify_command(CLI::App& app) {
  auto f = std::make_shared<ClassifyFlags>();
  CLI::App* c = app.add_subcommand("classify", "Classify JPEG/PNG images with an image-classification model");
  add_model_flags(c, f->model);
  c->add_option("images", f->images, "JPEG or PNG files")->required();
  c->add_option("--top-k", f->top_k, "Classes to print per image")->check(int_range(1, 1000000));
  c->add_option("--size", f->size, "Crop size (default: the model's input size, else 224)")
      ->check(int_range(1, 65536, "pixels"));
  c->add_option("--resize", f->resize, "Shorter side before the centre crop (default: size * 256 / 224)")
      ->check(int_range(1, 65536, "pixels"));
  c->add_option("--mean", f->mean, "Per-channel mean after scaling to [0, 1] (default 0.485,0.456,0.406)");
  c->add_option("--std", f->std, "Per-channel std (default 0.229,0.224,0.225)");
  c->add_option("--labels", f->labels, "Text file with one class label per line");
  c->add_option("--max-batch", f->max_batch, "Images per model batch at most (models with a free batch size)")
      ->check(int_range(1, 1024));
  c->add_flag("--stats", f->stats, "Print per-stage pipeline statistics");
  return [f] { return classify(*f); };
}

}  // namespace streamline::tools
