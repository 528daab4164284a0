#version 450
// Portable check kernel (lavapipe): C[z][M,N] f32 = A[z][M,K] f16 · B[z][N,K]ᵀ, one
// invocation per element. Not timed; it lets winoprobe check the transforms anywhere.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { uint av[]; };
layout(std430, binding = 1) readonly buffer B { uint bv[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint M, N, K; } p;
float h(uint base, uint k, bool isA) {
  const uint w = isA ? av[(base + k) / 2] : bv[(base + k) / 2];
  return unpackHalf2x16(w)[k % 2];
}
void main() {
  const uint e = gl_GlobalInvocationID.x, z = gl_WorkGroupID.z;
  if (e >= p.M * p.N) return;
  const uint i = e / p.N, j = e % p.N;
  const uint abase = (z * p.M + i) * p.K, bbase = (z * p.N + j) * p.K;
  float s = 0.0;
  for (uint k = 0; k < p.K; ++k) s += h(abase, k, true) * h(bbase, k, false);
  c[z * p.M * p.N + e] = s;
}
