// binary.comp: z = a (op) b with numpy broadcasting, rounded through the output's
// dtype. One invocation per output element over a grid_1d grid.
//
// Invocation i handles element i of z's logical row-major order: it unravels i over
// the iteration shape (z's shape, collapsed by the lowering to RANK dims: size-1 dims
// dropped, dims contiguous in z, a and b merged) and steps through each operand's
// physical strides; a broadcast dim has stride 0 in its operand. Strides are in
// elements, so any layout works for any operand.
// VEC = 4: invocation i handles elements 4i .. 4i + 3, which lie in one run of the
// innermost dim (the lowering checks: its size and every outer stride multiples of 4,
// each operand's innermost stride 1, n a multiple of 4), read and written as
// 4-vectors (A_V, B_V, Z_V: vec4 | f16vec4, 16- or 8-byte accesses, the index
// arithmetic once per 4 elements). Each element is computed and rounded as with VEC 1:
// the same bits. Element-per-invocation kernels with 2-byte accesses ran at 0.4-0.7
// TB/s on the H200.
// Defines: OP ADD | MUL | SILU_MUL (silu(a) · b: silu_mul, a SwiGLU gate); RANK 1..6; ROUND (common.glsl); A_T, B_T, Z_T float |
// float16_t (default float); VEC 1 | 4 (default 1); BASES 0 / 1 (default 0, not with
// VEC 4): each operand's first element in its binding (a box of a value larger than
// one binding) comes after n.
// Bindings: 0 a (read), 1 b (read), 2 z (write).
// Push: n, [a_base, b_base, z_base,] shape[RANK], a_stride[RANK], b_stride[RANK],
// z_stride[RANK].
#define ADD 1
#define MUL 2
#define SILU_MUL 3
#ifndef A_T
#define A_T float
#endif
#ifndef B_T
#define B_T float
#endif
#ifndef Z_T
#define Z_T float
#endif
#ifndef BASES
#define BASES 0
#endif
#ifndef VEC
#define VEC 1
#endif
#if VEC == 4 && BASES
#error "binary.comp: VEC 4 takes no BASES"
#endif

layout(local_size_x = 64) in;
#if VEC == 4
layout(std430, binding = 0) readonly buffer A { A_V a[]; };
layout(std430, binding = 1) readonly buffer B { B_V b[]; };
layout(std430, binding = 2) writeonly buffer Z { Z_V z[]; };
#else
layout(std430, binding = 0) readonly buffer A { A_T a[]; };
layout(std430, binding = 1) readonly buffer B { B_T b[]; };
layout(std430, binding = 2) writeonly buffer Z { Z_T z[]; };
#endif
layout(push_constant) uniform Push {
  uint n;
#if BASES
  uint a_base, b_base, z_base;
#endif
  uint shape[RANK];
  uint a_stride[RANK];
  uint b_stride[RANK];
  uint z_stride[RANK];
} pc;

void main() {
#if VEC == 4
  const uint q = linear_index();
  if (q >= pc.n / 4u) return;
  const uint i = q * 4u;
#else
  uint i = linear_index();
  if (i >= pc.n) return;
#endif
#if BASES
  uint rest = i, ia = pc.a_base, ib = pc.b_base, iz = pc.z_base;
#else
  uint rest = i, ia = 0u, ib = 0u, iz = 0u;
#endif
  for (int d = RANK - 1; d >= 0; --d) {
    uint c = rest % pc.shape[d];
    rest /= pc.shape[d];
    ia += c * pc.a_stride[d];
    ib += c * pc.b_stride[d];
    iz += c * pc.z_stride[d];
  }
#if OP == ADD
#define APPLY(x, y) ((x) + (y))
#elif OP == MUL
#define APPLY(x, y) ((x) * (y))
#elif OP == SILU_MUL
#define APPLY(x, y) (silu_precise(x) * (y))
#else
#error "binary.comp: unknown OP"
#endif
#if VEC == 4
  const vec4 va = vec4(a[ia >> 2u]), vb = vec4(b[ib >> 2u]);
  vec4 vz;
  for (int c = 0; c < 4; ++c) vz[c] = store_round(APPLY(va[c], vb[c]));
  z[iz >> 2u] = Z_V(vz);
#else
  z[iz] = Z_T(store_round(APPLY(float(a[ia]), float(b[ib]))));
#endif
}
