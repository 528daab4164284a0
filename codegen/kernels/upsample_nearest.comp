// upsample_nearest.comp: y[c] = x[c / factor] per dim, for every index c of the
// output (RANK dims after the lowering merges dims with factor 1). Strides are
// physical (any layout on either side); elements are copied bit for bit.
// Defines: RANK 1..6; ELEM uint (f32 storage, default) | float16_t (f16 storage).
// Bindings: 0 x (read), 1 y (write).
// Push: n, shape[RANK] (output), factor[RANK], x_stride[RANK], y_stride[RANK].
#ifndef ELEM
#define ELEM uint
#endif

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { ELEM x[]; };
layout(std430, binding = 1) writeonly buffer Y { ELEM y[]; };
layout(push_constant) uniform Push {
  uint n;
  uint shape[RANK];
  uint factor[RANK];
  uint x_stride[RANK];
  uint y_stride[RANK];
} pc;

void main() {
  uint i = linear_index();
  if (i >= pc.n) return;
  uint rest = i, ix = 0u, iy = 0u;
  for (int d = RANK - 1; d >= 0; --d) {
    uint c = rest % pc.shape[d];
    rest /= pc.shape[d];
    ix += (c / pc.factor[d]) * pc.x_stride[d];
    iy += c * pc.y_stride[d];
  }
  y[iy] = x[ix];
}
