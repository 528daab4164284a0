// quantize_rows.comp: the activation side of a W8A8 linear (ir/quant.h): each row r
// of x[R, K] (row-major, X_T = float or float16_t) becomes
//   sx[r] = max_k |x[r,k]| / 127                 (f32, correctly rounded)
//   q[r,k] = clamp(roundEven(x[r,k] / sx[r]), −127, 127)   (the quotient correctly
//            rounded in f32 first, as the host's division is)
// a row of zeros (or one whose maximum is not > 0) sx = 0 and q = 0.
// Output, one binding (the GEMM's operand, gemm_int8.comp): the codes, 4 to a 32-bit
// word (byte j of word w is column 4w + j, two's complement), rows of KP columns (KP =
// K rounded up to the GEMM's step; the columns past K are 0), then the R scales as f32
// bits from word R·KP/4 on. One workgroup per row (grid_1d-style rows over x and y),
// WG invocations, a shared-memory tree for the maximum (max is exact: any order gives
// the same value).
//
// Vulkan lets a / b be off by 2.5 ULP, so div_rn() rounds the quotient itself (a code
// decided by a quotient one ULP off, x / sx = 63.4999962 against 63.5, moves a whole
// row of y by sx·sw·|wq|): of five neighbouring floats, the one whose remainder
// a − q·b is the smallest.
//
// Defines: X_T, WG (a power of two ≤ 1024).
#extension GL_EXT_control_flow_attributes : enable

#ifndef X_T
#define X_T float
#endif
#ifndef WG
#define WG 128
#endif

layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer XBuf { X_T x[]; };
layout(std430, binding = 1) writeonly buffer QBuf { uint q[]; };
layout(push_constant) uniform Push {
  uint rows, k, kp;  // kp: the row stride of q in codes (a multiple of 4)
} pc;

shared float sh_max[WG];

float next_up(float v) { return uintBitsToFloat(floatBitsToUint(v) + (v >= 0.0 ? 1u : 0xffffffffu)); }
float next_down(float v) { return uintBitsToFloat(floatBitsToUint(v) + (v > 0.0 ? 0xffffffffu : 1u)); }

// a − c·b with c·b exact (Dekker's product: Veltkamp halves, correctly rounded + and *
// only, `precise` so that no compiler contracts them), rounded once at the end: the
// order of the remainders of neighbouring candidates is kept.
float remainder_of(float a, float b, float c) {
  precise float p = c * b;
  precise float tc = 4097.0 * c;
  precise float ch = tc - (tc - c);
  precise float cl = c - ch;
  precise float tb = 4097.0 * b;
  precise float bh = tb - (tb - b);
  precise float bl = b - bh;
  precise float err = ((ch * bh - p) + ch * bl + cl * bh) + cl * bl;
  precise float r = (a - p) - err;
  return r;
}

// a / b correctly rounded to f32 (b > 0, the quotient normal): of the device's quotient
// and its two neighbours on each side, the one with the smallest remainder, ties to
// the even one.
float div_rn(float a, float b) {
  precise float q = a / b;
  float lo = next_down(next_down(q));
  float best = lo;
  float best_r = abs(remainder_of(a, b, lo));
  float c = lo;
  [[unroll]] for (int i = 0; i < 4; ++i) {
    c = next_up(c);
    const float cr = abs(remainder_of(a, b, c));
    if (cr < best_r || (cr == best_r && (floatBitsToUint(c) & 1u) == 0u)) {
      best = c;
      best_r = cr;
    }
  }
  return best;
}

int code(float v, float s) { return int(clamp(roundEven(div_rn(v, s)), -127.0, 127.0)); }

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;  // whole workgroups: the barrier below stays uniform
  const uint tid = gl_LocalInvocationID.x;
  const uint base = row * pc.k;
  float m = 0.0;
  for (uint c = tid; c < pc.k; c += WG) m = max(m, abs(float(x[base + c])));
  sh_max[tid] = m;
  barrier();
  [[unroll]] for (uint s = WG / 2; s > 0; s >>= 1) {
    if (tid < s) sh_max[tid] = max(sh_max[tid], sh_max[tid + s]);
    barrier();
  }
  const float amax = sh_max[0];
  const bool zero = !(amax > 0.0);
  const float scale = zero ? 0.0 : div_rn(amax, 127.0);
  const uint words = pc.kp / 4;
  const uint qbase = row * words;
  for (uint w = tid; w < words; w += WG) {
    uint packed = 0u;
    if (!zero) {
      [[unroll]] for (uint j = 0; j < 4; ++j) {
        const uint c = 4 * w + j;
        const int v = c < pc.k ? code(float(x[base + c]), scale) : 0;
        packed |= (uint(v) & 0xffu) << (8 * j);
      }
    }
    q[qbase + w] = packed;
  }
  if (tid == 0) q[pc.rows * words + row] = floatBitsToUint(scale);
}
