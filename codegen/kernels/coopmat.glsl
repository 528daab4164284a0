// coopmat.glsl: 16×16×16 cooperative-matrix operations for the tensor-core kernels,
// behind macros with two implementations, chosen by the COOPMAT define:
//
//   COOPMAT = 1  GL_NV_cooperative_matrix (f16 A and B, f32 accumulator, subgroup
//                scope). The device must offer the 16x16x16 f16*f16+f32->f32 shape,
//                vulkanMemoryModel, shaderFloat16 and storageBuffer16BitAccess.
//   COOPMAT = 2  an emulation in plain GLSL, so the same kernels run on a device
//                without cooperative matrices (lavapipe in CI): what it checks is the
//                kernels' tiling, indexing, staging and epilogues; it is slow and only
//                tests use it. A and B matrices are whole f16 copies in every
//                lane; lane i of the subgroup owns accumulator elements e ≡ i
//                (mod CM_SG), e = row·CM_N + column, and stores only those.
//
// Fragment sizes: A is CM_M×16, B 16×CM_N, the accumulator CM_M×CM_N (CM_M, CM_N
// multiples of 16, default 16). GL_NV_cooperative_matrix's GLSL takes any size, but
// NVIDIA's VK_NV_cooperative_matrix offers 16×16 only: kernels with larger fragments
// are compiled in that syntax and their SPIR-V rewritten to VK_KHR_cooperative_matrix
// (codegen/spirv_khr_rewrite.h), whose flexible dimensions (VK_NV_cooperative_matrix2)
// take them. On the H200 32×32 fragments run a staged GEMM 1.58× faster than 16×16
// (benchmarks/gemm_probe). CM_LOAD_A / CM_LOAD_B load A and B
// fragments of those sizes; CM_LOAD is for 16×16 A or B fragments (CM_M = CM_N = 16).
//
// Both need CM_SG = the subgroup size (compile-time; the lowering passes the target's).
// Like the native operations, every macro must be reached by the whole subgroup with
// the same arguments. Loads and stores take an array (shared or buffer) of scalar
// elements, an element offset and a stride in elements between rows (colmajor false)
// or columns (colmajor true), as coopMatLoadNV / coopMatStoreNV do.
//
//   CM_A a; CM_B b; CM_ACC c;          matrix types (A: CM_M×16, B: 16×CM_N, C: CM_M×CM_N)
//   CM_FILL(c, v)                      c = v everywhere
//   CM_LOAD(m, arr, off, stride, cm)   A or B (16×16) from f16 (or f32) elements
//   CM_LOAD_A(m, ...), CM_LOAD_B(m, ...)  A or B of any fragment size, likewise
//   CM_LOAD_ACC(c, arr, off, stride, cm)
//   CM_STORE_ACC(c, arr, off, stride, cm)   f32 elements
//   CM_MAD(a, b, c)                    c = a·b + c (f32 accumulation)
//   CM_SCALE(c, s)                     c = c · s
//   CM_ACC_LENGTH(c), CM_ACC_AT(c, i)  the accumulator elements this lane holds; which
//                                      (row, column) each is, is not specified: learn it
//                                      by loading a matrix of row (or column) numbers
//                                      with CM_LOAD_ACC and reading the same elements
//   CM_A_AT(a, j)                      element j of an A fragment this lane holds (native)
//
// Where the elements lie, for kernels that work on accumulators in registers
// (attention_coop_rows.comp's REG_SOFTMAX); an accumulator of CM_M × CM_N, CM_ELEMS_ACC
// elements per lane (some past CM_ACC_LENGTH natively):
//   CM_RSLOTS             rows of the accumulator this lane holds elements of
//   CM_SLOT(i)            which of them element i lies in (a constant for a constant i)
//   CM_SLOT_ROW(s)        that row's number
//   CM_COL(i)             element i's column
//   CM_ROW_LANES          the lanes holding a row are lane ^ x for x < CM_ROW_LANES
//   CM_ACC_TO_A(a, c, t)  a (CM_M × 16, f16) = columns 16t .. 16t + 15 of c, converted
// Natively this is NVIDIA's layout as probed on the H200 (
// 32 × 32 and 32 × 16 fragments through the KHR rewrite): lane L holds rows L/4 + 8s and
// columns 8g + 2(L % 4) + b, element i = s·(CM_N/4) + 2g + b; an A fragment the same
// with 16 columns, so its element j is accumulator element (j/4)·(CM_N/4) + 4t + j%4 of
// the same lane: no data moves. Nothing in the extensions promises it; a kernel that
// relies on it checks it once (REG_SOFTMAX's layout check) and fails loudly otherwise.
// The emulation: lane L holds elements e = L + i·CM_SG (CM_N % CM_SG == 0: every lane
// holds every row), and A is a shuffle away.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

#ifndef CM_SG
#error "coopmat.glsl: define CM_SG (the subgroup size)"
#endif
#ifndef CM_M
#define CM_M 16
#endif
#ifndef CM_N
#define CM_N 16
#endif
#if (CM_M % 16) != 0 || (CM_N % 16) != 0
#error "coopmat.glsl: CM_M and CM_N must be multiples of 16"
#endif

#if COOPMAT == 1
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require

#define CM_A fcoopmatNV<16, gl_ScopeSubgroup, CM_M, 16>
#define CM_B fcoopmatNV<16, gl_ScopeSubgroup, 16, CM_N>
#define CM_ACC fcoopmatNV<32, gl_ScopeSubgroup, CM_M, CM_N>
#define CM_FILL(c, v) c = CM_ACC(v)
#define CM_LOAD(m, arr, off, stride, cm) coopMatLoadNV(m, arr, off, stride, cm)
#define CM_LOAD_A(m, arr, off, stride, cm) coopMatLoadNV(m, arr, off, stride, cm)
#define CM_LOAD_B(m, arr, off, stride, cm) coopMatLoadNV(m, arr, off, stride, cm)
#define CM_LOAD_ACC(c, arr, off, stride, cm) coopMatLoadNV(c, arr, off, stride, cm)
#define CM_STORE_ACC(c, arr, off, stride, cm) coopMatStoreNV(c, arr, off, stride, cm)
#define CM_MAD(a, b, c) c = coopMatMulAddNV(a, b, c)
#define CM_SCALE(c, s) c = c * float(s)
#define CM_ACC_LENGTH(c) (c).length()
#define CM_ACC_AT(c, i) (c)[i]
#define CM_A_AT(a, j) (a)[j]
#define CM_ELEMS_ACC (CM_M * CM_N / CM_SG)
#define CM_ELEMS_A (CM_M * 16 / CM_SG)
#define CM_RSLOTS (CM_M / 8)
#define CM_SLOT(i) ((i) / (CM_N / 4))
#define CM_SLOT_ROW(s) ((gl_SubgroupInvocationID >> 2u) + 8u * uint(s))
#define CM_COL(i) (8u * (uint((i) % (CM_N / 4)) >> 1u) + 2u * (gl_SubgroupInvocationID & 3u) + (uint(i) & 1u))
#define CM_ROW_LANES 4u
#define CM_ACC_TO_A(a, c, t)                                             \
  [[unroll]] for (int cm_j_ = 0; cm_j_ < CM_ELEMS_A; ++cm_j_)            \
    if (cm_j_ < (a).length())                                            \
      (a)[cm_j_] = float16_t((c)[(cm_j_ >> 2) * (CM_N / 4) + 4 * int(t) + (cm_j_ & 3)])

#elif COOPMAT == 2
// The emulation's loops over a fragment's elements are [[dont_unroll]]: unrolled by
// Mesa's NIR, every CM_MAD became thousands of instructions and llvmpipe spent most of a
// test's time compiling them (CodegenConvGemmCoop.EpilogueLoadsAheadGiveTheSameBytes
// 80 → 10 s, ImageWinograd's decode 81 → 29 s on 2 cores, empty caches). CM_MAD's inner loop
// over k stays free to unroll:
// kept as a loop, lavapipe with GALLIVM_PERF=nopt (the codegen tests') computed inf in
// CodegenAttentionCoop.RowsRegisterSoftmaxMatchesInterpreter, where LLVM's optimised
// build of the same SPIR-V is right — a driver fault not chased further.
#extension GL_EXT_control_flow_attributes : enable
#define CM_OWNED (CM_M * CM_N / CM_SG)  // accumulator elements per lane
struct CmA { float16_t e[CM_M * 16]; };
struct CmB { float16_t e[16 * CM_N]; };
struct CmAcc { float e[CM_OWNED]; };
#define CM_A CmA
#define CM_B CmB
#define CM_ACC CmAcc
// Element (r, c) of a matrix at offset `off` with the given stride / major order.
#define CM_AT_(off, stride, cm, r, c) ((off) + ((cm) ? (c) * (stride) + (r) : (r) * (stride) + (c)))
#define CM_FILL(c, v)                                     \
  [[dont_unroll]] for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) c.e[cm_t_] = float(v)
// A fragment of `cols` columns (16 for A, CM_N for B); CM_LOAD is the 16×16 case.
#define CM_LOAD_COLS_(m, arr, off, stride, cm, cols)                                   \
  [[dont_unroll]] for (uint cm_i_ = 0u; cm_i_ < uint(m.e.length()); ++cm_i_)            \
  m.e[cm_i_] = float16_t(arr[CM_AT_(off, stride, cm, cm_i_ / (cols), cm_i_ % (cols))])
#define CM_LOAD(m, arr, off, stride, cm) CM_LOAD_COLS_(m, arr, off, stride, cm, 16u)
#define CM_LOAD_A(m, arr, off, stride, cm) CM_LOAD_COLS_(m, arr, off, stride, cm, 16u)
#define CM_LOAD_B(m, arr, off, stride, cm) CM_LOAD_COLS_(m, arr, off, stride, cm, uint(CM_N))
// Lane i owns accumulator elements e ≡ i (mod CM_SG), e = row·CM_N + column.
#define CM_LOAD_ACC(c, arr, off, stride, cm)                                            \
  [[dont_unroll]] for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) {                    \
    const uint cm_e_ = gl_SubgroupInvocationID + cm_t_ * CM_SG;                         \
    c.e[cm_t_] = float(arr[CM_AT_(off, stride, cm, cm_e_ / uint(CM_N), cm_e_ % uint(CM_N))]); \
  }
#define CM_STORE_ACC(c, arr, off, stride, cm)                                   \
  [[dont_unroll]] for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) {                    \
    const uint cm_e_ = gl_SubgroupInvocationID + cm_t_ * CM_SG;                 \
    arr[CM_AT_(off, stride, cm, cm_e_ / uint(CM_N), cm_e_ % uint(CM_N))] = c.e[cm_t_]; \
  }
#define CM_MAD(a, b, c)                                                          \
  [[dont_unroll]] for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) {                    \
    const uint cm_e_ = gl_SubgroupInvocationID + cm_t_ * CM_SG;                  \
    const uint cm_r_ = cm_e_ / uint(CM_N), cm_c_ = cm_e_ % uint(CM_N);           \
    float cm_s_ = c.e[cm_t_];                                                    \
    for (uint cm_k_ = 0u; cm_k_ < 16u; ++cm_k_)                                  \
      cm_s_ = fma(float(a.e[cm_r_ * 16u + cm_k_]), float(b.e[cm_k_ * uint(CM_N) + cm_c_]), cm_s_); \
    c.e[cm_t_] = cm_s_;                                                          \
  }
#define CM_SCALE(c, s)                                    \
  [[dont_unroll]] for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) c.e[cm_t_] *= float(s)
#define CM_ACC_LENGTH(c) int(CM_OWNED)
#define CM_ACC_AT(c, i) (c).e[i]
#define CM_ELEMS_ACC CM_OWNED
#define CM_RSLOTS CM_M
#define CM_SLOT(i) ((i) / (CM_N / CM_SG))
#define CM_SLOT_ROW(s) uint(s)
#define CM_COL(i) ((gl_SubgroupInvocationID + uint(i) * CM_SG) % uint(CM_N))
#define CM_ROW_LANES uint(CM_SG)
// Needs subgroup shuffles (GL_KHR_shader_subgroup_shuffle) where used.
#define CM_ACC_TO_A(a, c, t)                                                              \
  [[dont_unroll]] for (uint cm_e_ = 0u; cm_e_ < CM_M * 16u; ++cm_e_) {                  \
    const uint cm_s_ = (cm_e_ / 16u) * uint(CM_N) + 16u * uint(t) + cm_e_ % 16u;          \
    (a).e[cm_e_] = float16_t(subgroupShuffle((c).e[cm_s_ / CM_SG], cm_s_ % CM_SG));       \
  }

#else
#error "coopmat.glsl: COOPMAT must be 1 (GL_NV_cooperative_matrix) or 2 (emulated)"
#endif
