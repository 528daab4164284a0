// strided_copy.comp: the data movement of permute, slice, concat and copies.
// For every index c of an iteration shape (RANK dims, row major):
//   dst[dst_base + Σ c_d·dst_stride_d] = src[src_base + Σ c_d·src_stride_d]
// permute iterates the output (src strides permuted), slice the output (src strides
// of the input, src_base at the slice start), concat each operand (dst strides of
// the output, dst_base at the operand's place). Strides are physical, so any layout
// works on either side. Values of one storage type are copied bit for bit (SRC_T =
// DST_T: uint for f32 storage, float16_t for f16); with CONVERT = 1 an element is
// converted to f32 and stored through store_round() in DST_T (storage types differ).
// Defines: RANK 1..6; SRC_T, DST_T (default uint); CONVERT 0 / 1 (default 0); ROUND.
// Bindings: 0 src (read), 1 dst (write).
// Push: n, src_base, dst_base, shape[RANK], src_stride[RANK], dst_stride[RANK].
#ifndef SRC_T
#define SRC_T uint
#endif
#ifndef DST_T
#define DST_T uint
#endif
#ifndef CONVERT
#define CONVERT 0
#endif

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Src { SRC_T src[]; };
layout(std430, binding = 1) writeonly buffer Dst { DST_T dst[]; };
layout(push_constant) uniform Push {
  uint n;
  uint src_base;
  uint dst_base;
  uint shape[RANK];
  uint src_stride[RANK];
  uint dst_stride[RANK];
} pc;

void main() {
  uint i = linear_index();
  if (i >= pc.n) return;
  uint rest = i, is = pc.src_base, id = pc.dst_base;
  for (int d = RANK - 1; d >= 0; --d) {
    uint c = rest % pc.shape[d];
    rest /= pc.shape[d];
    is += c * pc.src_stride[d];
    id += c * pc.dst_stride[d];
  }
#if CONVERT
  dst[id] = DST_T(store_round(float(src[is])));
#else
  dst[id] = src[is];
#endif
}
