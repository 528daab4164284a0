// strided_copy.comp: the data movement of permute, slice, concat and copies.
// For every index c of an iteration shape (RANK dims, row major):
//   dst[dst_base + Σ c_d·dst_stride_d] = src[src_base + Σ c_d·src_stride_d]
// permute iterates the output (src strides permuted), slice the output (src strides
// of the input, src_base at the slice start), concat each operand (dst strides of
// the output, dst_base at the operand's place). Values are copied bit for bit.
// Defines: RANK 1..6. Bindings: 0 src (read), 1 dst (write).
// Push: n, src_base, dst_base, shape[RANK], src_stride[RANK], dst_stride[RANK].
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uint dst[]; };
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
  dst[id] = src[is];
}
