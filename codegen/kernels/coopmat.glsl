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
// (docs/PERFORMANCE.md, issue 15, session 8). CM_LOAD_A / CM_LOAD_B load A and B
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

#elif COOPMAT == 2
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
  for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) c.e[cm_t_] = float(v)
// A fragment of `cols` columns (16 for A, CM_N for B); CM_LOAD is the 16×16 case.
#define CM_LOAD_COLS_(m, arr, off, stride, cm, cols)                                   \
  for (uint cm_i_ = 0u; cm_i_ < uint(m.e.length()); ++cm_i_)                          \
  m.e[cm_i_] = float16_t(arr[CM_AT_(off, stride, cm, cm_i_ / (cols), cm_i_ % (cols))])
#define CM_LOAD(m, arr, off, stride, cm) CM_LOAD_COLS_(m, arr, off, stride, cm, 16u)
#define CM_LOAD_A(m, arr, off, stride, cm) CM_LOAD_COLS_(m, arr, off, stride, cm, 16u)
#define CM_LOAD_B(m, arr, off, stride, cm) CM_LOAD_COLS_(m, arr, off, stride, cm, uint(CM_N))
// Lane i owns accumulator elements e ≡ i (mod CM_SG), e = row·CM_N + column.
#define CM_LOAD_ACC(c, arr, off, stride, cm)                                            \
  for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) {                                    \
    const uint cm_e_ = gl_SubgroupInvocationID + cm_t_ * CM_SG;                         \
    c.e[cm_t_] = float(arr[CM_AT_(off, stride, cm, cm_e_ / uint(CM_N), cm_e_ % uint(CM_N))]); \
  }
#define CM_STORE_ACC(c, arr, off, stride, cm)                                   \
  for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) {                            \
    const uint cm_e_ = gl_SubgroupInvocationID + cm_t_ * CM_SG;                 \
    arr[CM_AT_(off, stride, cm, cm_e_ / uint(CM_N), cm_e_ % uint(CM_N))] = c.e[cm_t_]; \
  }
#define CM_MAD(a, b, c)                                                          \
  for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) {                             \
    const uint cm_e_ = gl_SubgroupInvocationID + cm_t_ * CM_SG;                  \
    const uint cm_r_ = cm_e_ / uint(CM_N), cm_c_ = cm_e_ % uint(CM_N);           \
    float cm_s_ = c.e[cm_t_];                                                    \
    for (uint cm_k_ = 0u; cm_k_ < 16u; ++cm_k_)                                  \
      cm_s_ = fma(float(a.e[cm_r_ * 16u + cm_k_]), float(b.e[cm_k_ * uint(CM_N) + cm_c_]), cm_s_); \
    c.e[cm_t_] = cm_s_;                                                          \
  }
#define CM_SCALE(c, s)                                    \
  for (uint cm_t_ = 0u; cm_t_ < CM_OWNED; ++cm_t_) c.e[cm_t_] *= float(s)
#define CM_ACC_LENGTH(c) int(CM_OWNED)
#define CM_ACC_AT(c, i) (c).e[i]

#else
#error "coopmat.glsl: COOPMAT must be 1 (GL_NV_cooperative_matrix) or 2 (emulated)"
#endif
