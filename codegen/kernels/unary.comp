// unary.comp: y = f(x) for the pointwise ops with one operand, rounded through the
// output's dtype (store_round). COPY is also the conversion kernel: cast, a reshape
// between layouts, and the staging of graph inputs and outputs (f32 logical host
// slots <-> f16 / nhwc / padded values).
//
// One invocation per element over a grid_1d grid. Invocation i handles element i of
// the logical row-major order: x and y each unravel i over their own shape (XRANK /
// YRANK dims, collapsed by the lowering; the shapes differ only for a reshape) and
// step through their own physical strides, so any layout works on either side.
//
// VEC = 4 (x and y flat: XRANK = YRANK = 1, stride 1, bases 0, n a multiple of 4):
// invocation i handles elements 4i .. 4i + 3 as 4-vectors (X_V, Y_V: vec4 | f16vec4),
// each computed and rounded as with VEC 1 (binary.comp's header says why).
// TILED = 1 (x and y of other layouts whose contiguous dims differ: a reshape or cast
// between NHWC and logical maps is a transpose): x and y step through one loop, XRANK =
// YRANK dims with equal shapes, the outer ones first, then A (the dim contiguous in x),
// then B (contiguous in y). A workgroup of 32 × 8 invocations moves one 32 × 32 tile of
// (A, B) through shared memory: it reads the tile along A (consecutive invocations,
// consecutive x elements) and writes it along B (consecutive y elements), where one
// element per invocation in logical order reads or writes one element per cache line
// on one side (Wan's DupUp3D regrouping ran at ~0.3 TB/s on the H200). Each element is
// computed as with VEC 1, so the bits are the same. n counts tiles.
// Defines: OP     SILU | GELU | TANH | SCALE | CLAMP | COPY (COPY with ROUND is `cast`)
//          ROUND  ROUND_NONE | ROUND_F16 | ROUND_BF16   (common.glsl)
//          XRANK, YRANK  1..6 (default 1); X_T, Y_T  float | float16_t (default float)
// Bindings: 0 x (read), 1 y (write).
// Push: n, p0, p1 (SCALE: mul, add; CLAMP: lo, hi), x_shape[XRANK], x_stride[XRANK],
//       y_shape[YRANK], y_stride[YRANK].
#define SILU 1
#define GELU 2
#define SCALE 3
#define CLAMP 4
#define COPY 5
#define TANH 6
#ifndef XRANK
#define XRANK 1
#endif
#ifndef YRANK
#define YRANK 1
#endif
#ifndef X_T
#define X_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

#ifndef VEC
#define VEC 1
#endif
#ifndef TILED
#define TILED 0
#endif
#if TILED && (XRANK != YRANK || XRANK < 2 || VEC != 1)
#error "unary.comp: TILED takes one loop of at least 2 dims for x and y, one element at a time"
#endif

#if TILED
#define TILE 32u
layout(local_size_x = 32, local_size_y = 8) in;
shared float tile[TILE][TILE + 1];  // [b][a]; the pad spreads a column over the banks
#else
layout(local_size_x = 64) in;
#endif
#if VEC == 4
layout(std430, binding = 0) readonly buffer X { X_V x[]; };
layout(std430, binding = 1) writeonly buffer Y { Y_V y[]; };
#else
layout(std430, binding = 0) readonly buffer X { X_T x[]; };
layout(std430, binding = 1) writeonly buffer Y { Y_T y[]; };
#endif
layout(push_constant) uniform Push {
  uint n;
  float p0;
  float p1;
  uint x_base, y_base;  // first element of x and y in their windows (boxes of a larger value)
  uint x_shape[XRANK];
  uint x_stride[XRANK];
  uint y_shape[YRANK];
  uint y_stride[YRANK];
} pc;

float apply(float v) {
#if OP == SILU
  return silu_precise(v);
#elif OP == GELU
  // 0.5·v·(1 + erf(v/√2)); for v < 0 through erfc, which keeps small results exact.
  float a = abs(v) * 0.70710678118654752;
  float c = erfc_pos(a);
  return v >= 0.0 ? 0.5 * v * (2.0 - c) : 0.5 * v * c;
#elif OP == TANH
  // sign(v)·(1 − e)/(1 + e) with e = exp(−2|v|) ≤ 1: no overflow for large |v|.
  float e = exp_precise(-2.0 * abs(v));
  return sign(v) * ((1.0 - e) / (1.0 + e));
#elif OP == SCALE
  return fma(v, pc.p0, pc.p1);
#elif OP == CLAMP
  return min(max(v, pc.p0), pc.p1);
#elif OP == COPY
  return v;
#else
#error "unary.comp: unknown OP"
#endif
}

void main() {
#if TILED
  uint t = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (t >= pc.n) return;  // the whole workgroup: the grid's last row may overhang
  const uint sa = pc.x_shape[XRANK - 2], sb = pc.x_shape[XRANK - 1];
  const uint tiles_b = (sb + TILE - 1u) / TILE, tiles_a = (sa + TILE - 1u) / TILE;
  const uint b0 = (t % tiles_b) * TILE;
  t /= tiles_b;
  const uint a0 = (t % tiles_a) * TILE;
  t /= tiles_a;
  uint ix = pc.x_base, iy = pc.y_base;
  for (int d = XRANK - 3; d >= 0; --d) {
    const uint c = t % pc.x_shape[d];
    t /= pc.x_shape[d];
    ix += c * pc.x_stride[d];
    iy += c * pc.y_stride[d];
  }
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  for (uint j = 0u; j < TILE; j += 8u) {
    const uint a = a0 + tx, b = b0 + ty + j;
    if (a < sa && b < sb) tile[ty + j][tx] = float(x[ix + a * pc.x_stride[XRANK - 2] + b * pc.x_stride[XRANK - 1]]);
  }
  barrier();
  for (uint j = 0u; j < TILE; j += 8u) {
    const uint a = a0 + ty + j, b = b0 + tx;
    if (a < sa && b < sb)
      y[iy + a * pc.y_stride[YRANK - 2] + b * pc.y_stride[YRANK - 1]] = Y_T(store_round(apply(tile[tx][ty + j])));
  }
#elif VEC == 4
  const uint q = linear_index();
  if (q >= pc.n / 4u) return;
  const vec4 v = vec4(x[q]);
  vec4 r;
  for (int c = 0; c < 4; ++c) r[c] = store_round(apply(v[c]));
  y[q] = Y_V(r);
#else
  uint i = linear_index();
  if (i >= pc.n) return;
  uint rest = i, ix = pc.x_base;
  for (int d = XRANK - 1; d >= 0; --d) {
    ix += (rest % pc.x_shape[d]) * pc.x_stride[d];
    rest /= pc.x_shape[d];
  }
  rest = i;
  uint iy = pc.y_base;
  for (int d = YRANK - 1; d >= 0; --d) {
    iy += (rest % pc.y_shape[d]) * pc.y_stride[d];
    rest /= pc.y_shape[d];
  }
  y[iy] = Y_T(store_round(apply(float(x[ix]))));
#endif
}
