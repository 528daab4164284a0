// block_softmax.comp: the block weights of exp_blocks rows (ir/ops.h block_softmax).
//
//   per row: m = max_b m_b, l = Σ_b exp(m_b − m) · l_b, c_b = f16(exp(m_b − m) / l)
//
// where (m_b, l_b) are the f16 pairs at halfs n + 2b of the row (read as one 32-bit
// word each). One workgroup per row (rows strided over the grid): invocation tid takes
// blocks tid, tid + WG, ...; the maximum and the sum are combined by a fixed
// shared-memory tree, so the order is the same on every device. exp_precise
// (common.glsl) as the softmax kernels use. The weights are stored as f16 bits made by
// integer arithmetic (round_f16_bits, f16_bits): most weights of a long row are f16
// subnormals, which a device's conversion may flush; two per 32-bit word, so a row's
// block count is even (the lowering checks).
//
// Push constants: rows, blocks, row_words (32-bit words per e row), stats_word (the
// first statistics word of a row: n / 2).
// Defines: WG (a power of two). Bindings: e (read, as 32-bit words), c (write, f16
// pairs as 32-bit words).
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer EBuf { uint ew[]; };
layout(std430, binding = 1) writeonly buffer CBuf { uint cw[]; };

layout(push_constant) uniform Push {
  uint rows, blocks, row_words, stats_word;
} pc;

shared float red[WG];

// The f16 bits of x, a value an f16 holds exactly (round_f16_bits' result) in [0, 1].
uint f16_bits(float x) {
  const uint a = floatBitsToUint(x);
  if (a < 0x38800000u) return uint(x * 16777216.0);  // subnormal (or 0): x / 2^-24
  return (a - 0x38000000u) >> 13;                   // rebias the exponent 127 → 15
}

// c_b for the block whose (max, sum) word is w.
float weight(uint w, float m, float l) { return round_f16_bits(exp_precise(unpackHalf2x16(w).x - m) / l); }

// The workgroup's maximum (op 0) or sum (op 1) of v, the same in every invocation.
float combine(float v, uint op) {
  const uint tid = gl_LocalInvocationIndex;
  red[tid] = v;
  barrier();
  [[unroll]] for (uint s = WG / 2; s > 0; s >>= 1) {
    if (tid < s) red[tid] = op == 0u ? max(red[tid], red[tid + s]) : red[tid] + red[tid + s];
    barrier();
  }
  const float r = red[0];
  barrier();  // red is free for the next combine
  return r;
}

void main() {
  const uint tid = gl_LocalInvocationIndex;
  for (uint r = gl_WorkGroupID.x; r < pc.rows; r += gl_NumWorkGroups.x) {
    const uint at = r * pc.row_words + pc.stats_word;
    float m = uintBitsToFloat(0xFF800000u);  // -inf
    for (uint b = tid; b < pc.blocks; b += WG) m = max(m, unpackHalf2x16(ew[at + b]).x);
    m = combine(m, 0u);
    float l = 0.0;
    for (uint b = tid; b < pc.blocks; b += WG) {
      const vec2 ml = unpackHalf2x16(ew[at + b]);
      l += exp_precise(ml.x - m) * ml.y;
    }
    l = combine(l, 1u);
    for (uint q = tid; q < pc.blocks / 2u; q += WG)
      cw[(r * pc.blocks) / 2u + q] = f16_bits(weight(ew[at + 2u * q], m, l)) |
                                     (f16_bits(weight(ew[at + 2u * q + 1u], m, l)) << 16);
  }
}
