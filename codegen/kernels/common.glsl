// common.glsl: helpers every kernel may use. The shader compiler
// (codegen/shader_compiler.h) puts this file after `#version 450` and the kernel's
// defines, in front of every kernel template.
//
// Numerics here do not lean on what Vulkan leaves loose: exp() may lose 3 + 2|x|
// ULP, ldexp/exp2 need not be exact, and the rounding of f32 -> f16 conversions
// (packHalf2x16) is implementation-defined. So the helpers below are built from
// correctly rounded + and *, integer bit manipulation and roundEven (`precise`
// where a compiler's reassociation would lose accuracy): the dtype roundings are
// bit-exact with ir/types.cpp and exp_precise stays within a few ULP on any device.
//
// 16-bit storage: a kernel variant with an f16 operand is compiled with F16 defined
// (codegen/storage.h, add_type_define), which enables the extensions below; its
// buffers of f16 values are declared with element type float16_t (the operand's
// type define, e.g. X_T). Loads convert to f32 (exact); stores go through
// store_round() first, so the conversion to f16 is exact and rounds like the
// interpreter, whatever the device's own conversion mode.
#if defined(F16)
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
// F16_RTE = 1 (the lowering sets it with F16 where the device has
// shaderRoundingModeRTEFloat16; the plan then requires that): the shader declares
// round-to-nearest-even for its 16-bit float results (SPV_KHR_float_controls'
// RoundingModeRTE execution mode, 4462, capability 4467), so one f32 -> f16
// conversion rounds exactly as round_f16 below does in the half's normal range.
#if defined(F16) && defined(F16_RTE) && F16_RTE
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4467], 4462, 16);
#endif
// F16_DENORM = 1 (with F16_RTE, where the device has shaderDenormPreserveFloat16): the
// shader also declares that its 16-bit floats keep their denormals (DenormPreserve,
// 4459, capability 4464), so one f32 -> f16 conversion is the IEEE rounding over the
// whole range, subnormals included, and round_f16 is that conversion alone. Without
// it the half's subnormal range takes round_f16_bits, a branch per element.
#if defined(F16) && defined(F16_RTE) && F16_RTE && defined(F16_DENORM) && F16_DENORM
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4464], 4459, 16);
#endif

// The linear invocation index of a 1-D problem launched over a 2-D grid, as
// Lowering::grid_1d (codegen/lowering.h) sizes it: x covers up to
// maxComputeWorkGroupCount[0] groups, y counts rows of those. A macro, not a
// function: this file comes before a kernel's local_size declaration, and
// gl_WorkGroupSize read here would be the default (1, 1, 1) — which made every
// dispatch with more than maxComputeWorkGroupCount[0] groups (65535 on lavapipe)
// index rows y > 0 wrongly. Expanded in main(), it sees the declared size.
#define linear_index() (gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// Values of the ROUND define: how a kernel rounds what it stores (the value's dtype;
// storage stays f32, as in the interpreter, which rounds every node output through
// its dtype).
#define ROUND_NONE 0
#define ROUND_F16 1
#define ROUND_BF16 2

// x rounded to the nearest IEEE half (ties to even), as float; overflow gives inf.
// Bit-exact with strata::float_to_half (ir/types.cpp): the hardware conversion where
// F16_RTE allows (round_f16), else the bit arithmetic (round_f16_bits).
float round_f16_bits(float x) {
  uint u = floatBitsToUint(x);
  uint sign = u & 0x80000000u;
  uint a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return x;                                   // inf, NaN
  if (a >= 0x477ff000u) return uintBitsToFloat(sign | 0x7f800000u);  // >= 65520: inf
  if (a < 0x38800000u) {  // half subnormal range: multiples of 2^-24
    float m = roundEven(uintBitsToFloat(a) * 16777216.0);
    return uintBitsToFloat(sign | floatBitsToUint(m * 5.9604644775390625e-8));
  }
  uint h = a >> 13;
  uint rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) h += 1u;
  return uintBitsToFloat(sign | (h << 13));
}

float round_f16(float x) {
#if defined(F16) && defined(F16_RTE) && F16_RTE && defined(F16_DENORM) && F16_DENORM
  return float(float16_t(x));
#endif
#if defined(F16) && defined(F16_RTE) && F16_RTE
  // The normal range, overflow and inf through the hardware; NaN and the half's
  // subnormal range (whose treatment float controls leave to the device unless it
  // preserves 16-bit denormals) below. Far cheaper for memory-bound kernels.
  if (abs(x) >= 6.103515625e-5) return float(float16_t(x));
#endif
  return round_f16_bits(x);
}

// x rounded to the nearest bfloat16 (ties to even), as float. Bit-exact with
// strata::float_to_bf16 (NaN stays NaN).
float round_bf16(float x) {
  uint u = floatBitsToUint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;
  u += 0x7fffu + ((u >> 16) & 1u);
  return uintBitsToFloat(u & 0xffff0000u);
}

// x rounded through the dtype named by the ROUND define (identity without it).
float store_round(float x) {
#if defined(ROUND) && ROUND == ROUND_F16
  return round_f16(x);
#elif defined(ROUND) && ROUND == ROUND_BF16
  return round_bf16(x);
#else
  return x;
#endif
}

// 2^k for integer -126 <= k <= 127, built from its bits (Vulkan does not promise
// that ldexp or exp2 are exact).
float pow2i(int k) { return uintBitsToFloat(uint(k + 127) << 23); }

// e^x within about 1 ULP on any device: Cody-Waite reduction x = k·ln2 + r,
// |r| <= ln2/2, a degree-7 Taylor polynomial for e^r (truncation < 0.1 ULP), and an
// exact scaling by 2^k (in two steps, so that each factor is a normal float).
float exp_precise(float x) {
  if (x > 88.7228394) return uintBitsToFloat(0x7f800000u);
  if (x < -103.972084) return 0.0;
  float k = roundEven(x * 1.44269504);
  // `precise` (NoContraction): compilers may otherwise fold the two steps into
  // x - k·ln2 with one rounded product (lavapipe did, with fma()), which loses the
  // point of the split.
  precise float r = x - k * 0.693145751953125;  // ln2 high part: k·ln2_hi and the difference are exact
  r = r - k * 1.42860676e-6;                    // ln2 low part
  float p = 1.98412701e-4;                  // 1/7!
  p = fma(p, r, 1.38888892e-3);             // 1/6!
  p = fma(p, r, 8.33333377e-3);             // 1/5!
  p = fma(p, r, 4.16666679e-2);             // 1/4!
  p = fma(p, r, 1.66666672e-1);             // 1/3!
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  int ki = int(k);
  return p * pow2i(ki / 2) * pow2i(ki - ki / 2);
}

// v·σ(v) (SiLU), written with e^-|v| so that nothing overflows for large |v|.
float silu_precise(float v) {
  float t = exp_precise(-abs(v));
  return v >= 0.0 ? v / (1.0 + t) : v * t / (1.0 + t);
}

// v·σ(v) in a few instructions, for the memory-bound norm passes (norm_act_apply_vec,
// norm_act_rms_vec): e^-|v| as Vulkan's exp2 of the rounded product -|v|·log2 e, one
// reciprocal for both signs. Error against silu_precise: the product's rounding, at most
// half an ULP of |v|·log2 e (< 8e-6 absolute below 2^8, so < 6e-6 relative in e^-|v|),
// plus exp2's (3 + 2·|x| ULP by the spec, ~2 ULP on NVIDIA's unit): within 1e-5
// relative wherever the f16 result is not zero (|v| < ~20: < 2e-6), inside the
// interpreter tolerances of tests/codegen/test_norm_act.cpp. Below -|v| ≈ -104 exp2
// flushes to 0 and the result is -0, as v·σ(v) rounds there.
// Why not the Cody-Waite reduction of exp_precise: on the H200 the apply pass was
// issue-bound at ~46 instructions per element, ~25 of them in that form of the SiLU
// (read in the driver's machine code, benchmarks/sass); and its 1.5·2^23 rounding trick gave
// wrong
// exponents on lavapipe once inlined into another kernel.
float silu_fast(float v) {
  const float t = exp2(abs(v) * -1.44269504);  // e^-|v|
  const float s = 1.0 / (1.0 + t);
  return v >= 0.0 ? v * s : v * t * s;
}

// erfc(a) for a >= 0 and erf(x), by Abramowitz & Stegun 7.1.26 (absolute error
// <= 1.5e-7). erfc is computed directly, so 1 - erf for large |x| does not cancel.
float erfc_pos(float a) {
  float t = 1.0 / fma(0.3275911, a, 1.0);
  float poly = t * fma(t, fma(t, fma(t, fma(t, 1.061405429, -1.453152027), 1.421413741), -0.284496736), 0.254829592);
  return poly * exp_precise(-a * a);
}

float erf_as(float x) {
  float y = 1.0 - erfc_pos(abs(x));
  return x < 0.0 ? -y : y;
}
