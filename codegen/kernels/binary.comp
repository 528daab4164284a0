// binary.comp: z = a (op) b with numpy broadcasting, rounded through the output's
// dtype. One invocation per output element over a grid_1d grid.
//
// The lowering collapses the output shape to RANK dims (size-1 dims dropped, dims
// that are contiguous in z, a and b merged); a broadcast dim has stride 0 in its
// operand. Strides are in elements.
// Defines: OP ADD | MUL; RANK 1..6; ROUND (common.glsl).
// Bindings: 0 a (read), 1 b (read), 2 z (write).
// Push: n, shape[RANK], a_stride[RANK], b_stride[RANK].
#define ADD 1
#define MUL 2

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Z { float z[]; };
layout(push_constant) uniform Push {
  uint n;
  uint shape[RANK];
  uint a_stride[RANK];
  uint b_stride[RANK];
} pc;

void main() {
  uint i = linear_index();
  if (i >= pc.n) return;
  uint rest = i, ia = 0u, ib = 0u;
  for (int d = RANK - 1; d >= 0; --d) {
    uint c = rest % pc.shape[d];
    rest /= pc.shape[d];
    ia += c * pc.a_stride[d];
    ib += c * pc.b_stride[d];
  }
#if OP == ADD
  z[i] = store_round(a[ia] + b[ib]);
#elif OP == MUL
  z[i] = store_round(a[ia] * b[ib]);
#else
#error "binary.comp: unknown OP"
#endif
}
