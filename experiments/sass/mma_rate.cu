// How many HMMA.16816 (f16 -> f32) per clock does one Hopper SM sustain with W warps,
// each holding NACC independent accumulators in registers (no memory traffic)? This
// is the ceiling the Vulkan cooperative-matrix kernels compile to (their SASS is
// HMMA.16816.F32 fed by LDSM), measured against warps per SM. Experiment only.
// nvcc -O3 -arch=sm_90 mma_rate.cu -o mma_rate && ./mma_rate
#include <cstdio>
#include <cuda_runtime.h>

template <int NACC>
__global__ void mma_loop(float* out, int iters) {
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * (i + 1));
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * (i + 7));
  float acc[NACC][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < NACC; ++j)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
          : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float s = 0;
  for (int j = 0; j < NACC; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int NACC>
void run(int warps, int sms) {
  int iters = 4096 / NACC * 16;
  float* out;
  cudaMalloc(&out, sms * warps * 32 * sizeof(float));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  mma_loop<NACC><<<sms, warps * 32>>>(out, iters);
  cudaEventRecord(e0);
  for (int r = 0; r < 5; ++r) mma_loop<NACC><<<sms, warps * 32>>>(out, iters);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms; cudaEventElapsedTime(&ms, e0, e1);
  double flop = 5.0 * sms * warps * (double)iters * NACC * 16 * 8 * 16 * 2;
  printf("NACC %2d warps/SM %2d: %7.1f TFLOP/s (%s)\n", NACC, warps, flop / ms / 1e9,
         cudaGetErrorString(cudaGetLastError()));
  cudaFree(out);
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (int w : {1, 2, 4, 6, 8, 12, 16}) run<32>(w, sms);
  for (int w : {4, 8}) run<8>(w, sms);
  for (int w : {4, 8}) run<16>(w, sms);
  return 0;
}
