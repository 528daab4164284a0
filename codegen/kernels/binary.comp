// binary.comp: z = a (op) b with numpy broadcasting, rounded through the output's
// dtype. One invocation per output element over a grid_1d grid.
//
// Invocation i handles element i of z's logical row-major order: it unravels i over
// the iteration shape (z's shape, collapsed by the lowering to RANK dims: size-1 dims
// dropped, dims contiguous in z, a and b merged) and steps through each operand's
// physical strides; a broadcast dim has stride 0 in its operand. Strides are in
// elements, so any layout works for any operand.
// Defines: OP ADD | MUL; RANK 1..6; ROUND (common.glsl); A_T, B_T, Z_T float |
// float16_t (default float); BASES 0 / 1 (default 0): each operand's first element
// in its binding (a box of a value larger than one binding) comes after n.
// Bindings: 0 a (read), 1 b (read), 2 z (write).
// Push: n, [a_base, b_base, z_base,] shape[RANK], a_stride[RANK], b_stride[RANK],
// z_stride[RANK].
#define ADD 1
#define MUL 2
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

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { A_T a[]; };
layout(std430, binding = 1) readonly buffer B { B_T b[]; };
layout(std430, binding = 2) writeonly buffer Z { Z_T z[]; };
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
  uint i = linear_index();
  if (i >= pc.n) return;
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
  z[iz] = Z_T(store_round(float(a[ia]) + float(b[ib])));
#elif OP == MUL
  z[iz] = Z_T(store_round(float(a[ia]) * float(b[ib])));
#else
#error "binary.comp: unknown OP"
#endif
}
