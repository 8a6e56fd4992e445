// Stress test of the guarded ONNX shape inference (src/graph/onnx_infer.h): for every
// default-domain schema of opsets 1..17, many random nodes that pass the schema's checks (random
// input ranks, dims, element types, missing types, attribute values, constant int64 inputs,
// small subgraphs) are run through infer_onnx_shapes() in a forked child. A child that dies is
// reported with the schema; the last node tried is written to <out_dir>/<op>_v<version>.txt.
//
//   ninja -C build-fuzz infer_stress
//   build-fuzz/fuzz/infer_stress 3000                 # cases per schema version
//   build-fuzz/fuzz/infer_stress 20000 Conv /tmp/out  # one operator, keep reproducers
//
// Exit status: the number of schema versions whose child crashed (0 = all survived).

#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "graph/onnx_infer.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SL_STRESS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SL_STRESS_ASAN 1
#endif

namespace {

using onnx::AttributeProto;
using onnx::OpSchema;
using onnx::TensorProto;

class NodeGenerator {
 public:
  explicit NodeGenerator(uint64_t seed) : rng_(seed) {}

  // Fills `m` with one node of `s` at `opset`; false when the result fails the schema's checks.
  bool build(const OpSchema& s, int opset, onnx::ModelProto& m) {
    m.Clear();
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    onnx::GraphProto* g = m.mutable_graph();
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(s.Name());
    const int max_in = std::min(s.max_input(), s.min_input() + 3);
    const int num_in = s.min_input() + pick(max_in - s.min_input() + 1);
    for (int i = 0; i < num_in; ++i) add_input(s, i, g, n);
    const int max_out = std::min(s.max_output(), s.min_output() + 2);
    const int num_out = s.min_output() + pick(max_out - s.min_output() + 1);
    for (int i = 0; i < num_out; ++i) n->add_output(pick(8) == 0 && i > 0 ? "" : "out" + std::to_string(i));
    for (const auto& [name, a] : s.attributes()) {
      if (!a.required && pick(2) == 0) continue;
      if (!add_attribute(name, a.type, n)) return false;
    }
    try {
      s.Verify(*n);
    } catch (...) {
      return false;
    }
    return true;
  }

 private:
  int pick(int n) { return n <= 0 ? 0 : static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  int64_t any_int() {
    static constexpr int64_t kEdge[] = {
        -3, -2, -1, 0, 1, 2, 3, 4, 5, int64_t{1} << 40, -(int64_t{1} << 40), int64_t{1} << 62, INT64_MAX, INT64_MIN};
    return pick(3) == 0 ? kEdge[pick(14)] : pick(6);
  }
  float any_float() {
    static constexpr float kEdge[] = {0.f, -1.f, 0.5f, 2.f, 1e30f, -1e30f, NAN, INFINITY};
    return kEdge[pick(8)];
  }
  std::string any_string() {
    static const char* kEdge[] = {"NOTSET",
                                  "SAME_UPPER",
                                  "SAME_LOWER",
                                  "VALID",
                                  "constant",
                                  "reflect",
                                  "edge",
                                  "nearest",
                                  "linear",
                                  "cubic",
                                  "DCR",
                                  "CRD",
                                  "",
                                  "asymmetric",
                                  "half_pixel",
                                  "i,j->ij",
                                  "...ii->...i",
                                  "ab,bc->ac",
                                  "abc",
                                  "MAX",
                                  "bilinear",
                                  "zeros",
                                  "tf_crop_and_resize",
                                  "round_prefer_floor",
                                  "sum",
                                  "mean",
                                  "none",
                                  "forward",
                                  "bidirectional",
                                  "Relu",
                                  "->",
                                  ",,"};
    return kEdge[pick(32)];
  }

  void random_shape(onnx::TypeProto_Tensor* tt) {
    if (pick(8) == 0) return;
    auto* shape = tt->mutable_shape();
    for (int i = pick(6); i > 0; --i) {
      auto* d = shape->add_dim();
      const int k = pick(10);
      if (k < 6)
        d->set_dim_value(k == 0 ? 0 : pick(5) + 1);
      else if (k < 8)
        d->set_dim_param(k == 6 ? "N" : "M");
      else if (k == 8)
        d->set_dim_value(int64_t{1} << 40);
    }
  }

  TensorProto int_tensor(const std::string& name) {
    TensorProto t;
    t.set_name(name);
    t.set_data_type(TensorProto::INT64);
    const bool scalar = pick(3) == 0;
    const int n = scalar ? 1 : pick(6);
    if (!scalar) t.add_dims(n);
    for (int i = 0; i < n; ++i) t.add_int64_data(any_int());
    return t;
  }

  void add_input(const OpSchema& s, int i, onnx::GraphProto* g, onnx::NodeProto* n) {
    if (i >= s.min_input() && pick(4) == 0) {
      n->add_input("");
      return;
    }
    const std::string name = "in" + std::to_string(i);
    n->add_input(name);
    const auto& params = s.inputs();
    const auto& types = params[std::min<size_t>(static_cast<size_t>(i), params.size() - 1)].GetTypes();
    onnx::TypeProto tp;
    if (!types.empty() && pick(10) != 0) {
      auto it = types.begin();
      std::advance(it, pick(static_cast<int>(types.size())));
      tp = onnx::Utils::DataTypeUtils::ToTypeProto(*it);
    } else {
      tp.mutable_tensor_type()->set_elem_type(1 + pick(16));
    }
    const bool int64 = tp.has_tensor_type() && tp.tensor_type().elem_type() == TensorProto::INT64;
    if (int64 && pick(2) == 0) {
      *g->add_initializer() = int_tensor(name);
      return;
    }
    auto* vi = g->add_input();
    vi->set_name(name);
    if (pick(10) == 0) return;  // a value whose type nobody knows
    if (tp.has_tensor_type()) random_shape(tp.mutable_tensor_type());
    *vi->mutable_type() = tp;
  }

  // A small body: Identity/Relu/Add nodes reading its inputs or the outer "in0", 0..3 outputs.
  onnx::GraphProto random_graph() {
    onnx::GraphProto g;
    g.set_name("body");
    std::vector<std::string> names = {"in0"};
    for (int i = pick(4); i > 0; --i) {
      auto* in = g.add_input();
      in->set_name("b_in" + std::to_string(i));
      names.push_back(in->name());
      if (pick(3)) {
        auto* tt = in->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(1 + pick(12));
        random_shape(tt);
      }
    }
    static const char* kOps[] = {"Identity", "Relu", "Add", "Conv", "Scan", "Loop", "If"};
    for (int i = pick(4); i > 0; --i) {
      auto* node = g.add_node();
      node->set_op_type(kOps[pick(7)]);
      for (int k = pick(3) + 1; k > 0; --k)
        node->add_input(names[static_cast<size_t>(pick(static_cast<int>(names.size())))]);
      node->add_output("b_v" + std::to_string(names.size()));
      names.push_back(node->output(0));
    }
    for (int i = pick(4); i > 0; --i) {
      auto* out = g.add_output();
      out->set_name(names[static_cast<size_t>(pick(static_cast<int>(names.size())))]);
      if (pick(2)) {
        auto* tt = out->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(1 + pick(12));
        random_shape(tt);
      }
    }
    return g;
  }

  bool add_attribute(const std::string& name, AttributeProto::AttributeType type, onnx::NodeProto* n) {
    AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    switch (type) {
      case AttributeProto::INT:
        a->set_i(any_int());
        break;
      case AttributeProto::FLOAT:
        a->set_f(any_float());
        break;
      case AttributeProto::STRING:
        a->set_s(any_string());
        break;
      case AttributeProto::INTS:
        for (int k = pick(7); k > 0; --k) a->add_ints(any_int());
        break;
      case AttributeProto::FLOATS:
        for (int k = pick(5); k > 0; --k) a->add_floats(any_float());
        break;
      case AttributeProto::STRINGS:
        for (int k = pick(4); k > 0; --k) a->add_strings(any_string());
        break;
      case AttributeProto::TENSOR: {
        TensorProto t = int_tensor("");
        if (pick(2)) {
          t.set_data_type(TensorProto::FLOAT);
          t.clear_int64_data();
          for (int k = t.dims_size() ? static_cast<int>(t.dims(0)) : 1; k > 0; --k) t.add_float_data(1.f);
        }
        *a->mutable_t() = t;
        break;
      }
      case AttributeProto::GRAPH:
        *a->mutable_g() = random_graph();
        break;
      default:
        return false;  // sparse tensors, type protos, graph lists: not generated
    }
    return true;
  }

  std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  const int cases = argc > 1 ? std::atoi(argv[1]) : 2000;
  const std::string only = argc > 2 ? argv[2] : "";
  const std::string out_dir = argc > 3 ? argv[3] : "";
  std::set<std::pair<std::string, int>> seen;
  std::vector<std::pair<const OpSchema*, int>> todo;
  for (const auto& s : onnx::OpSchemaRegistry::get_all_schemas()) {
    if (!s.domain().empty() || (!only.empty() && s.Name() != only)) continue;
    for (int v = 1; v <= 17; ++v) {
      const OpSchema* vs = onnx::OpSchemaRegistry::Schema(s.Name(), v, "");
      if (vs && !vs->deprecated() && seen.insert({vs->Name(), vs->since_version()}).second) todo.push_back({vs, v});
    }
  }
  std::cerr << todo.size() << " schema versions, " << cases << " cases each\n";
  int crashed = 0;
  for (const auto& [schema, opset] : todo) {
    const std::string tag = schema->Name() + "_v" + std::to_string(schema->since_version());
    const pid_t pid = fork();
    if (pid == 0) {
#ifndef SL_STRESS_ASAN  // AddressSanitizer reserves terabytes of address space; it has its own limits
      const rlimit mem = {rlim_t{4} << 30, rlim_t{4} << 30};
      setrlimit(RLIMIT_AS, &mem);
#endif
      alarm(120);
      NodeGenerator gen(std::hash<std::string>()(tag));
      onnx::ModelProto m;
      const std::map<std::string, int> opsets = {{"", opset}};
      for (int c = 0; c < cases; ++c) {
        if (!gen.build(*schema, opset, m)) continue;
        if (!out_dir.empty()) {
          if (FILE* f = std::fopen((out_dir + "/" + tag + ".txt").c_str(), "w")) {
            std::fputs(m.DebugString().c_str(), f);
            std::fclose(f);
          }
        }
        std::string error;
        (void)streamline::graph::infer_onnx_shapes(m, opsets, &error);
      }
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status) || WEXITSTATUS(status) != 0) {
      ++crashed;
      std::cout << "CRASH " << tag << (WIFSIGNALED(status) ? " signal " + std::to_string(WTERMSIG(status)) : "")
                << std::endl;
    }
  }
  std::cerr << crashed << " schema versions crashed\n";
  return crashed;
}
