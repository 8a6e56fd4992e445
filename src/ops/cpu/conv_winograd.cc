// Winograd F(2x2, 3x3) on nChw8c activations (see conv_winograd.h). Eight channels at a time: one
// 8-float vector per pixel of an nChw8c block, so every transform is plain vector adds.

#include "ops/cpu/conv_winograd.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ops/cpu/math_common.h"

namespace streamline::ops::cpu {
namespace {

// Eight floats; unaligned loads and stores go through memcpy (one vmovups each).
typedef float V8 __attribute__((vector_size(32)));

inline V8 load(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store(float* p, V8 v) { std::memcpy(p, &v, sizeof(v)); }
inline V8 splat(float f) { return V8{f, f, f, f, f, f, f, f}; }

constexpr int kPositions = 16;                  // 4x4 transformed tile
constexpr size_t kChunkBytes = size_t{2} << 20;  // transformed inputs + products of one chunk

inline V8 activate(V8 v, const Activation& a) {
  const V8 zero = splat(0.f);
  switch (a.kind) {
    case ActKind::kNone:
      return v;
    case ActKind::kRelu:
      return v > zero ? v : zero;
    case ActKind::kLeakyRelu:
      return v > zero ? v : v * splat(a.alpha);
    case ActKind::kClip: {
      const V8 lo = splat(a.alpha), hi = splat(a.beta);
      v = v < lo ? lo : v;
      return v > hi ? hi : v;
    }
    default:
      return v;  // excluded by winograd_activation_ok
  }
}

// B^T d B for one 4x4 input tile of eight channels; out[i*4+j].
inline void input_transform(const V8 (&d)[4][4], V8 (&out)[kPositions]) {
  V8 t[4][4];
  for (int j = 0; j < 4; ++j) {
    t[0][j] = d[0][j] - d[2][j];
    t[1][j] = d[1][j] + d[2][j];
    t[2][j] = d[2][j] - d[1][j];
    t[3][j] = d[1][j] - d[3][j];
  }
  for (int i = 0; i < 4; ++i) {
    out[i * 4 + 0] = t[i][0] - t[i][2];
    out[i * 4 + 1] = t[i][1] + t[i][2];
    out[i * 4 + 2] = t[i][2] - t[i][1];
    out[i * 4 + 3] = t[i][1] - t[i][3];
  }
}

// A^T m A: the 2x2 outputs of one tile; y[i][j].
inline void output_transform(const V8 (&m)[kPositions], V8 (&y)[2][2]) {
  V8 r[2][4];
  for (int j = 0; j < 4; ++j) {
    r[0][j] = m[0 * 4 + j] + m[1 * 4 + j] + m[2 * 4 + j];
    r[1][j] = m[1 * 4 + j] - m[2 * 4 + j] - m[3 * 4 + j];
  }
  for (int i = 0; i < 2; ++i) {
    y[i][0] = r[i][0] + r[i][1] + r[i][2];
    y[i][1] = r[i][1] - r[i][2] - r[i][3];
  }
}

// Tile t of the batch: image, first output row and column.
struct TilePos {
  int64_t n, oh, ow;
};
inline TilePos tile_pos(const WinogradGeom& g, int64_t t) {
  const int64_t per_image = g.tiles_h * g.tiles_w;
  const int64_t n = t / per_image, r = t % per_image;
  return {n, (r / g.tiles_w) * 2, (r % g.tiles_w) * 2};
}

// Transforms tiles [t0, t0 + count) of x into v[16][count][C].
void transform_inputs(const WinogradGeom& g, const float* x, float* v, int64_t t0, int64_t count, int threads) {
  const int64_t cb_count = g.c / 8, ih = g.ih, iw = g.iw;
  math::parallel_chunks(count * cb_count, 256, threads, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t p = item / cb_count, cb = item % cb_count;
      const TilePos tp = tile_pos(g, t0 + p);
      const int64_t h0 = tp.oh - g.pad_top, w0 = tp.ow - g.pad_left;
      const float* xb = x + (tp.n * cb_count + cb) * ih * iw * 8;
      V8 d[4][4];
      if (h0 >= 0 && w0 >= 0 && h0 + 4 <= ih && w0 + 4 <= iw) {
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) d[i][j] = load(xb + ((h0 + i) * iw + w0 + j) * 8);
      } else {
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) {
            const int64_t h = h0 + i, w = w0 + j;
            d[i][j] = h >= 0 && h < ih && w >= 0 && w < iw ? load(xb + (h * iw + w) * 8) : splat(0.f);
          }
      }
      V8 out[kPositions];
      input_transform(d, out);
      float* dst = v + p * g.c + cb * 8;
      for (int xi = 0; xi < kPositions; ++xi) store(dst + xi * count * g.c, out[xi]);
    }
  });
}

// prod[xi] (count x M) = v[xi] (count x C) . U[xi] (C x M) for the 16 positions, split between
// threads by position (and by column blocks of M when there are more threads than positions).
bool multiply(const WinogradGeom& g, const float* u, const float* v, float* prod, int64_t count, int threads) {
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>((threads + kPositions - 1) / kPositions, g.m / 8));
  const int64_t items = kPositions * parts;
  std::atomic<bool> ok{true};
  auto one = [&](int64_t item) {
    const int64_t xi = item / parts, part = item % parts;
    const int64_t mb = g.m / 8, m0 = mb * part / parts * 8, m1 = mb * (part + 1) / parts * 8;
    const dnnl_status_t s =
        dnnl_sgemm('N', 'N', count, m1 - m0, g.c, 1.f, v + xi * count * g.c, g.c, u + xi * g.c * g.m + m0, g.m, 0.f,
                   prod + xi * count * g.m + m0, g.m);
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

// Writes tiles [t0, t0 + count) of y from prod[16][count][M].
void transform_outputs(const WinogradGeom& g, const float* prod, float* y, const WinogradEpilogue& e, int64_t t0,
                       int64_t count, int threads) {
  const int64_t kb_count = g.m / 8, oh = g.oh, ow = g.ow;
  math::parallel_chunks(count * kb_count, 256, threads, [&](int64_t lo, int64_t hi) {
    for (int64_t item = lo; item < hi; ++item) {
      const int64_t p = item / kb_count, kb = item % kb_count;
      const TilePos tp = tile_pos(g, t0 + p);
      V8 m[kPositions];
      const float* src = prod + p * g.m + kb * 8;
      for (int xi = 0; xi < kPositions; ++xi) m[xi] = load(src + xi * count * g.m);
      V8 out[2][2];
      output_transform(m, out);
      const V8 bias = e.bias ? load(e.bias + kb * 8) : splat(0.f);
      float* yb = y + (tp.n * kb_count + kb) * oh * ow * 8;
      for (int i = 0; i < 2; ++i) {
        const int64_t h = tp.oh + i;
        if (h >= oh) break;
        for (int j = 0; j < 2; ++j) {
          const int64_t w = tp.ow + j;
          if (w >= ow) break;
          float* py = yb + (h * ow + w) * 8;
          V8 r = out[i][j] + bias;
          if (e.accumulate) r += load(py);
          store(py, activate(r, e.act));
        }
      }
    }
  });
}

}  // namespace

WinogradWeights winograd_weights(const float* w, int64_t m, int64_t c) {
  WinogradWeights r;
  r.c = c;
  r.m = m;
  r.u = AlignedBuffer::allocate(static_cast<size_t>(kPositions * c * m) * sizeof(float));
  if (!r.u) return r;
  float* u = r.u->as<float>();
  for (int64_t k = 0; k < m; ++k)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* g = w + (k * c + ch) * 9;
      // G g: 4 rows of 3 (G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]), then (G g) G^T.
      double gg[4][3];
      for (int j = 0; j < 3; ++j) {
        const double a = g[j], b = g[3 + j], d = g[6 + j];
        gg[0][j] = a;
        gg[1][j] = 0.5 * (a + b + d);
        gg[2][j] = 0.5 * (a - b + d);
        gg[3][j] = d;
      }
      for (int i = 0; i < 4; ++i) {
        const double a = gg[i][0], b = gg[i][1], d = gg[i][2];
        const double row[4] = {a, 0.5 * (a + b + d), 0.5 * (a - b + d), d};
        for (int j = 0; j < 4; ++j) u[((i * 4 + j) * c + ch) * m + k] = static_cast<float>(row[j]);
      }
    }
  return r;
}

size_t WinogradGeom::workspace_bytes() const {
  const size_t v = static_cast<size_t>(kPositions * chunk * c) * sizeof(float);
  const size_t p = static_cast<size_t>(kPositions * chunk * m) * sizeof(float);
  return align_up(v) + align_up(p);
}

WinogradGeom winograd_geom(int64_t n, int64_t c, int64_t m, int64_t ih, int64_t iw, int64_t oh, int64_t ow,
                           int64_t pad_top, int64_t pad_left) {
  WinogradGeom g;
  g.n = n;
  g.c = c;
  g.m = m;
  g.ih = ih;
  g.iw = iw;
  g.oh = oh;
  g.ow = ow;
  g.pad_top = pad_top;
  g.pad_left = pad_left;
  g.tiles_h = (oh + 1) / 2;
  g.tiles_w = (ow + 1) / 2;
  g.tiles = n * g.tiles_h * g.tiles_w;
  const int64_t per_tile = kPositions * (c + m) * static_cast<int64_t>(sizeof(float));
  const int64_t cap = std::max<int64_t>(8, static_cast<int64_t>(kChunkBytes) / std::max<int64_t>(per_tile, 1));
  const int64_t chunks = std::max<int64_t>(1, (g.tiles + cap - 1) / cap);
  g.chunk = std::max<int64_t>(1, (g.tiles + chunks - 1) / chunks);
  return g;
}

bool winograd_activation_ok(const Activation& a) {
  return a.kind == ActKind::kNone || a.kind == ActKind::kRelu || a.kind == ActKind::kLeakyRelu ||
         a.kind == ActKind::kClip;
}

bool winograd_worthwhile(int64_t c, int64_t m, int64_t tiles) {
  return c >= 16 && m >= 16 && c % 8 == 0 && m % 8 == 0 && tiles >= 32;
}

bool winograd_candidate(int64_t c, int64_t m, int64_t tiles_per_image) {
  return winograd_worthwhile(c, m, 2 * tiles_per_image);
}

Status winograd_conv(const WinogradGeom& g, const WinogradWeights& w, const float* x, float* y,
                     const WinogradEpilogue& e, void* workspace, int threads) {
  auto* v = static_cast<float*>(workspace);
  auto* prod = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) +
                                        align_up(static_cast<size_t>(kPositions * g.chunk * g.c) * sizeof(float)));
  const float* u = w.u->as<float>();
  for (int64_t t0 = 0; t0 < g.tiles; t0 += g.chunk) {
    const int64_t count = std::min(g.chunk, g.tiles - t0);
    transform_inputs(g, x, v, t0, count, threads);
    if (!multiply(g, u, v, prod, count, threads)) return internal_error("winograd: sgemm rejected its arguments");
    transform_outputs(g, prod, y, e, t0, count, threads);
  }
  return ok_status();
}

}  // namespace streamline::ops::cpu
