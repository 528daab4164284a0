// The conv/GEMM kernel's inner loop without its staging, in CUDA: per step a warp
// loads 16 ldmatrix.x4 fragments (A: 2 of 32 rows x 2 k-halves; B: 2 x ... as the
// Vulkan kernel's SASS does: 4 A fragments of 16x16 and 8 B fragments of 16x8 per
// k16, k 32 per step) from shared memory and issues 64 mma.sync m16n8k16 into a
// 64 x 64 f32 accumulator tile. Question: is 490 TFLOP/s (the Vulkan kernel with its
// staging removed) what LDSM + HMMA at this warp tile give, or the driver's schedule?
// Modes: 0 = fragments from registers only, 1 = ldmatrix every step (Vulkan's order:
// all loads, then all MMAs), 2 = ldmatrix for k-half 1 issued between k-half 0's MMAs.
// nvcc -O3 -arch=sm_90 mma_ldsm.cu -o mma_ldsm && ./mma_ldsm
#include <cstdio>
#include <cuda_runtime.h>

__device__ __forceinline__ void ldsm4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int MODE>
__global__ void __launch_bounds__(128, 2) loop(float* out, int steps) {
  __shared__ __align__(16) unsigned short sh[2 * 128 * 40];  // A and B tiles, rows of 40 halves
  for (int i = threadIdx.x; i < 2 * 128 * 40; i += blockDim.x) sh[i] = (unsigned short)(0x3c00 ^ (i & 0x3ff));
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wp = warp % 2, wc = warp / 2;
  const unsigned base = (unsigned)__cvta_generic_to_shared(sh);
  // lane's row address for an x4 load of 4 8x8 matrices: rows lane%16, k offset (lane/16)*8
  const unsigned a_addr = base + ((wp * 64 + (lane % 16)) * 40 + (lane / 16) * 8) * 2;
  const unsigned b_addr = base + (128 * 40 + (wc * 64 + (lane % 16)) * 40 + (lane / 16) * 8) * 2;
  float acc[4][8][4] = {};
  unsigned a[2][4][4], b[2][4][4];
  if (MODE == 0)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 4; ++i) { ldsm4(a[h][i], a_addr + (i * 16 * 40 + h * 16) * 2); ldsm4(b[h][i], b_addr + (i * 16 * 40 + h * 16) * 2); }
  for (int s = 0; s < steps; ++s) {
    if (MODE == 1)
      for (int h = 0; h < 2; ++h)
        for (int i = 0; i < 4; ++i) { ldsm4(a[h][i], a_addr + (i * 16 * 40 + h * 16) * 2); ldsm4(b[h][i], b_addr + (i * 16 * 40 + h * 16) * 2); }
    if (MODE == 2)
      for (int i = 0; i < 4; ++i) { ldsm4(a[0][i], a_addr + (i * 16 * 40) * 2); ldsm4(b[0][i], b_addr + (i * 16 * 40) * 2); }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (MODE == 2 && h == 0)
        for (int i = 0; i < 4; ++i) { ldsm4(a[1][i], a_addr + (i * 16 * 40 + 16) * 2); ldsm4(b[1][i], b_addr + (i * 16 * 40 + 16) * 2); }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) mma(acc[i][j], a[h][i], b[h][j / 2][(j % 2)], b[h][j / 2][2 + (j % 2)]);
    }
  }
  float s = 0;
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 8; ++j) for (int e = 0; e < 4; ++e) s += acc[i][j][e];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int MODE>
void run(int per_sm, int sms) {
  const int steps = 4096, blocks = sms * per_sm;
  float* out;
  cudaMalloc(&out, blocks * 128 * sizeof(float));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  loop<MODE><<<blocks, 128>>>(out, steps);
  cudaEventRecord(e0);
  for (int r = 0; r < 5; ++r) loop<MODE><<<blocks, 128>>>(out, steps);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  const double flop = 5.0 * blocks * 4 * (double)steps * 64 * 16 * 8 * 16 * 2;
  printf("mode %d, %d blocks of 4 warps per SM: %7.1f TFLOP/s (%s)\n", MODE, per_sm, flop / ms / 1e9,
         cudaGetErrorString(cudaGetLastError()));
  cudaFree(out);
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (int per_sm : {1, 2}) { run<0>(per_sm, sms); run<1>(per_sm, sms); run<2>(per_sm, sms); }
  return 0;
}
