// Einsum (opset 12) for float32, float64, int32 and int64: explicit ("ij,jk->ik") and implicit
// ("ij,jk") equations, ellipses with broadcasting, repeated labels (diagonals) and any number of
// operands.
//
// reshape() turns the equation into a plan of two kinds of steps, run() executes it:
//   Gather  out[dst labels] = sum over the other labels of in[src labels]: takes diagonals, sums out
//           labels nothing later needs, permutes, and broadcasts size-1 dimensions. One odometer loop.
//   Gemm    C[b, m, n] = A[b, m, k] . B[b, k, n] (dnnl_sgemm for float32, plain loops otherwise).
// Operands are folded left to right: each pair is gathered into [batch, kept-A, contracted] and
// [batch, contracted, kept-B] and multiplied; gathers that would be identity copies are skipped.
// Intermediates live in the workspace.

#include <dnnl.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "ops/cpu/extra_common.h"
#include "ops/cpu/families.h"

namespace streamline::ops::cpu {
namespace {

constexpr int kEllipsisBase = 1000;  // label ids of ellipsis dims: kEllipsisBase + position
constexpr size_t kMaxLoops = 64;     // distinct labels one gather step may loop over

// Where a step reads or writes: an input, the output, or the workspace at an element offset.
struct Buf {
  int input = -1;       // >= 0: ctx.inputs[input]
  bool output = false;  // the node's output
  int64_t offset = 0;   // workspace element offset otherwise
};

struct Step {
  bool gemm = false;
  Buf a, b, dst;
  // Gather: loop sizes and per-loop strides into src and dst.
  std::vector<int64_t> sizes, src_strides, dst_strides;
  int64_t dst_numel = 0;
  // Gemm dims.
  int64_t batch = 0, m = 0, k = 0, n = 0;
};

struct Plan {
  std::vector<Step> steps;
  int64_t workspace_elems = 0;
  Shape out_shape;
};

// A tensor during planning: where it is, its labels (one per axis, possibly repeated) and dims.
struct Term {
  Buf buf;
  std::vector<int> labels;
  std::vector<int64_t> dims;
};

std::string strip(const std::string& s) {
  std::string o;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c))) o += c;
  return o;
}

class EinsumKernel final : public DataKernel {
 public:
  using DataKernel::DataKernel;

  Status init(const KernelCreateArgs& a) {
    equation_ = strip(a.node.attr_string("equation", ""));
    if (equation_.empty()) return invalid("missing 'equation'");
    return ok_status();
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> in) const override {
    if (in.empty()) return invalid("expected at least one input");
    const DType dt = in[0].dtype;
    if (dt != DType::kFloat32 && dt != DType::kFloat64 && dt != DType::kInt32 && dt != DType::kInt64)
      return unsupported_error(std::string("dtype ") + dtype_name(dt));
    for (const TensorInfo& t : in)
      if (!t.present() || t.dtype != dt) return invalid("inputs must be present and share one dtype");
    SL_ASSIGN_OR_RETURN(Plan plan, make_plan(in));
    ReshapeResult rr;
    rr.outputs.push_back(OutputInfo{dt, plan.out_shape, Layout::kPlain});
    rr.workspace_bytes = static_cast<size_t>(plan.workspace_elems) * dtype_size(dt);
    rr.state = std::make_shared<Plan>(std::move(plan));
    return rr;
  }

  Status run(const RunContext& ctx) const override {
    const auto& plan = *static_cast<const Plan*>(ctx.state);
    switch (ctx.outputs[0].dtype()) {
      case DType::kFloat32:
        return execute<float>(plan, ctx);
      case DType::kFloat64:
        return execute<double>(plan, ctx);
      case DType::kInt32:
        return execute<int32_t>(plan, ctx);
      case DType::kInt64:
        return execute<int64_t>(plan, ctx);
      default:
        return unsupported_error("dtype");
    }
  }

 private:
  // Parses one term ("ij", "...ij") of an operand of `rank` into label ids.
  Result<std::vector<int>> parse_term(const std::string& term, int64_t rank, int64_t* max_ellipsis) const {
    std::vector<int> labels;
    const size_t dots = term.find("...");
    int64_t letters = 0;
    for (char c : term)
      if (std::isalpha(static_cast<unsigned char>(c)))
        ++letters;
      else if (c != '.')
        return invalid(std::string("bad character '") + c + "' in equation");
    if (dots == std::string::npos) {
      if (letters != rank)
        return invalid("term '" + term + "' has " + std::to_string(letters) + " labels for rank " +
                       std::to_string(rank));
      for (char c : term) labels.push_back(static_cast<unsigned char>(c));
      return labels;
    }
    if (term.find("...", dots + 3) != std::string::npos) return invalid("more than one ellipsis in a term");
    const int64_t e = rank - letters;
    if (e < 0) return invalid("term '" + term + "' has more labels than the operand's rank");
    *max_ellipsis = std::max(*max_ellipsis, e);
    for (size_t i = 0; i < dots; ++i) labels.push_back(static_cast<unsigned char>(term[i]));
    for (int64_t j = 0; j < e; ++j) labels.push_back(-1 - static_cast<int>(e - j));  // resolved below
    for (size_t i = dots + 3; i < term.size(); ++i) labels.push_back(static_cast<unsigned char>(term[i]));
    return labels;
  }

  Result<Plan> make_plan(std::span<const TensorInfo> in) const {
    const size_t arrow = equation_.find("->");
    const std::string lhs = equation_.substr(0, arrow);
    std::vector<std::string> terms;
    for (size_t start = 0;;) {
      const size_t comma = lhs.find(',', start);
      terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (terms.size() != in.size())
      return invalid("equation has " + std::to_string(terms.size()) + " operands, node has " +
                     std::to_string(in.size()));
    int64_t max_e = 0;
    std::vector<Term> ops(in.size());
    std::map<int, int64_t> size;
    for (size_t i = 0; i < in.size(); ++i) {
      SL_ASSIGN_OR_RETURN(ops[i].labels, parse_term(terms[i], static_cast<int64_t>(in[i].shape.rank()), &max_e));
      ops[i].buf.input = static_cast<int>(i);
      ops[i].dims = in[i].shape.to_vector();
    }
    // Ellipsis dims right-aligned: -1 - (dims from the right) becomes kEllipsisBase + position.
    for (Term& t : ops)
      for (int& l : t.labels)
        if (l < 0) l = kEllipsisBase + static_cast<int>(max_e) + (l + 1);
    for (Term& t : ops)
      for (size_t a = 0; a < t.labels.size(); ++a) {
        auto [it, fresh] = size.emplace(t.labels[a], t.dims[a]);
        if (fresh || it->second == t.dims[a] || t.dims[a] == 1) continue;
        if (it->second == 1) {
          it->second = t.dims[a];
          continue;
        }
        return invalid("label sizes differ: " + std::to_string(it->second) + " vs " + std::to_string(t.dims[a]));
      }
    std::vector<int> out;
    if (arrow != std::string::npos) {
      const std::string rhs = equation_.substr(arrow + 2);
      const size_t dots = rhs.find("...");
      for (size_t i = 0; i < rhs.size(); ++i) {
        if (dots != std::string::npos && i == dots) {
          for (int64_t j = 0; j < max_e; ++j) out.push_back(kEllipsisBase + static_cast<int>(j));
          i += 2;
          continue;
        }
        if (!std::isalpha(static_cast<unsigned char>(rhs[i]))) return invalid("bad output term '" + rhs + "'");
        const int l = static_cast<unsigned char>(rhs[i]);
        if (!size.count(l)) return invalid(std::string("output label '") + rhs[i] + "' is not in any input");
        if (std::count(out.begin(), out.end(), l)) return invalid("repeated output label");
        out.push_back(l);
      }
    } else {
      for (int64_t j = 0; j < max_e; ++j) out.push_back(kEllipsisBase + static_cast<int>(j));
      std::map<int, int> count;
      for (const Term& t : ops)
        for (int l : t.labels)
          if (l < kEllipsisBase) ++count[l];
      for (const auto& [l, c] : count)
        if (c == 1) out.push_back(l);
    }

    Plan plan;
    for (int l : out) plan.out_shape.push_back(size[l]);
    // Labels needed after operand i: the output's and those of operands > i.
    auto needed_after = [&](size_t i) {
      std::set<int> s(out.begin(), out.end());
      for (size_t j = i + 1; j < ops.size(); ++j) s.insert(ops[j].labels.begin(), ops[j].labels.end());
      return s;
    };
    Term acc = ops[0];
    for (size_t i = 1; i < ops.size(); ++i) {
      const std::set<int> keep = needed_after(i);
      const std::set<int> la(acc.labels.begin(), acc.labels.end()), lb(ops[i].labels.begin(), ops[i].labels.end());
      std::vector<int> batch, a_only, contracted, b_only;
      for (int l : la) {
        if (lb.count(l))
          (keep.count(l) ? batch : contracted).push_back(l);
        else if (keep.count(l))
          a_only.push_back(l);
      }
      for (int l : lb)
        if (!la.count(l) && keep.count(l)) b_only.push_back(l);
      std::vector<int> a_target = batch, b_target = batch;
      a_target.insert(a_target.end(), a_only.begin(), a_only.end());
      a_target.insert(a_target.end(), contracted.begin(), contracted.end());
      b_target.insert(b_target.end(), contracted.begin(), contracted.end());
      b_target.insert(b_target.end(), b_only.begin(), b_only.end());
      Term a = gather(plan, acc, a_target, size);
      Term b = gather(plan, ops[i], b_target, size);
      auto prod = [&](const std::vector<int>& ls) {
        int64_t p = 1;
        for (int l : ls) p *= size[l];
        return p;
      };
      Step st;
      st.gemm = true;
      st.a = a.buf;
      st.b = b.buf;
      st.batch = prod(batch);
      st.m = prod(a_only);
      st.k = prod(contracted);
      st.n = prod(b_only);
      st.dst.offset = plan.workspace_elems;
      plan.workspace_elems += st.batch * st.m * st.n;
      Term c;
      c.buf = st.dst;
      c.labels = batch;
      c.labels.insert(c.labels.end(), a_only.begin(), a_only.end());
      c.labels.insert(c.labels.end(), b_only.begin(), b_only.end());
      for (int l : c.labels) c.dims.push_back(size[l]);
      plan.steps.push_back(st);
      acc = c;
    }
    Term final_term = gather(plan, acc, out, size, /*to_output=*/true);
    if (!final_term.buf.output) {
      // The last result is already in output order: retarget the step that made it.
      if (plan.steps.empty() || final_term.buf.input >= 0) {
        Step copy = gather_step(acc, out, size);
        copy.a = final_term.buf;
        copy.dst.output = true;
        plan.steps.push_back(copy);
      } else {
        plan.steps.back().dst = Buf{-1, true, 0};
      }
    }
    for (const Step& st : plan.steps)
      if (st.sizes.size() > kMaxLoops) return unsupported_error("too many distinct labels");
    return plan;
  }

  // The gather step that turns `t` into `target` labels (loops: target labels, then summed ones).
  static Step gather_step(const Term& t, const std::vector<int>& target, std::map<int, int64_t>& size) {
    Step st;
    std::vector<int> loops = target;
    for (int l : t.labels)
      if (std::find(loops.begin(), loops.end(), l) == loops.end()) loops.push_back(l);
    std::vector<int64_t> src_stride(t.labels.size());
    int64_t s = 1;
    for (size_t a = t.labels.size(); a-- > 0;) {
      src_stride[a] = s;
      s *= t.dims[a];
    }
    int64_t d = 1;
    std::vector<int64_t> dst_stride(target.size());
    for (size_t a = target.size(); a-- > 0;) {
      dst_stride[a] = d;
      d *= size[target[a]];
    }
    st.dst_numel = d;
    for (size_t li = 0; li < loops.size(); ++li) {
      const int l = loops[li];
      bool in_src = false;
      int64_t ss = 0;
      for (size_t a = 0; a < t.labels.size(); ++a)
        if (t.labels[a] == l) {
          in_src = true;
          if (t.dims[a] != 1) ss += src_stride[a];
        }
      st.sizes.push_back(in_src || li < target.size() ? size[l] : 1);
      st.src_strides.push_back(ss);
      st.dst_strides.push_back(li < target.size() ? dst_stride[li] : 0);
    }
    // A summed label whose only occurrences have size 1 loops once.
    for (size_t li = target.size(); li < loops.size(); ++li) {
      int64_t actual = 1;
      for (size_t a = 0; a < t.labels.size(); ++a)
        if (t.labels[a] == loops[li]) actual = std::max(actual, t.dims[a]);
      st.sizes[li] = actual;
    }
    return st;
  }

  // Adds a gather of `t` into `target` labels unless that would be an identity copy.
  static Term gather(Plan& plan, const Term& t, const std::vector<int>& target, std::map<int, int64_t>& size,
                     bool to_output = false) {
    std::vector<int64_t> target_dims;
    for (int l : target) target_dims.push_back(size[l]);
    if (t.labels == target && t.dims == target_dims) return t;
    Step st = gather_step(t, target, size);
    st.a = t.buf;
    if (to_output) {
      st.dst.output = true;
    } else {
      st.dst.offset = plan.workspace_elems;
      plan.workspace_elems += st.dst_numel;
    }
    plan.steps.push_back(st);
    Term r;
    r.buf = st.dst;
    r.labels = target;
    r.dims = target_dims;
    return r;
  }

  template <typename T>
  static T* ptr(const Buf& b, const RunContext& ctx) {
    if (b.output) return ctx.outputs[0].data<T>();
    if (b.input >= 0) return ctx.inputs[static_cast<size_t>(b.input)].data<T>();
    return static_cast<T*>(ctx.workspace) + b.offset;
  }

  template <typename T>
  Status execute(const Plan& plan, const RunContext& ctx) const {
    for (const Step& st : plan.steps) {
      if (st.gemm) {
        const T* a = ptr<T>(st.a, ctx);
        const T* b = ptr<T>(st.b, ctx);
        T* c = ptr<T>(st.dst, ctx);
        for (int64_t bi = 0; bi < st.batch; ++bi)
          gemm(st.m, st.n, st.k, a + bi * st.m * st.k, b + bi * st.k * st.n, c + bi * st.m * st.n);
        continue;
      }
      const T* src = ptr<T>(st.a, ctx);
      T* dst = ptr<T>(st.dst, ctx);
      std::fill(dst, dst + st.dst_numel, T(0));
      const size_t loops = st.sizes.size();
      int64_t total = 1;
      for (int64_t s : st.sizes) total *= s;
      if (total == 0) continue;
      int64_t idx[kMaxLoops] = {};
      int64_t so = 0, dof = 0;
      for (int64_t it = 0; it < total; ++it) {
        dst[dof] += src[so];
        for (size_t l = loops; l-- > 0;) {
          so += st.src_strides[l];
          dof += st.dst_strides[l];
          if (++idx[l] < st.sizes[l]) break;
          so -= st.src_strides[l] * idx[l];
          dof -= st.dst_strides[l] * idx[l];
          idx[l] = 0;
        }
      }
    }
    return ok_status();
  }

  template <typename T>
  static void gemm(int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c) {
    if constexpr (std::is_same_v<T, float>) {
      if (m > 0 && n > 0 && k > 0) {
        dnnl_sgemm('N', 'N', m, n, k, 1.f, a, k, b, n, 0.f, c, n);
        return;
      }
    }
    std::fill(c, c + m * n, T(0));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        const T av = a[i * k + p];
        for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * b[p * n + j];
      }
  }

  std::string equation_;
};

}  // namespace

Status register_einsum(KernelRegistry& reg) {
  return add_typed_def(reg, "Einsum", 12, DType::kUndefined, make_factory<EinsumKernel>());
}

}  // namespace streamline::ops::cpu
