// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool on oneDNN's pooling primitive.
//
// Output sizes follow the ONNX specs, including ceil_mode (a window that would start in the end
// padding is dropped). oneDNN derives the output size from the end padding, so in ceil mode the
// end padding handed to it is widened to cover the last window. For AveragePool with
// count_include_pad, oneDNN divides by the full kernel size while ONNX counts only the taps inside
// the padded input, so outputs whose window reaches past the end padding are rescaled after the
// primitive runs.

#include <algorithm>
#include <climits>
#include <limits>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "ops/cpu/families.h"
#include "ops/cpu/math_common.h"
#include "ops/cpu/onednn_common.h"
#include "ops/cpu/pool_direct.h"
#include "ops/cpu/task_runner.h"
#include "ops/op_params.h"

namespace streamline::ops::cpu {
namespace {

using dnnl::memory;

enum class PoolKind { kMax, kAvg, kGlobalMax, kGlobalAvg };

struct PoolGeom {
  int64_t n = 0, c = 0;
  std::vector<int64_t> in, k, out, s, d, pl, pr;  // pr: the end padding given to oneDNN
  Shape y;
};

struct PoolState {
  PoolGeom g;
  memory::desc src_md, dst_md;
  bool channels_last = false;
  // Per output spatial position (row-major), the factor correcting oneDNN's include-padding
  // average; empty when no output needs one.
  std::vector<float> fix;
  // 2-D MaxPool on 8-channel vectors (nChw8c, nChw16c, or channels-last with C % 8 == 0) runs our
  // own loop: oneDNN 2.6's AVX2 pooling measured 5 to 10 times slower on GoogLeNet's shapes.
  bool own_max8 = false;
  // A global pool over a blocked or channels-last 2-D input runs our own loop (global_pool_rows):
  // oneDNN 2.6 splits pooling work by output pixel, of which a global pool has one per image, so
  // over a channels-last input it ran on one thread (EfficientNet-B3's squeeze-excitation pools
  // took as long on two threads as on one).
  bool own_global = false;
  size_t partial_floats = 0;  // workspace floats for per-task partial results
  int block = 0;              // channels per block of a blocked input, else 0
  size_t scratch_budget = 0;
  PrimitiveCache cache;
};

class PoolKernel final : public Kernel {
 public:
  static Result<std::unique_ptr<Kernel>> create(const KernelCreateArgs& args, PoolKind kind) {
    auto k = std::make_unique<PoolKernel>();
    const graph::Node& node = args.node;
    k->who_ = node.describe();
    k->kind_ = kind;
    // oneDNN's inference pooling has no argmax: MaxPool's Indices come from the direct loops.
    if (node.outputs.size() > 1 && node.outputs[1] != graph::kNoValue) return make_direct_pool(args);
    SL_ASSIGN_OR_RETURN(k->attrs_, read_pool_attrs(node, k->global(), k->who_));
    return std::unique_ptr<Kernel>(std::move(k));
  }

  LayoutSupport layout_support() const override { return LayoutSupport::kPreferChannelsLast; }
  // Blocked when the channels fill blocks, except that on AVX-512 a channels-last input stays so
  // (as convolutions do there; see conv.cc).
  Layout preferred_layout(std::span<const TensorInfo> inputs, int block) const override {
    const bool whole = block > 0 && !inputs.empty() && inputs[0].shape.rank() == 4 && inputs[0].shape[1] % block == 0;
    if (block == 16 && !inputs.empty() && inputs[0].layout == Layout::kChannelsLast) return Layout::kChannelsLast;
    return whole ? blocked_layout(block) : Layout::kChannelsLast;
  }

  Result<ReshapeResult> reshape(std::span<const TensorInfo> inputs) const override {
    if (inputs.empty() || !inputs[0].present()) return invalid_argument(who_ + ": needs input X");
    const TensorInfo& x = inputs[0];
    if (x.dtype != DType::kFloat32) return unsupported(who_ + ": only float32 is supported");
    auto st = std::make_shared<PoolState>();
    SL_ASSIGN_OR_RETURN(st->g, geometry(x.shape));
    const PoolGeom& g = st->g;
    st->channels_last = x.layout == Layout::kChannelsLast;
    const int block = layout_block(x.layout);
    const bool blocked = block > 0;
    if (x.layout != Layout::kPlain && x.shape.rank() != 4)
      return invalid_argument(who_ + ": " + layout_name(x.layout) + " input must be rank 4");
    if (blocked && x.shape[1] % block != 0)
      return invalid_argument(who_ + ": " + layout_name(x.layout) + " needs channels divisible by " +
                              std::to_string(block));
    memory::dims sd{g.n, g.c}, dd{g.n, g.c};
    sd.insert(sd.end(), g.in.begin(), g.in.end());
    dd.insert(dd.end(), g.out.begin(), g.out.end());
    if (blocked) {
      const auto tag = block == 16 ? memory::format_tag::nChw16c : memory::format_tag::nChw8c;
      st->src_md = memory::desc(sd, memory::data_type::f32, tag);
      st->dst_md = memory::desc(dd, memory::data_type::f32, tag);
    } else {
      st->src_md = st->channels_last ? permuted_md(sd, {0, 2, 3, 1}) : plain_md(sd);
      st->dst_md = st->channels_last ? permuted_md(dd, {0, 2, 3, 1}) : plain_md(dd);
    }
    if (kind_ == PoolKind::kAvg && attrs_.count_include_pad) compute_fix(*st);
    st->block = block;
    st->own_max8 = kind_ == PoolKind::kMax && g.in.size() == 2 && g.c % 8 == 0 && (blocked || st->channels_last);
    if (st->own_max8) {
      ReshapeResult r;
      r.outputs.push_back(OutputInfo{DType::kFloat32, g.y, x.layout});
      r.state = std::move(st);
      return r;
    }
    st->own_global = global() && g.in.size() == 2 && g.in[0] * g.in[1] > 0 && (blocked || st->channels_last);
    if (st->own_global) {
      const GlobalRows rows = global_rows(*st);
      // Room for the partial results of at least kGlobalPieces threads, or as many as planned
      // for (a run on more threads than the room allows splits less: global_split).
      const int room = std::max(kGlobalPieces, current_omp_threads());
      st->partial_floats = static_cast<size_t>(rows.groups * global_split(rows, room, SIZE_MAX) * rows.lanes);
      ReshapeResult r;
      r.outputs.push_back(OutputInfo{DType::kFloat32, g.y, Layout::kPlain});
      r.workspace_bytes = st->partial_floats * sizeof(float);
      r.state = std::move(st);
      return r;
    }

    const int nthr = current_omp_threads();
    SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p, st->cache.get(nthr, [&] { return build(*st, nthr, SIZE_MAX); }));
    st->scratch_budget = p->scratchpad_bytes;
    ReshapeResult r;
    // A global pool's [N, C, 1, 1] output has the same bytes in every layout: call it plain.
    r.outputs.push_back(OutputInfo{DType::kFloat32, g.y, global() ? Layout::kPlain : x.layout});
    r.workspace_bytes = st->scratch_budget;
    r.state = std::move(st);
    return r;
  }

  Status run(const RunContext& ctx) const override {
    const auto* st = static_cast<const PoolState*>(ctx.state);
    if (!st) return internal_error(who_ + ": run without reshape state");
    const int nthr = std::max(1, ctx.num_threads);
    Tensor& y = ctx.outputs[0];
    if (st->own_max8) {
      if (st->g.d[0] == 1 && st->g.d[1] == 1 && separable_lanes(*st) == 16)
        max_pool_separable<16>(*st, ctx.inputs[0].data<float>(), y.data<float>(), nthr);
      else if (st->g.d[0] == 1 && st->g.d[1] == 1)
        max_pool_separable<8>(*st, ctx.inputs[0].data<float>(), y.data<float>(), nthr);
      else
        max_pool_vec8(*st, ctx.inputs[0].data<float>(), y.data<float>(), nthr);
      return ok_status();
    }
    if (st->own_global) {
      float* partial = static_cast<float*>(ctx.workspace);
      if (kind_ == PoolKind::kGlobalMax)
        global_pool_rows<true>(*st, ctx.inputs[0].data<float>(), y.data<float>(), partial, nthr);
      else
        global_pool_rows<false>(*st, ctx.inputs[0].data<float>(), y.data<float>(), partial, nthr);
      return ok_status();
    }
    ensure_omp_threads(nthr);
    SL_ASSIGN_OR_RETURN(const BuiltPrimitive* p,
                        st->cache.get(nthr, [&] { return build(*st, nthr, st->scratch_budget); }));
    std::unordered_map<int, memory> args;
    try {
      args.emplace(DNNL_ARG_SRC, wrap(st->src_md, ctx.inputs[0].raw()));
      args.emplace(DNNL_ARG_DST, wrap(st->dst_md, y.raw()));
    } catch (const dnnl::error& e) {
      return dnnl_error_status(e, who_);
    }
    SL_RETURN_IF_ERROR(execute(*p, args, ctx.workspace).with_context(who_));
    if (!st->fix.empty()) apply_fix(*st, y.data<float>());
    return ok_status();
  }

 private:
  bool global() const { return kind_ == PoolKind::kGlobalAvg || kind_ == PoolKind::kGlobalMax; }

  Result<PoolGeom> geometry(const Shape& x) const {
    if (x.rank() < 3 || x.rank() > 5) return unsupported(who_ + ": input must be rank 3 to 5, got " + x.to_string());
    SL_ASSIGN_OR_RETURN(std::vector<PoolAxis> axes, pool_axes(attrs_, x, global(), who_));
    PoolGeom g;
    g.n = x[0];
    g.c = x[1];
    g.y = Shape{g.n, g.c};
    for (const PoolAxis& a : axes) {
      g.in.push_back(a.in);
      g.k.push_back(a.k);
      g.s.push_back(a.s);
      g.d.push_back(a.d);
      g.pl.push_back(a.pad_begin);
      // oneDNN wants the end padding that yields exactly `out` windows.
      g.pr.push_back(a.pad_end_fit);
      g.out.push_back(a.out);
      g.y.push_back(a.out);
    }
    return g;
  }

  // For count_include_pad: ONNX counts the taps inside [-pad_begin, in + pad_end); oneDNN divides
  // by the kernel size. Differs only where ceil_mode widened the end padding.
  void compute_fix(PoolState& st) const {
    const PoolGeom& g = st.g;
    const size_t nsp = g.in.size();
    std::vector<std::vector<float>> per_axis(nsp);
    bool any = false;
    for (size_t i = 0; i < nsp; ++i) {
      const int64_t limit = g.in[i] + (attrs_.pads.empty() || attrs_.auto_pad != "NOTSET" ? 0 : attrs_.pads[i + nsp]);
      for (int64_t o = 0; o < g.out[i]; ++o) {
        int64_t count = 0;
        for (int64_t t = 0; t < g.k[i]; ++t)
          if (o * g.s[i] - g.pl[i] + t * g.d[i] < limit) ++count;
        per_axis[i].push_back(count > 0 ? static_cast<float>(g.k[i]) / static_cast<float>(count) : 1.f);
        if (count != g.k[i]) any = true;
      }
    }
    if (!any || attrs_.auto_pad == "SAME_UPPER" || attrs_.auto_pad == "SAME_LOWER") return;
    int64_t total = 1;
    for (int64_t o : g.out) total *= o;
    st.fix.assign(static_cast<size_t>(total), 1.f);
    for (int64_t p = 0; p < total; ++p) {
      int64_t rem = p;
      float f = 1.f;
      for (size_t i = nsp; i-- > 0;) {
        f *= per_axis[i][static_cast<size_t>(rem % g.out[i])];
        rem /= g.out[i];
      }
      st.fix[static_cast<size_t>(p)] = f;
    }
  }

  // Where the `lanes`-channel group `cb` of image n starts in a tensor of h x w pixels: a blocked
  // tensor's groups sit inside its blocks, a channels-last tensor's side by side in each pixel.
  static int64_t group_base(const PoolState& st, int64_t n, int64_t cb, int64_t h, int64_t w, int64_t lanes = 8) {
    const int64_t c = st.g.c, b = st.block;
    if (b == 0) return n * h * w * c + cb * lanes;
    const int64_t per = b / lanes;
    return (n * (c / b) + cb / per) * h * w * b + (cb % per) * lanes;
  }

  // Channels the separable max pool takes at a time: 16 (one AVX-512 vector, a whole nChw16c
  // block: one pass over each pixel instead of two of half its bytes) where the build has AVX-512
  // and the layout allows, else 8.
  static int separable_lanes(const PoolState& st) {
#if defined(__AVX512F__)
    if (st.block == 16 || (st.block == 0 && st.g.c % 16 == 0)) return 16;
#endif
    (void)st;
    return 8;
  }

  // Max over each window, 8 channels at a time. Rows (n, channel group, output row) are split
  // between threads; taps in the padding are skipped (ONNX pads MaxPool with -inf).
  static void max_pool_vec8(const PoolState& st, const float* x, float* y, int threads) {
    const PoolGeom& g = st.g;
    const int64_t H = g.in[0], W = g.in[1], OH = g.out[0], OW = g.out[1], CB = g.c / 8;
    const int64_t kh = g.k[0], kw = g.k[1], sh = g.s[0], sw = g.s[1], dh = g.d[0], dw = g.d[1];
    const int64_t ph = g.pl[0], pw = g.pl[1];
    // Float offsets: one row, one column.
    const int64_t pix = st.block ? st.block : g.c;
    const int64_t x_row = W * pix, x_col = pix, y_row = OW * pix, y_col = pix;
    const int64_t rows = g.n * CB * OH;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, OW * kh * kw * 8));
    math::parallel_chunks(rows, grain, threads, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const int64_t oh = r % OH, cb = (r / OH) % CB, n = r / (OH * CB);
        const float* xb = x + group_base(st, n, cb, H, W);
        float* yr = y + group_base(st, n, cb, OH, OW) + oh * y_row;
        const int64_t h0 = oh * sh - ph;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = ow * sw - pw;
#if defined(__AVX__)
          __m256 acc = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
#else
          float acc[8];
          for (int l = 0; l < 8; ++l) acc[l] = -std::numeric_limits<float>::infinity();
#endif
          for (int64_t i = 0; i < kh; ++i) {
            const int64_t h = h0 + i * dh;
            if (h < 0 || h >= H) continue;
            const float* xr = xb + h * x_row;
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t w = w0 + j * dw;
              if (w < 0 || w >= W) continue;
              const float* p = xr + w * x_col;
#if defined(__AVX__)
              acc = _mm256_max_ps(_mm256_loadu_ps(p), acc);
#else
              for (int l = 0; l < 8; ++l) acc[l] = p[l] > acc[l] ? p[l] : acc[l];
#endif
            }
          }
          float* out = yr + ow * y_col;
#if defined(__AVX__)
          _mm256_storeu_ps(out, acc);
#else
          for (int l = 0; l < 8; ++l) out[l] = acc[l];
#endif
        }
      }
    });
  }

  // Undilated windows: the max of a window is the max over its columns of the max over its rows,
  // so each output row first takes the column-wise max of its input rows (one pass over them,
  // no bounds tests inside) and then slides the window across that row: 3W + 3W/s loads for a
  // 3x3 window instead of 9W/s, and straight-line loops the compiler keeps in registers. Padding
  // is clipped away (ONNX pads MaxPool with -inf). L channels at a time (separable_lanes).
  template <int L>
  static void max_pool_separable(const PoolState& st, const float* x, float* y, int threads) {
    const PoolGeom& g = st.g;
    const int64_t H = g.in[0], W = g.in[1], OH = g.out[0], OW = g.out[1], CB = g.c / L;
    const int64_t kh = g.k[0], kw = g.k[1], sh = g.s[0], sw = g.s[1], ph = g.pl[0], pw = g.pl[1];
    const int64_t pix = st.block ? st.block : g.c;
    const int64_t x_row = W * pix, x_col = pix, y_row = OW * pix, y_col = pix;
    const int64_t rows = g.n * CB * OH;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, (W * kh + OW * kw) * L));
    const float ninf = -std::numeric_limits<float>::infinity();
    math::parallel_chunks(rows, grain, threads, [&](int64_t lo, int64_t hi) {
      std::vector<float> colmax(static_cast<size_t>(W * L));
      float* cm = colmax.data();
      for (int64_t r = lo; r < hi; ++r) {
        const int64_t oh = r % OH, cb = (r / OH) % CB, n = r / (OH * CB);
        const float* xb = x + group_base(st, n, cb, H, W, L);
        float* yr = y + group_base(st, n, cb, OH, OW, L) + oh * y_row;
        const int64_t h0 = oh * sh - ph, hs = std::max<int64_t>(h0, 0), he = std::min(h0 + kh, H);
        for (int64_t w = 0; w < W; ++w) {
          const float* xc = xb + w * x_col;
#if defined(__AVX512F__)
          if constexpr (L == 16) {
            __m512 v = _mm512_set1_ps(ninf);
            for (int64_t h = hs; h < he; ++h) v = _mm512_max_ps(_mm512_loadu_ps(xc + h * x_row), v);
            _mm512_storeu_ps(cm + w * L, v);
            continue;
          }
#endif
#if defined(__AVX__)
          if constexpr (L == 8) {
            __m256 v = _mm256_set1_ps(ninf);
            for (int64_t h = hs; h < he; ++h) v = _mm256_max_ps(_mm256_loadu_ps(xc + h * x_row), v);
            _mm256_storeu_ps(cm + w * L, v);
            continue;
          }
#endif
          for (int l = 0; l < L; ++l) {
            float v = ninf;
            for (int64_t h = hs; h < he; ++h) v = std::max(v, xc[h * x_row + l]);
            cm[w * L + l] = v;
          }
        }
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = ow * sw - pw, ws = std::max<int64_t>(w0, 0), we = std::min(w0 + kw, W);
          float* out = yr + ow * y_col;
#if defined(__AVX512F__)
          if constexpr (L == 16) {
            __m512 acc = _mm512_set1_ps(ninf);
            for (int64_t w = ws; w < we; ++w) acc = _mm512_max_ps(_mm512_loadu_ps(cm + w * L), acc);
            _mm512_storeu_ps(out, acc);
            continue;
          }
#endif
#if defined(__AVX__)
          if constexpr (L == 8) {
            __m256 acc = _mm256_set1_ps(ninf);
            for (int64_t w = ws; w < we; ++w) acc = _mm256_max_ps(_mm256_loadu_ps(cm + w * L), acc);
            _mm256_storeu_ps(out, acc);
            continue;
          }
#endif
          for (int l = 0; l < L; ++l) {
            float acc = ninf;
            for (int64_t w = ws; w < we; ++w) acc = std::max(acc, cm[w * L + l]);
            out[l] = acc;
          }
        }
      }
    });
  }

  // A global pool's input as `groups` independent matrices of `pixels` rows of `lanes` contiguous
  // channels: a channels-last image is one group of all its channels; a blocked one, one group
  // per block. Group g's result is y[g * lanes ...], the plain [N, C, 1, 1] output in both cases.
  struct GlobalRows {
    int64_t groups = 0, pixels = 0, lanes = 0;
  };

  static GlobalRows global_rows(const PoolState& st) {
    const PoolGeom& g = st.g;
    GlobalRows r;
    r.pixels = g.in[0] * g.in[1];
    r.lanes = st.block ? st.block : g.c;
    r.groups = st.block ? g.n * (g.c / st.block) : g.n;
    return r;
  }

  // Elements a task should have at least before another thread pays for itself.
  static constexpr int64_t kGlobalGrain = 16384;
  // Threads whose partial results the workspace holds at least.
  static constexpr int kGlobalPieces = 8;

  // Pieces each group's pixels are cut into for `threads` threads: enough tasks for every thread
  // when there are fewer groups than threads, none smaller than kGlobalGrain, and no more
  // partial results than `max_partial` floats.
  static int64_t global_split(const GlobalRows& r, int threads, size_t max_partial) {
    if (threads <= 1 || r.groups >= threads) return 1;
    const int64_t by_grain = std::max<int64_t>(1, r.pixels * r.lanes / kGlobalGrain);
    int64_t s = std::min<int64_t>({(threads + r.groups - 1) / r.groups, by_grain, r.pixels});
    while (s > 1 && static_cast<size_t>(r.groups * s * r.lanes) > max_partial) --s;
    return s;
  }

  // One step of a global pool's reduction: the larger value, or the sum.
  template <bool kMax>
  static float combine(float acc, float v) {
    return kMax ? (v > acc ? v : acc) : acc + v;
  }

  // Sum (or max) of pixels [p0, p1) of one group into out[0, lanes): `kChunk` channels at a time,
  // kept in registers across the pixels.
  template <bool kMax, int kChunk>
  static void reduce_pixels(const float* x, int64_t lanes, int64_t p0, int64_t p1, float* out) {
    int64_t l0 = 0;
    for (; l0 + kChunk <= lanes; l0 += kChunk) {
      float acc[kChunk];
      const float* r = x + p0 * lanes + l0;
      for (int l = 0; l < kChunk; ++l) acc[l] = r[l];
      for (int64_t p = p0 + 1; p < p1; ++p) {
        r += lanes;
        for (int l = 0; l < kChunk; ++l) acc[l] = combine<kMax>(acc[l], r[l]);
      }
      for (int l = 0; l < kChunk; ++l) out[l0 + l] = acc[l];
    }
    for (; l0 < lanes; ++l0) {
      float acc = x[p0 * lanes + l0];
      for (int64_t p = p0 + 1; p < p1; ++p) acc = combine<kMax>(acc, x[p * lanes + l0]);
      out[l0] = acc;
    }
  }

  // GlobalAveragePool / GlobalMaxPool over GlobalRows: one task per (group, piece of its
  // pixels); pieces write partial results that are combined afterwards.
  template <bool kMax>
  static void global_pool_rows(const PoolState& st, const float* x, float* y, float* partial, int threads) {
    const GlobalRows r = global_rows(st);
    if (r.groups * r.pixels * r.lanes < 2 * kGlobalGrain) threads = 1;
    const int64_t split = global_split(r, threads, st.partial_floats);
    const int64_t tasks = r.groups * split;
    const int64_t group_floats = r.pixels * r.lanes;
    const auto one = [&](int64_t t, int) {
      const int64_t grp = t / split, piece = t % split;
      const int64_t p0 = r.pixels * piece / split, p1 = r.pixels * (piece + 1) / split;
      float* out = split == 1 ? y + grp * r.lanes : partial + t * r.lanes;
      const float* xg = x + grp * group_floats;
      if (r.lanes % 32 == 0)
        reduce_pixels<kMax, 32>(xg, r.lanes, p0, p1, out);
      else
        reduce_pixels<kMax, 8>(xg, r.lanes, p0, p1, out);
    };
    if (threads > 1 && tasks > 1)
      run_tasks(tasks, threads, one);
    else
      for (int64_t t = 0; t < tasks; ++t) one(t, 0);
    for (int64_t grp = 0; grp < r.groups; ++grp) {
      float* out = y + grp * r.lanes;
      if (split > 1) {
        const float* first = partial + grp * split * r.lanes;
        for (int64_t l = 0; l < r.lanes; ++l) out[l] = first[l];
        for (int64_t piece = 1; piece < split; ++piece) {
          const float* q = first + piece * r.lanes;
          for (int64_t l = 0; l < r.lanes; ++l) out[l] = combine<kMax>(out[l], q[l]);
        }
      }
      if (!kMax) {
        const float count = static_cast<float>(r.pixels);
        for (int64_t l = 0; l < r.lanes; ++l) out[l] /= count;
      }
    }
  }

  static void apply_fix(const PoolState& st, float* y) {
    const int64_t sp = static_cast<int64_t>(st.fix.size()), n = st.g.n, c = st.g.c;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t p = 0; p < sp; ++p) {
        const float f = st.fix[static_cast<size_t>(p)];
        if (f == 1.f) continue;
        if (st.channels_last) {
          for (int64_t ch = 0; ch < c; ++ch) y[(b * sp + p) * c + ch] *= f;
        } else if (st.block) {
          const int64_t bl = st.block;
          for (int64_t ch = 0; ch < c; ++ch) y[((b * (c / bl) + ch / bl) * sp + p) * bl + ch % bl] *= f;
        } else {
          for (int64_t ch = 0; ch < c; ++ch) y[(b * c + ch) * sp + p] *= f;
        }
      }
  }

  Result<std::unique_ptr<BuiltPrimitive>> build(const PoolState& st, int nthr, size_t budget) const {
    const PoolGeom& g = st.g;
    dnnl::algorithm alg = dnnl::algorithm::pooling_max;
    if (kind_ == PoolKind::kGlobalAvg || (kind_ == PoolKind::kAvg && !attrs_.count_include_pad))
      alg = dnnl::algorithm::pooling_avg_exclude_padding;
    else if (kind_ == PoolKind::kAvg)
      alg = dnnl::algorithm::pooling_avg_include_padding;
    memory::dims strides(g.s.begin(), g.s.end()), kernel(g.k.begin(), g.k.end());
    memory::dims pl(g.pl.begin(), g.pl.end()), pr(g.pr.begin(), g.pr.end()), dil;
    for (int64_t d : g.d) dil.push_back(d - 1);
    auto make_pd = [&](const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, st.src_md, st.dst_md, strides, kernel,
                                       dil, pl, pr);
      return dnnl::pooling_v2_forward::primitive_desc(d, attr, cpu_engine());
    };
    return build_primitive(nthr, budget, dnnl::primitive_attr(), make_pd, who_);
  }

  std::string who_;
  PoolKind kind_ = PoolKind::kMax;
  PoolAttrs attrs_;
};

KernelDef pool_def(std::string op, PoolKind kind) {
  KernelDef d;
  d.op = std::move(op);
  d.since_version = 1;
  d.device = Device::kCpu;
  d.dtype = DType::kFloat32;
  d.provider = "onednn";
  d.create = [kind](const KernelCreateArgs& args) { return PoolKernel::create(args, kind); };
  return d;
}

}  // namespace

Status register_pool(KernelRegistry& reg) {
  SL_RETURN_IF_ERROR(reg.add(pool_def("MaxPool", PoolKind::kMax)));
  SL_RETURN_IF_ERROR(reg.add(pool_def("AveragePool", PoolKind::kAvg)));
  SL_RETURN_IF_ERROR(reg.add(pool_def("GlobalMaxPool", PoolKind::kGlobalMax)));
  SL_RETURN_IF_ERROR(reg.add(pool_def("GlobalAveragePool", PoolKind::kGlobalAvg)));
  return ok_status();
}

}  // namespace streamline::ops::cpu
