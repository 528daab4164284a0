// make_target: every option that follows from the device, derived in one place.
#include "compile/target.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

runtime::DeviceInfo device(bool f16, bool tensor_cores) {
  runtime::DeviceInfo d;
  d.name = "test gpu";
  d.shader_float16 = f16;
  d.storage_buffer_16bit_access = f16;
  d.max_storage_buffer_range = 1ull << 30;
  d.heaps = {runtime::MemoryHeap{8ull << 30, true}, runtime::MemoryHeap{64ull << 30, false},
             runtime::MemoryHeap{16ull << 30, true}};
  if (tensor_cores) {
    d.cooperative_matrix_nv = true;
    d.vulkan_memory_model = true;
    d.cooperative_matrix_shapes = {codegen::kCoopShape16};
  }
  return d;
}

// The channel tile follows the kernels that will run: 32 for f16 on tensor cores (the
// coop conv's input-channel step; Qwen-Image's 96 channels stay 96), 64 otherwise.
TEST(Target, KernelsAndChannelTileFollowTheDeviceAndPrecision) {
  auto tc = make_target(device(true, true));
  ASSERT_TRUE(tc) << tc.message();
  EXPECT_EQ(tc->precision, Precision::f16);
  EXPECT_EQ(tc->codegen.tensor_cores, codegen::TensorCores::nv_coopmat);
  EXPECT_EQ(tc->channel_tile, 32);

  auto portable = make_target(device(true, true), {.portable_kernels = true});
  ASSERT_TRUE(portable);
  EXPECT_EQ(portable->codegen.tensor_cores, codegen::TensorCores::none);
  EXPECT_EQ(portable->channel_tile, 64);

  auto f32 = make_target(device(true, true), {.precision = Precision::f32});
  ASSERT_TRUE(f32);
  EXPECT_EQ(f32->codegen.tensor_cores, codegen::TensorCores::none);
  EXPECT_EQ(f32->channel_tile, 64);

  auto plain = make_target(device(false, false));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->precision, Precision::f32) << "no shaderFloat16: f32 by default";
  EXPECT_EQ(plain->channel_tile, 64);
}

// The GEMM wave (passes/attention_gemms.cpp sizes chunks to it): two workgroups of the
// tensor-core tile per multiprocessor, only where both are known.
TEST(Target, GemmWaveNeedsTensorCoresAndMultiprocessors) {
  runtime::DeviceInfo d = device(true, true);
  d.multiprocessors = 132;
  auto tc = make_target(d);
  ASSERT_TRUE(tc) << tc.message();
  EXPECT_EQ(tc->gemm_wave_workgroups, 264u);
  auto portable = make_target(d, {.portable_kernels = true});
  ASSERT_TRUE(portable);
  EXPECT_EQ(portable->gemm_wave_workgroups, 0u);
  auto unknown = make_target(device(true, true));
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->gemm_wave_workgroups, 0u);
}

TEST(Target, BindingLimitAndBudget) {
  auto t = make_target(device(true, false));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->binding_limit, 1ull << 30);
  EXPECT_EQ(t->codegen.max_storage_buffer_range, 1ull << 30);
  EXPECT_EQ(t->memory_budget, 16ull << 30) << "the largest device-local heap";
  auto lower = make_target(device(true, false), {.binding_limit = 1 << 20, .memory_budget = 1ull << 30});
  ASSERT_TRUE(lower);
  EXPECT_EQ(lower->binding_limit, 1u << 20);
  EXPECT_EQ(lower->codegen.max_storage_buffer_range, 1u << 20) << "codegen checks the limit the passes banded for";
  EXPECT_EQ(lower->memory_budget, 1ull << 30);
  auto higher = make_target(device(true, false), {.binding_limit = 1ull << 40});
  ASSERT_TRUE(higher);
  EXPECT_EQ(higher->binding_limit, 1ull << 30) << "never above the device's range";
}

TEST(Target, ImpossibleChoicesAreErrors) {
  auto f16 = make_target(device(false, false), {.precision = Precision::f16});
  ASSERT_FALSE(f16);
  EXPECT_EQ(f16.message(), "precision f16: device 'test gpu' lacks shaderFloat16 or storageBuffer16BitAccess");
  auto zero = make_target(device(true, false), {.binding_limit = 0});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.message(), "a binding limit of 0 bytes");
}

}  // namespace
}  // namespace strata
