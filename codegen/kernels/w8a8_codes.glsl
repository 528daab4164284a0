// w8a8_codes.glsl: the int8 codes of W8A8 activations (ir/quant.h), shared by every
// kernel that writes them (quantize_rows.comp; layer_norm.comp with QUANT), so that
// they round alike bit for bit. Put in front of a kernel compiled with the W8A8_CODES
// define (codegen/shader_compiler.cpp).
//
// A row's scale is sx = div_rn(max |x|, 127) (correctly rounded). The code of x is
// clamp(roundEven(x / sx), −127, 127) with the quotient correctly rounded: Vulkan lets
// a / b be off by 2.5 ULP, and a code decided by a quotient one ULP off moves a whole
// row of y by sx·sw·|wq|. code() takes x · (1 / sx) and falls back to div_rn only where
// that lies within 2⁻¹⁴ of a half-integer (or the scale is so small or large that 1 / sx
// may leave the normal range): elsewhere both round to the same code.
//
// Output form (gemm_int8.comp's operand): four codes to a 32-bit word, byte j of word w
// column 4w + j, two's complement (pack4).
#extension GL_EXT_control_flow_attributes : enable

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

// The code of v at scale s (> 0) from q = v · (1 / s), and whether q lies within 2⁻¹⁴
// of a half-integer (or `exact`: a scale so small or large that 1 / s may leave the
// normal range), where only the correctly rounded quotient decides.
bool near_half(float q) { return abs(q - floor(q) - 0.5) < 6.103515625e-05; }  // 2^-14
int code_exact(float v, float s) { return int(clamp(roundEven(div_rn(v, s)), -127.0, 127.0)); }
int code(float v, float s, float inv, bool exact) {
  const float q = v * inv;
  int c = int(clamp(roundEven(q), -127.0, 127.0));
  [[dont_flatten]] if (exact || near_half(q)) c = code_exact(v, s);
  return c;
}

// 4 codes in a word, byte j = column j.
uint pack4(ivec4 c) { return (uint(c.x) & 0xffu) | (uint(c.y) & 0xffu) << 8 | (uint(c.z) & 0xffu) << 16 | uint(c.w) << 24; }
