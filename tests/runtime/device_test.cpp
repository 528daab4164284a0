// Device discovery, selection policy, requirement checks and the device printout.
#include "runtime/device.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace strata::runtime {
namespace {

// Every usable device reports the limits kernels are sized against.
TEST(RuntimeDevice, EnumerationReportsLimits) {
  Expected<std::vector<DeviceInfo>> devices = list_devices();
  ASSERT_TRUE(devices) << devices.message();
  ASSERT_FALSE(devices->empty());
  std::cout << describe_devices(*devices);
  for (const DeviceInfo& d : *devices) {
    if (!d.unusable_reason.empty()) continue;
    SCOPED_TRACE(d.name);
    // Subgroups are a power of two of at least 4 lanes (8 on lavapipe, 32 on NVIDIA).
    EXPECT_GE(d.subgroup_size, 4u);
    EXPECT_EQ(d.subgroup_size & (d.subgroup_size - 1), 0u);
    EXPECT_GE(d.max_storage_buffer_range, 1u << 27);
    EXPECT_GE(d.max_compute_shared_memory_size, 16384u);
    EXPECT_GE(d.max_compute_workgroup_invocations, 128u);
    EXPECT_GT(d.max_compute_workgroup_count[0], 0u);
    EXPECT_GE(d.max_push_constants_size, 128u);
    EXPECT_FALSE(d.heaps.empty());
    EXPECT_TRUE(d.subgroup_operations & subgroup_ops::basic);
    EXPECT_FALSE(d.driver_name.empty());
    std::string key = identity_key(d);
    EXPECT_NE(key.find(d.driver_info), std::string::npos) << key;
  }
}

// CI and developer machines test on lavapipe; the GPU machine has none (skipped).
TEST(RuntimeDevice, EnumerationFindsLavapipe) {
  Expected<std::vector<DeviceInfo>> devices = list_devices();
  ASSERT_TRUE(devices) << devices.message();
  auto lvp = std::find_if(devices->begin(), devices->end(),
                          [](const DeviceInfo& d) { return d.driver_name == "llvmpipe"; });
  if (lvp == devices->end()) GTEST_SKIP() << "no lavapipe here:\n" << describe_devices(*devices);
  EXPECT_EQ(lvp->type, DeviceType::cpu);
  EXPECT_TRUE(lvp->unusable_reason.empty()) << lvp->unusable_reason;
  EXPECT_EQ(lvp->subgroup_size, 8u);  // 256-bit LLVM vectors of f32
  EXPECT_EQ(lvp->max_storage_buffer_range, 1u << 27);
  EXPECT_TRUE(lvp->shader_float16);
  EXPECT_TRUE(lvp->storage_buffer_16bit_access);
  EXPECT_FALSE(lvp->cooperative_matrix_nv);
  EXPECT_EQ(identity_key(*lvp).rfind("10005:0000:", 0), 0u) << identity_key(*lvp);
}

TEST(RuntimeDevice, DescribeListsTheFeaturesThatMatter) {
  DeviceInfo d;
  d.index = 1;
  d.name = "NVIDIA H200";
  d.type = DeviceType::discrete_gpu;
  d.driver_name = "NVIDIA";
  d.max_storage_buffer_range = 4ull << 30;
  d.max_compute_shared_memory_size = 48 << 10;
  d.subgroup_size = 32;
  d.multiprocessors = 132;
  d.shader_float16 = true;
  d.storage_buffer_16bit_access = true;
  d.f16_rounding_rte = true;
  d.f16_denorm_preserve = true;
  d.cooperative_matrix_nv = true;
  d.cooperative_matrix_shapes = {CoopMatShape{16, 8, 16}, CoopMatShape{16, 16, 16}};
  d.cooperative_matrix_khr = true;
  d.cooperative_matrix_khr_shapes = {
      CoopMatShape{16, 16, 32, CoopType::s8, CoopType::s8, CoopType::s32, CoopType::s32}};
  std::string s = describe_devices(std::vector<DeviceInfo>{d}, 1u);
  EXPECT_NE(s.find("* device 1: NVIDIA H200 (discrete GPU)"), std::string::npos) << s;
  EXPECT_NE(s.find("maxStorageBufferRange: 4 GiB, shared memory: 48 KiB, subgroup size: 32, multiprocessors: 132"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("f16: yes (round-to-nearest-even conversions: yes, denormals kept: yes), 16-bit storage: yes"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("cooperative matrix (NV): yes [16x8x16 f16*f16+f32->f32, "
                   "16x16x16 f16*f16+f32->f32]"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("cooperative matrix (KHR): yes [16x16x32 s8*s8+s32->s32]"), std::string::npos) << s;
}

DeviceInfo fake(uint32_t index, DeviceType type, std::string name) {
  DeviceInfo d;
  d.index = index;
  d.type = type;
  d.name = std::move(name);
  return d;
}

TEST(RuntimeDevice, SelectionPrefersDiscreteThenIntegratedAndLavapipeLast) {
  std::vector<DeviceInfo> ds = {fake(0, DeviceType::cpu, "llvmpipe"),
                                fake(1, DeviceType::integrated_gpu, "igpu"),
                                fake(2, DeviceType::discrete_gpu, "dgpu"),
                                fake(3, DeviceType::virtual_gpu, "vgpu")};
  EXPECT_EQ(*select_device(ds, {}), 2u);
  ds[2].unusable_reason = "Vulkan 1.1 (strata needs 1.2)";
  EXPECT_EQ(*select_device(ds, {}), 1u);
  ds.erase(ds.begin() + 1);  // igpu gone: virtual before CPU
  ds[1].index = 1, ds[2].index = 2;
  EXPECT_EQ(*select_device(ds, {}), 2u);
  EXPECT_EQ(*select_device(std::vector<DeviceInfo>{fake(0, DeviceType::cpu, "llvmpipe")}, {}), 0u);
}

TEST(RuntimeDevice, ExplicitIndexOverridesAndIsChecked) {
  std::vector<DeviceInfo> ds = {fake(0, DeviceType::discrete_gpu, "dgpu"),
                                fake(1, DeviceType::cpu, "llvmpipe")};
  EXPECT_EQ(*select_device(ds, DeviceOptions{.index = 1}), 1u);
  Expected<uint32_t> bad = select_device(ds, DeviceOptions{.index = 5});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("device index 5 out of range"), std::string::npos) << bad.message();
  EXPECT_FALSE(select_device(ds, DeviceOptions{.index = -1}));
  ds[0].unusable_reason = "no compute queue";
  Expected<uint32_t> unusable = select_device(ds, DeviceOptions{.index = 0});
  ASSERT_FALSE(unusable);
  EXPECT_NE(unusable.message().find("no compute queue"), std::string::npos);
  Expected<uint32_t> none = select_device(std::vector<DeviceInfo>{}, {});
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("no Vulkan devices"), std::string::npos);
}

// Lavapipe lacks cooperative matrices altogether; no device has a 7x7x7 f64 shape.
TEST(RuntimeDevice, MissingFeatureIsNamed) {
  DeviceRequirements needs;
  needs.cooperative_matrix_nv = true;
  needs.cooperative_matrix_shapes = {CoopMatShape{7, 7, 7, CoopType::f64, CoopType::f64,
                                                  CoopType::f64, CoopType::f64}};
  Expected<std::shared_ptr<Device>> dev = open_device(DeviceOptions{}, needs);
  ASSERT_FALSE(dev);
  EXPECT_NE(dev.message().find("cooperative matrix shape 7x7x7 f64*f64+f64->f64, which the plan needs"),
            std::string::npos)
      << dev.message();
  Expected<std::vector<DeviceInfo>> devices = list_devices();
  ASSERT_TRUE(devices);
  uint32_t chosen = *select_device(*devices, {});
  if (!(*devices)[chosen].cooperative_matrix_nv) {
    EXPECT_NE(dev.message().find("device '" + (*devices)[chosen].name +
                                 "' lacks VK_NV_cooperative_matrix, "),
              std::string::npos)
        << dev.message();
  }
}

TEST(RuntimeDevice, RequirementMessagesNameEveryGap) {
  DeviceInfo d = fake(0, DeviceType::cpu, "llvmpipe");
  d.subgroup_size = 8;
  d.max_storage_buffer_range = 1 << 27;
  d.max_compute_shared_memory_size = 32768;
  DeviceRequirements r;
  r.shader_float16 = true;
  r.f16_rounding_rte = true;
  r.f16_denorm_preserve = true;
  r.cooperative_matrix_shapes = {CoopMatShape{16, 8, 16}};
  r.min_subgroup_size = 32;
  r.min_storage_buffer_range = 4ull << 30;
  Status s = check_requirements(d, r);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(),
            "device 'llvmpipe' lacks shaderFloat16, shaderRoundingModeRTEFloat16, shaderDenormPreserveFloat16, "
            "cooperative matrix shape "
            "16x8x16 f16*f16+f32->f32, which the plan needs; has subgroup size 8 (the plan "
            "needs at least 32), maxStorageBufferRange 134217728 (the plan needs 4294967296)");
  d.shader_float16 = true;
  DeviceRequirements f16;
  f16.shader_float16 = true;
  EXPECT_TRUE(check_requirements(d, f16).is_ok());
}

TEST(RuntimeDevice, OpensWithRequestedFeatures) {
  DeviceRequirements needs;
  needs.shader_float16 = true;
  needs.storage_buffer_16bit_access = true;
  std::shared_ptr<Device> dev = testing::open_test_device(needs);
  ASSERT_TRUE(dev);
  EXPECT_TRUE(dev->enabled().shader_float16);
  EXPECT_TRUE(dev->enabled().storage_buffer_16bit_access);
  EXPECT_FALSE(dev->enabled().cooperative_matrix_nv);
  EXPECT_NE(dev->queue(), VK_NULL_HANDLE);
}

}  // namespace
}  // namespace strata::runtime
