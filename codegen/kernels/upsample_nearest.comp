// upsample_nearest.comp: y[c] = x[c / factor] per dim, for every index c of the
// output (RANK dims after the lowering merges dims with factor 1). Copies bits.
// Defines: RANK 1..6. Bindings: 0 x (read), 1 y (write).
// Push: n, shape[RANK] (output), factor[RANK], x_stride[RANK].
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform Push {
  uint n;
  uint shape[RANK];
  uint factor[RANK];
  uint x_stride[RANK];
} pc;

void main() {
  uint i = linear_index();
  if (i >= pc.n) return;
  uint rest = i, ix = 0u;
  for (int d = RANK - 1; d >= 0; --d) {
    uint c = rest % pc.shape[d];
    rest /= pc.shape[d];
    ix += (c / pc.factor[d]) * pc.x_stride[d];
  }
  y[i] = x[ix];
}
