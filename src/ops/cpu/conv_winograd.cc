// Winograd F(2x2, 3x3) and F(4x4, 3x3) on blocked activations (see conv_winograd.h). One block of
// channels at a time: one vector of 8 (nChw8c) or 16 (nChw16c) floats per pixel of a block, so
// every transform is vector arithmetic.

#include "ops/cpu/conv_winograd.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ops/cpu/math_common.h"
#include "ops/cpu/task_runner.h"

namespace streamline::ops::cpu {
namespace {

// B floats (one block); unaligned loads and stores go through memcpy (one vmovups each).
template <int B>
struct VecOf {
  typedef float type __attribute__((vector_size(B * sizeof(float))));
};

template <typename V>
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <typename V>
inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof(v));
}
template <typename V>
inline V splat(float f) {
  return V{} + f;
}

constexpr size_t kChunkBytes = size_t{2} << 20;  // transformed inputs + products of one chunk
constexpr int64_t kF4MinSide = 28;               // outputs at least this tall and wide use F(4, 3)
// Tiles a thread's own pass needs at least (the rows of its matrix products) before threads take
// ranges of tiles through all three phases instead of sharing each phase (see winograd_conv).
constexpr int64_t kMinPassTiles = 32;

template <typename V>
inline V activate(V v, const Activation& a) {
  const V zero = splat<V>(0.f);
  switch (a.kind) {
    case ActKind::kNone:
      return v;
    case ActKind::kRelu:
      return v > zero ? v : zero;
    case ActKind::kLeakyRelu:
      return v > zero ? v : v * splat<V>(a.alpha);
    case ActKind::kClip: {
      const V lo = splat<V>(a.alpha), hi = splat<V>(a.beta);
      v = v < lo ? lo : v;
      return v > hi ? hi : v;
    }
    default:
      return v;  // excluded by winograd_activation_ok
  }
}

// One dimension of the transforms, written out so that no multiply by 0 or 1 is left.
// F(2, 3): B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], A^T = [1 1 1 0; 0 1 -1 -1].
// F(4, 3) (interpolation points 0, +-1, +-2): B^T rows 4d0-5d2+d4, -4(d1+d2)+d3+d4,
// 4(d1-d2)-d3+d4, -2(d1-d3)-d2+d4, 2(d1-d3)-d2+d4, 4d1-5d3+d5; A^T rows m0+m1+m2+m3+m4,
// (m1-m2)+2(m3-m4), (m1+m2)+4(m3+m4), (m1-m2)+8(m3-m4)+m5.
template <int F>
struct Tx;

template <>
struct Tx<2> {
  static constexpr int kT = 4;
  template <typename V>
  static inline void in(const V* d, V* r) {
    r[0] = d[0] - d[2];
    r[1] = d[1] + d[2];
    r[2] = d[2] - d[1];
    r[3] = d[1] - d[3];
  }
  template <typename V>
  static inline void out(const V* m, V* r) {
    r[0] = m[0] + m[1] + m[2];
    r[1] = m[1] - m[2] - m[3];
  }
};

template <>
struct Tx<4> {
  static constexpr int kT = 6;
  template <typename V>
  static inline void in(const V* d, V* r) {
    const V four = splat<V>(4.f), five = splat<V>(5.f), two = splat<V>(2.f);
    r[0] = four * d[0] - five * d[2] + d[4];
    const V a = d[3] + d[4] - four * d[2], b = four * d[1];
    r[1] = a - b;
    r[2] = b + d[4] - four * d[2] - d[3];
    const V c = two * (d[1] - d[3]), e = d[4] - d[2];
    r[3] = e - c;
    r[4] = e + c;
    r[5] = four * d[1] - five * d[3] + d[5];
  }
  template <typename V>
  static inline void out(const V* m, V* r) {
    const V s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
    r[0] = m[0] + s12 + s34;
    r[1] = d12 + splat<V>(2.f) * d34;
    r[2] = s12 + splat<V>(4.f) * s34;
    r[3] = d12 + splat<V>(8.f) * d34 + m[5];
  }
};

// Tile t of the batch: image, first output row and column.
struct TilePos {
  int64_t n, oh, ow;
};
inline TilePos tile_pos(const WinogradGeom& g, int64_t t) {
  const int64_t per_image = g.tiles_h * g.tiles_w;
  const int64_t n = t / per_image, r = t % per_image;
  return {n, (r / g.tiles_w) * g.f, (r % g.tiles_w) * g.f};
}

// Transforms tiles [t0, t0 + count) of x into v[T*T][count][C].
template <int F, int B>
void transform_inputs(const WinogradGeom& g, const float* x, float* v, int64_t t0, int64_t count, int threads) {
  using V = typename VecOf<B>::type;
  constexpr int T = Tx<F>::kT;
  const int64_t cb_count = g.c / B, ih = g.ih, iw = g.iw;
  math::parallel_chunks(count * cb_count, 256, threads, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t p = item / cb_count, cb = item % cb_count;
      const TilePos tp = tile_pos(g, t0 + p);
      const int64_t h0 = tp.oh - g.pad_top, w0 = tp.ow - g.pad_left;
      const float* xb = x + (tp.n * cb_count + cb) * ih * iw * B;
      V d[T][T];
      if (h0 >= 0 && w0 >= 0 && h0 + T <= ih && w0 + T <= iw) {
        for (int i = 0; i < T; ++i)
          for (int j = 0; j < T; ++j) d[i][j] = load<V>(xb + ((h0 + i) * iw + w0 + j) * B);
      } else {
        for (int i = 0; i < T; ++i)
          for (int j = 0; j < T; ++j) {
            const int64_t h = h0 + i, w = w0 + j;
            d[i][j] = h >= 0 && h < ih && w >= 0 && w < iw ? load<V>(xb + (h * iw + w) * B) : splat<V>(0.f);
          }
      }
      // B^T d: columns; then (B^T d) B: rows.
      V col[T], t[T][T], row[T];
      for (int j = 0; j < T; ++j) {
        for (int i = 0; i < T; ++i) col[i] = d[i][j];
        Tx<F>::in(col, row);
        for (int i = 0; i < T; ++i) t[i][j] = row[i];
      }
      float* dst = v + p * g.c + cb * B;
      for (int i = 0; i < T; ++i) {
        Tx<F>::in(t[i], row);
        for (int j = 0; j < T; ++j) store(dst + (i * T + j) * count * g.c, row[j]);
      }
    }
  });
}

// prod[xi] (count x M) = v[xi] (count x C) . U[xi] (C x M) for the T*T positions, split between
// threads by position (and by column blocks of M when there are more threads than positions).
bool multiply(const WinogradGeom& g, const float* u, const float* v, float* prod, int64_t count, int threads) {
  const int64_t positions = g.positions();
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>((threads + positions - 1) / positions, g.m / 8));
  const int64_t items = positions * parts;
  std::atomic<bool> ok{true};
  auto one = [&](int64_t item) {
    const int64_t xi = item / parts, part = item % parts;
    const int64_t mb = g.m / 8, m0 = mb * part / parts * 8, m1 = mb * (part + 1) / parts * 8;
    const dnnl_status_t s = dnnl_sgemm('N', 'N', count, m1 - m0, g.c, 1.f, v + xi * count * g.c, g.c,
                                       u + xi * g.c * g.m + m0, g.m, 0.f, prod + xi * count * g.m + m0, g.m);
    if (s != dnnl_success) ok.store(false, std::memory_order_relaxed);
  };
  const int team = static_cast<int>(std::min<int64_t>(std::max(threads, 1), items));
  if (team <= 1) {
    OmpThreadsGuard single(1);
    for (int64_t i = 0; i < items; ++i) one(i);
  } else {
#pragma omp parallel for num_threads(team) schedule(static)
    for (int64_t i = 0; i < items; ++i) {
      omp_set_num_threads(1);  // this task only: each product runs on the thread that took it
      one(i);
    }
  }
  return ok.load();
}

// Writes tiles [t0, t0 + count) of y from prod[T*T][count][M].
template <int F, int B>
void transform_outputs(const WinogradGeom& g, const float* prod, float* y, const WinogradEpilogue& e, int64_t t0,
                       int64_t count, int threads) {
  using V = typename VecOf<B>::type;
  constexpr int T = Tx<F>::kT;
  const int64_t kb_count = g.m / B, oh = g.oh, ow = g.ow;
  math::parallel_chunks(count * kb_count, 256, threads, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t p = item / kb_count, kb = item % kb_count;
      const TilePos tp = tile_pos(g, t0 + p);
      const float* src = prod + p * g.m + kb * B;
      // A^T m: columns (T -> F); then (A^T m) A: rows.
      V col[T], t[F][T], out[F][F];
      for (int j = 0; j < T; ++j) {
        for (int i = 0; i < T; ++i) col[i] = load<V>(src + (i * T + j) * count * g.m);
        V r[F];
        Tx<F>::out(col, r);
        for (int i = 0; i < F; ++i) t[i][j] = r[i];
      }
      for (int i = 0; i < F; ++i) Tx<F>::out(t[i], out[i]);
      const V bias = e.bias ? load<V>(e.bias + kb * B) : splat<V>(0.f);
      float* yb = y + (tp.n * kb_count + kb) * oh * ow * B;
      for (int i = 0; i < F; ++i) {
        const int64_t h = tp.oh + i;
        if (h >= oh) break;
        for (int j = 0; j < F; ++j) {
          const int64_t w = tp.ow + j;
          if (w >= ow) break;
          float* py = yb + (h * ow + w) * B;
          V r = out[i][j] + bias;
          if (e.accumulate) r += load<V>(py);
          store(py, activate(r, e.act));
        }
      }
    }
  });
}

// G for F(2, 3) and F(4, 3), in double: T rows of 3.
void filter_rows(int f, const double* g3, double* out /* T */) {
  const double a = g3[0], b = g3[1], c = g3[2];
  if (f == 2) {
    out[0] = a;
    out[1] = 0.5 * (a + b + c);
    out[2] = 0.5 * (a - b + c);
    out[3] = c;
  } else {
    out[0] = a / 4;
    out[1] = -(a + b + c) / 6;
    out[2] = -(a - b + c) / 6;
    out[3] = a / 24 + b / 12 + c / 6;
    out[4] = a / 24 - b / 12 + c / 6;
    out[5] = c;
  }
}

}  // namespace

WinogradWeights winograd_weights(const float* w, int64_t m, int64_t c, int f) {
  WinogradWeights r;
  r.c = c;
  r.m = m;
  r.f = f;
  const int T = f + 2;
  r.u = AlignedBuffer::allocate(static_cast<size_t>(T * T * c * m) * sizeof(float));
  if (!r.u) return r;
  float* u = r.u->as<float>();
  for (int64_t k = 0; k < m; ++k)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* g = w + (k * c + ch) * 9;
      // G g (T rows of 3), then (G g) G^T (T x T).
      double gg[6][3], col[3], tmp[6];
      for (int j = 0; j < 3; ++j) {
        for (int i = 0; i < 3; ++i) col[i] = g[i * 3 + j];
        filter_rows(f, col, tmp);
        for (int i = 0; i < T; ++i) gg[i][j] = tmp[i];
      }
      for (int i = 0; i < T; ++i) {
        filter_rows(f, gg[i], tmp);
        for (int j = 0; j < T; ++j) u[((i * T + j) * c + ch) * m + k] = static_cast<float>(tmp[j]);
      }
    }
  return r;
}

namespace {

// A pass over up to `count` tiles keeps, from the start of its workspace, the transformed inputs
// v[T*T][count][C] and then the products prod[T*T][count][M], each part aligned.
size_t inputs_bytes(const WinogradGeom& g, int64_t count) {
  return align_up(static_cast<size_t>(g.positions() * count * g.c) * sizeof(float));
}
size_t pass_bytes(const WinogradGeom& g, int64_t count) {
  return inputs_bytes(g, count) + align_up(static_cast<size_t>(g.positions() * count * g.m) * sizeof(float));
}

// Tiles [t0, t0 + count) through the three phases on `threads` threads, in a workspace laid out
// for passes of up to `capacity` tiles (pass_bytes).
bool run_pass(const WinogradGeom& g, const float* u, const float* x, float* y, const WinogradEpilogue& e,
              uint8_t* workspace, int64_t capacity, int64_t t0, int64_t count, int threads) {
  auto* v = reinterpret_cast<float*>(workspace);
  auto* prod = reinterpret_cast<float*>(workspace + inputs_bytes(g, capacity));
  const bool b16 = g.block == 16;
  if (g.f == 2)
    b16 ? transform_inputs<2, 16>(g, x, v, t0, count, threads) : transform_inputs<2, 8>(g, x, v, t0, count, threads);
  else
    b16 ? transform_inputs<4, 16>(g, x, v, t0, count, threads) : transform_inputs<4, 8>(g, x, v, t0, count, threads);
  if (!multiply(g, u, v, prod, count, threads)) return false;
  if (g.f == 2)
    b16 ? transform_outputs<2, 16>(g, prod, y, e, t0, count, threads)
        : transform_outputs<2, 8>(g, prod, y, e, t0, count, threads);
  else
    b16 ? transform_outputs<4, 16>(g, prod, y, e, t0, count, threads)
        : transform_outputs<4, 8>(g, prod, y, e, t0, count, threads);
  return true;
}

}  // namespace

size_t WinogradGeom::workspace_bytes() const {
  return pass_bytes(*this, chunk);
}

WinogradGeom winograd_geom(int f, int64_t n, int64_t c, int64_t m, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                           int64_t pad_top, int64_t pad_left) {
  WinogradGeom g{f, n, c, m, ih, iw, oh, ow, pad_top, pad_left};
  g.tiles_h = (oh + f - 1) / f;
  g.tiles_w = (ow + f - 1) / f;
  g.tiles = n * g.tiles_h * g.tiles_w;
  const int64_t per_tile = g.positions() * (c + m) * static_cast<int64_t>(sizeof(float));
  const int64_t cap = std::max<int64_t>(8, static_cast<int64_t>(kChunkBytes) / std::max<int64_t>(per_tile, 1));
  const int64_t chunks = std::max<int64_t>(1, (g.tiles + cap - 1) / cap);
  g.chunk = std::max<int64_t>(1, (g.tiles + chunks - 1) / chunks);
  return g;
}

bool winograd_activation_ok(const Activation& a) {
  return a.kind == ActKind::kNone || a.kind == ActKind::kRelu || a.kind == ActKind::kLeakyRelu ||
         a.kind == ActKind::kClip;
}

int winograd_tile(int block, int64_t c, int64_t m, int64_t oh, int64_t ow) {
  if (block <= 0 || c < 16 || m < 16 || c % block != 0 || m % block != 0) return 0;
  if (oh >= kF4MinSide && ow >= kF4MinSide) return 4;
  return 2;
}

bool winograd_worthwhile(int block, int f, int64_t c, int64_t m, int64_t n, int64_t oh, int64_t ow) {
  if (f == 0 || block <= 0 || c < 16 || m < 16 || c % block != 0 || m % block != 0) return false;
  // In 2x2 tiles, whatever tile the filters were transformed for.
  return n * ((oh + 1) / 2) * ((ow + 1) / 2) >= 32;
}

Status winograd_conv(const WinogradGeom& g, const WinogradWeights& w, const float* x, float* y,
                     const WinogradEpilogue& e, void* workspace, int threads) {
  if (g.f != w.f || (g.f != 2 && g.f != 4)) return internal_error("winograd: filters transformed for another tile");
  if (g.block != 8 && g.block != 16) return internal_error("winograd: blocks of 8 or 16 channels only");
  const float* u = w.u->as<float>();
  auto* base = static_cast<uint8_t*>(workspace);
  // Threads with enough tiles each take ranges of tiles through all three phases, each in its
  // own share of the workspace: a phase's output stays in the cache of the core that wrote it.
  // Shared phases hand every chunk across cores twice (the products split by position read
  // transformed inputs written by every thread, the output transform products written by every
  // thread). On two threads this ran four 64-channel 56x56 layers 13% faster, DenseNet-121 5%;
  // with fewer than kMinPassTiles rows per product the smaller matrix products lose more than
  // that (256 channels at 14x14 ran 24% slower with 25 rows), so those keep the shared phases.
  int64_t per_thread = threads > 1 ? g.chunk / threads : 0;
  while (per_thread >= kMinPassTiles && static_cast<size_t>(threads) * pass_bytes(g, per_thread) > g.workspace_bytes())
    --per_thread;
  if (threads > 1 && per_thread >= kMinPassTiles && g.tiles >= threads * kMinPassTiles) {
    const size_t share = pass_bytes(g, per_thread);
    const int64_t tasks = std::max<int64_t>(threads, (g.tiles + per_thread - 1) / per_thread);
    std::atomic<bool> ok{true};
    run_tasks(tasks, threads, [&](int64_t task, int slot) {
      uint8_t* own = base + static_cast<size_t>(slot) * share;
      const int64_t lo = g.tiles * task / tasks, hi = g.tiles * (task + 1) / tasks;
      for (int64_t t0 = lo; t0 < hi; t0 += per_thread)
        if (!run_pass(g, u, x, y, e, own, per_thread, t0, std::min(per_thread, hi - t0), 1))
          ok.store(false, std::memory_order_relaxed);
    });
    if (!ok.load()) return internal_error("winograd: sgemm rejected its arguments");
    return ok_status();
  }
  for (int64_t t0 = 0; t0 < g.tiles; t0 += g.chunk)
    if (!run_pass(g, u, x, y, e, base, g.chunk, t0, std::min(g.chunk, g.tiles - t0), threads))
      return internal_error("winograd: sgemm rejected its arguments");
  return ok_status();
}

}  // namespace streamline::ops::cpu
