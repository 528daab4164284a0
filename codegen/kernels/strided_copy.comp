// strided_copy.comp: the data movement of permute, slice, concat and copies.
// For every index c of an iteration shape (RANK dims, row major):
//   dst[dst_base + Σ c_d·dst_stride_d] = src[src_base + Σ c_d·src_stride_d]
// permute iterates the output (src strides permuted), slice the output (src strides
// of the input, src_base at the slice start), concat each operand (dst strides of
// the output, dst_base at the operand's place). Strides are physical, so any layout
// works on either side. Values of one storage type are copied bit for bit (SRC_T =
// DST_T: uint for f32 storage, float16_t for f16); with CONVERT = 1 an element is
// converted to f32 and stored through store_round() in DST_T (storage types differ).
// VEC = V > 1 (copies without CONVERT): invocation i moves elements V·i .. V·i + V − 1
// as one 16-byte unit (V = 16 / element bytes: 4 f32 words or 8 halves), which lie in
// one run of the innermost dim on both sides (the lowering checks: its size, the outer
// strides and both bases multiples of V, innermost strides 1). The same bits; the
// index arithmetic once per 16 bytes (one element per invocation ran the transformers'
// head permutes at ~0.4 TB/s on the H200).
// Defines: RANK 1..6; SRC_T, DST_T (default uint); CONVERT 0 / 1 (default 0); ROUND;
// VEC 1 | 4 | 8 (default 1).
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
#ifndef VEC
#define VEC 1
#endif
#if VEC > 1 && CONVERT
#error "strided_copy.comp: VEC copies bits, no CONVERT"
#endif

layout(local_size_x = 64) in;
#if VEC > 1
layout(std430, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
#else
layout(std430, binding = 0) readonly buffer Src { SRC_T src[]; };
layout(std430, binding = 1) writeonly buffer Dst { DST_T dst[]; };
#endif
layout(push_constant) uniform Push {
  uint n;
  uint src_base;
  uint dst_base;
  uint shape[RANK];
  uint src_stride[RANK];
  uint dst_stride[RANK];
} pc;

void main() {
#if VEC > 1
  const uint q = linear_index();
  if (q >= pc.n / VEC) return;
  const uint i = q * VEC;
#else
  uint i = linear_index();
  if (i >= pc.n) return;
#endif
  uint rest = i, is = pc.src_base, id = pc.dst_base;
  for (int d = RANK - 1; d >= 0; --d) {
    uint c = rest % pc.shape[d];
    rest /= pc.shape[d];
    is += c * pc.src_stride[d];
    id += c * pc.dst_stride[d];
  }
#if VEC > 1
  dst[id / VEC] = src[is / VEC];
#elif CONVERT
  dst[id] = DST_T(store_round(float(src[is])));
#else
  dst[id] = src[is];
#endif
}
