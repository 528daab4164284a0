#version 450
// Which (row, column) each lane's elements of the attention kernel's fragment types
// hold on this device: a 32×32 f32 accumulator, a 32×16 f16 A and a 16×32 f16 B
// (NV syntax, rewritten to KHR by nv2khr.py). Run through cm2probe with REF=file:
// C[lane·32 + i] = code of acc element i, C[1024 + lane·16 + j] = A element j,
// C[1536 + lane·16 + j] = B element j; code = row·64 + column.
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) readonly buffer A { float16_t av[]; };
layout(std430, binding = 1) readonly buffer B { float16_t bv[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint M, N, K; } p;
shared float acc_codes[32 * 32];
shared float16_t a_codes[32 * 16];
shared float16_t b_codes[16 * 32];
#define TA fcoopmatNV<16, gl_ScopeSubgroup, 32, 16>
#define TB fcoopmatNV<16, gl_ScopeSubgroup, 16, 32>
#define TC fcoopmatNV<32, gl_ScopeSubgroup, 32, 32>
void main() {
  const uint l = gl_LocalInvocationIndex;
  for (uint e = l; e < 1024; e += 32) acc_codes[e] = float((e / 32) * 64 + e % 32);
  for (uint e = l; e < 512; e += 32) {
    a_codes[e] = float16_t((e / 16) * 64 + e % 16);
    b_codes[e] = float16_t((e / 32) * 64 + e % 32);
  }
  barrier();
  TC acc; TA a; TB b;
  coopMatLoadNV(acc, acc_codes, 0, 32, false);
  coopMatLoadNV(a, a_codes, 0, 16, false);
  coopMatLoadNV(b, b_codes, 0, 32, false);
  for (int i = 0; i < acc.length(); ++i) c[l * 32 + i] = acc[i];
  for (int j = 0; j < a.length(); ++j) c[1024 + l * 16 + j] = float(a[j]);
  for (int j = 0; j < b.length(); ++j) c[1536 + l * 16 + j] = float(b[j]);
  c[2048 + l] = float(acc.length() * 10000 + a.length() * 100 + b.length());
  // The roles nv2khr.py needs (never changes c above: the product goes past it).
  TC d = coopMatMulAddNV(a, b, TC(0.0));
  coopMatStoreNV(d, c, 4096, 32, false);
}
