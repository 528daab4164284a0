// winograd_gemm.comp: the α² GEMMs (16 or 36) of a Winograd F(m×m, 3×3) conv over FRAMES
// input frames (ir/ops.h winograd_gemm), one per z of the grid:
//
//   M[ξ, t, o] = Σ_f Σ_c V_f[ξ, t, c] · U[ξ, o, f·C + c]
//
// V_f f16 [α², TP, C] (one binding per frame: each frame's V is made once and read by
// every output frame its taps meet), U f16 [α², Co, FRAMES·C], M f32 [α², TP, Co] (f16
// with M_F16 = 1), all row major. The conv kernel's staging on a plain GEMM: per step of BK
// columns each invocation loads
// 16-byte rows of A and B into registers, the workgroup stages them in shared memory
// (rows of BK + 8 halfs), and each subgroup multiplies FP × FC fragments of CM_M × CM_N
// (coopmat.glsl; the next step's loads are issued before the multiplies). A step
// never straddles two frames: C is a multiple of BK. Rows past TP and columns past Co
// load zeros; fragments wholly outside are not stored (TP is a multiple of 32, Co of
// the fragment side: the lowering checks).
//
// M_F16 = 1: each fragment goes through a patch of shared memory, f32, and its lanes
// store it rounded to f16 (round_f16), 8 channels (16 bytes) at a time: half M's bytes,
// for the single 2-D convs, whose GEMMs (K = C of 256-512) are bound by M's stores as
// much as by the multiplies.
//
// Defines: WP, WC (subgroups over rows and columns), FP, FC (fragments per subgroup),
// BK, FRAMES (1-3), M_F16 (0 or 1), and coopmat.glsl's COOPMAT, CM_SG, CM_M = CM_N
// (and COOPMAT_KHR).
// Push constants: rows (TP), co, c (C), k (FRAMES·C).
// Bindings: V_0 … V_{FRAMES−1}, U (read, uvec4), M (write, f32; uvec4 of halfs with M_F16).
#extension GL_EXT_control_flow_attributes : enable

#define FM CM_M
#define FN CM_N
#define BM (WP * FP * FM)
#define BN (WC * FC * FN)
#define WG (WP * WC * CM_SG)
#define ROW (BK + 8)
#define KV (BK / 8)
#define A_LOADS ((BM * KV + WG - 1) / WG)
#define B_LOADS ((BN * KV + WG - 1) / WG)

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer V0Buf { uvec4 v0[]; };
#if FRAMES > 1
layout(std430, binding = 1) readonly buffer V1Buf { uvec4 v1[]; };
#endif
#if FRAMES > 2
layout(std430, binding = 2) readonly buffer V2Buf { uvec4 v2[]; };
#endif
layout(std430, binding = FRAMES) readonly buffer UBuf { uvec4 uv[]; };
#ifndef M_F16
#define M_F16 0
#endif
#if M_F16
layout(std430, binding = FRAMES + 1) writeonly buffer MBuf { uvec4 mh[]; };
#else
layout(std430, binding = FRAMES + 1) writeonly buffer MBuf { float mv[]; };
#endif

layout(push_constant) uniform Push {
  uint rows, co, c, k;
} pc;

// Native cooperative matrices load from uvec4 arrays (offsets and strides in units of
// 8 halfs); the emulation reads halfs one by one.
#define SMEM_VEC (COOPMAT == 1)
#define B_OFF 0u  // halfs before the B tile in b_sh
#if SMEM_VEC && M_F16
// The staged tiles and the epilogue's patches (one FM × FN f32 patch per subgroup, as
// uvec4s: coopMatStoreNV takes uvec4 arrays, not vec4) share one array, the patches
// used only after the main loop: no more shared memory than without M_F16.
#define A_VECS (BM * ROW / 8)
#define EP_VECS (WP * WC * FM * FN / 4)
shared uvec4 smem[(A_VECS + BN * ROW / 8) > EP_VECS ? (A_VECS + BN * ROW / 8) : EP_VECS];
#define a_sh smem
#define b_sh smem
#undef B_OFF
#define B_OFF (A_VECS * 8u)
#define SH_UNIT 8u
#define STAGE8(arr, at, v) arr[(at) / 8u] = v
#elif SMEM_VEC
shared uvec4 a_sh[BM * ROW / 8];
shared uvec4 b_sh[BN * ROW / 8];
#define SH_UNIT 8u
#define STAGE8(arr, at, v) arr[(at) / 8u] = v
#else
shared float16_t a_sh[BM * ROW];
shared float16_t b_sh[BN * ROW];
#define SH_UNIT 1u
#define STAGE8(arr, at, v)                      \
  {                                             \
    const f16vec2 h0 = unpackFloat2x16(v.x);    \
    const f16vec2 h1 = unpackFloat2x16(v.y);    \
    const f16vec2 h2 = unpackFloat2x16(v.z);    \
    const f16vec2 h3 = unpackFloat2x16(v.w);    \
    arr[(at) + 0] = h0.x; arr[(at) + 1] = h0.y; \
    arr[(at) + 2] = h1.x; arr[(at) + 3] = h1.y; \
    arr[(at) + 4] = h2.x; arr[(at) + 5] = h2.y; \
    arr[(at) + 6] = h3.x; arr[(at) + 7] = h3.y; \
  }
#endif

#if M_F16 && SMEM_VEC
#define EP_STORE(m, at) CM_STORE_ACC(m, smem, (at) / 4u, FN / 4u, false)
#define EP_READ4(i) uintBitsToFloat(smem[(i) / 4u])
#elif M_F16
shared float ep_sh[WP * WC * FM * FN];  // one fragment-sized patch per subgroup
#define EP_STORE(m, at) CM_STORE_ACC(m, ep_sh, at, FN, false)
#define EP_READ4(i) vec4(ep_sh[i], ep_sh[(i) + 1u], ep_sh[(i) + 2u], ep_sh[(i) + 3u])
#endif
#if M_F16
// The 8 patch floats at i .. i + 7 (i a multiple of 4), the upper 4 read first where
// `upper_first` (bank spread only: v is the same either way).
void ep_read8(uint i, bool upper_first, out float v[8]) {
  const vec4 f = EP_READ4(i + (upper_first ? 4u : 0u));
  const vec4 s = EP_READ4(i + (upper_first ? 0u : 4u));
  const vec4 lo = upper_first ? s : f, hi = upper_first ? f : s;
  v = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
}
#endif

uvec4 a_reg[A_LOADS], b_reg[B_LOADS];
uint m0, n0, xi, lk, lrow;

uvec4 load_v(uint f, uint at) {
#if FRAMES > 2
  if (f == 2u) return v2[at];
#endif
#if FRAMES > 1
  if (f == 1u) return v1[at];
#endif
  return v0[at];
}

// Registers ← the step of columns [k0, k0 + BK): A rows of frame k0 / C, B rows of U.
void fetch(uint k0) {
  const uint f = k0 / pc.c, kc = k0 - f * pc.c, cv = pc.c / 8u, kv = pc.k / 8u;
  [[unroll]] for (uint j = 0u; j < A_LOADS; ++j) {
    const uint r = lrow + j * (WG / KV), row = m0 + r;
    a_reg[j] = r < BM && row < pc.rows ? load_v(f, (xi * pc.rows + row) * cv + kc / 8u + lk) : uvec4(0u);
  }
  [[unroll]] for (uint j = 0u; j < B_LOADS; ++j) {
    const uint r = lrow + j * (WG / KV), o = n0 + r;
    b_reg[j] = r < BN && o < pc.co ? uv[(xi * pc.co + o) * kv + k0 / 8u + lk] : uvec4(0u);
  }
}

void stage() {
  [[unroll]] for (uint j = 0u; j < A_LOADS; ++j) {
    const uint r = lrow + j * (WG / KV);
    if (r < BM) STAGE8(a_sh, r * ROW + lk * 8u, a_reg[j]);
  }
  [[unroll]] for (uint j = 0u; j < B_LOADS; ++j) {
    const uint r = lrow + j * (WG / KV);
    if (r < BN) STAGE8(b_sh, B_OFF + r * ROW + lk * 8u, b_reg[j]);
  }
}

void main() {
  m0 = gl_WorkGroupID.x * BM;
  n0 = gl_WorkGroupID.y * BN;
  xi = gl_WorkGroupID.z;
  lk = gl_LocalInvocationIndex % KV;
  lrow = gl_LocalInvocationIndex / KV;
  const uint sg = gl_LocalInvocationIndex / CM_SG, sp = sg % WP, sc = sg / WP;
  CM_ACC acc[FP][FC];
  [[unroll]] for (uint i = 0u; i < FP; ++i)
    [[unroll]] for (uint j = 0u; j < FC; ++j) CM_FILL(acc[i][j], 0.0);
  fetch(0u);
  for (uint k0 = 0u; k0 < pc.k; k0 += BK) {
    barrier();  // everyone is done reading the previous step's tiles
    stage();
    barrier();
    if (k0 + BK < pc.k) fetch(k0 + BK);
    [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
      CM_A a[FP];
      CM_B b[FC];
      [[unroll]] for (uint i = 0u; i < FP; ++i)
        CM_LOAD_A(a[i], a_sh, (((sp * FP + i) * FM) * ROW + kk) / SH_UNIT, ROW / SH_UNIT, false);
      [[unroll]] for (uint j = 0u; j < FC; ++j)
        CM_LOAD_B(b[j], b_sh, (B_OFF + ((sc * FC + j) * FN) * ROW + kk) / SH_UNIT, ROW / SH_UNIT, true);
      [[unroll]] for (uint i = 0u; i < FP; ++i)
        [[unroll]] for (uint j = 0u; j < FC; ++j) CM_MAD(a[i], b[j], acc[i][j]);
    }
  }
#if M_F16
  // Lane l takes groups g = l + t·CM_SG of 8 channels (row g / (FN / 8)), so a
  // fragment's row of FN channels is FN / 8 neighbouring lanes' 16-byte stores. Natively
  // the patch is read 16 bytes at a time, the lanes of odd rows taking their upper half
  // first, so a quarter-subgroup's reads cover the 32 banks once (conv_gemm_coop.comp's
  // EP_VEC: scalar reads here are 8-way bank conflicts).
#if SMEM_VEC
  barrier();  // every subgroup is done with the staged tiles the patches overwrite
#endif
  const uint ep_at = sg * uint(FM * FN), lane = gl_SubgroupInvocationID;
  [[unroll]] for (uint i = 0u; i < FP; ++i) {
    const uint row = m0 + (sp * FP + i) * FM;
    [[unroll]] for (uint j = 0u; j < FC; ++j) {
      const uint col = n0 + (sc * FC + j) * FN;
      if (row >= pc.rows || col >= pc.co) continue;  // the same for the whole subgroup
      EP_STORE(acc[i][j], ep_at);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      [[unroll]] for (uint t = 0u; t < (FM * FN / 8 + CM_SG - 1) / CM_SG; ++t) {
        const uint g = lane + t * CM_SG, gr = g / (FN / 8), gc = g % (FN / 8);
        if (g < FM * FN / 8) {
          float v[8];
          ep_read8(ep_at + gr * FN + gc * 8u, (gr & 1u) != 0u, v);
          [[unroll]] for (uint e = 0u; e < 8u; ++e) v[e] = round_f16(v[e]);
          mh[((xi * pc.rows + row + gr) * pc.co + col + gc * 8u) / 8u] =
              uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])), packHalf2x16(vec2(v[4], v[5])),
                    packHalf2x16(vec2(v[6], v[7])));
        }
      }
      subgroupBarrier();  // the patch is free for the next fragment
    }
  }
#else
  [[unroll]] for (uint i = 0u; i < FP; ++i) {
    const uint row = m0 + (sp * FP + i) * FM;
    [[unroll]] for (uint j = 0u; j < FC; ++j) {
      const uint col = n0 + (sc * FC + j) * FN;
      if (row < pc.rows && col < pc.co) CM_STORE_ACC(acc[i][j], mv, (xi * pc.rows + row) * pc.co + col, pc.co, false);
    }
  }
#endif
}
