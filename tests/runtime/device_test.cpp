// Device discovery, selection policy, requirement checks and the device printout.
#include "runtime/device.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace strata::runtime {
namespace {

TEST(RuntimeDevice, EnumerationFindsLavapipeWithLimits) {
  Expected<std::vector<DeviceInfo>> devices = list_devices();
  ASSERT_TRUE(devices) << devices.message();
  auto lvp = std::find_if(devices->begin(), devices->end(),
                          [](const DeviceInfo& d) { return d.driver_name == "llvmpipe"; });
  ASSERT_NE(lvp, devices->end()) << describe_devices(*devices);
  EXPECT_EQ(lvp->type, DeviceType::cpu);
  EXPECT_TRUE(lvp->unusable_reason.empty()) << lvp->unusable_reason;
  // Subgroups are a power of two of at least 4 lanes (8 on an AVX2 host).
  EXPECT_GE(lvp->subgroup_size, 4u);
  EXPECT_EQ(lvp->subgroup_size & (lvp->subgroup_size - 1), 0u);
  EXPECT_GE(lvp->max_storage_buffer_range, 1u << 27);
  EXPECT_GE(lvp->max_compute_shared_memory_size, 16384u);
  EXPECT_GE(lvp->max_compute_workgroup_invocations, 128u);
  EXPECT_GT(lvp->max_compute_workgroup_count[0], 0u);
  EXPECT_GE(lvp->max_push_constants_size, 128u);
  EXPECT_FALSE(lvp->heaps.empty());
  EXPECT_FALSE(lvp->cooperative_matrix_nv);
  EXPECT_TRUE(lvp->subgroup_operations & subgroup_ops::basic);
  std::string key = identity_key(*lvp);
  EXPECT_EQ(key.rfind("10005:0000:", 0), 0u) << key;
  EXPECT_NE(key.find(lvp->driver_info), std::string::npos) << key;
  std::cout << describe_devices(*devices);
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
  d.shader_float16 = true;
  d.storage_buffer_16bit_access = true;
  d.cooperative_matrix_nv = true;
  d.cooperative_matrix_shapes = {CoopMatShape{16, 8, 16}, CoopMatShape{16, 16, 16}};
  std::string s = describe_devices(std::vector<DeviceInfo>{d}, 1u);
  EXPECT_NE(s.find("* device 1: NVIDIA H200 (discrete GPU)"), std::string::npos) << s;
  EXPECT_NE(s.find("maxStorageBufferRange: 4 GiB, shared memory: 48 KiB, subgroup size: 32"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("f16: yes, 16-bit storage: yes"), std::string::npos) << s;
  EXPECT_NE(s.find("cooperative matrix (NV): yes [16x8x16 f16*f16+f32->f32, "
                   "16x16x16 f16*f16+f32->f32]"),
            std::string::npos)
      << s;
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

TEST(RuntimeDevice, MissingFeatureIsNamed) {
  DeviceRequirements needs;
  needs.cooperative_matrix_nv = true;
  Expected<std::shared_ptr<Device>> dev = open_device(DeviceOptions{}, needs);
  ASSERT_FALSE(dev) << "the test device unexpectedly has VK_NV_cooperative_matrix";
  EXPECT_NE(dev.message().find("lacks VK_NV_cooperative_matrix, which the plan needs"),
            std::string::npos)
      << dev.message();
  EXPECT_NE(dev.message().find("device '"), std::string::npos) << dev.message();
}

TEST(RuntimeDevice, RequirementMessagesNameEveryGap) {
  DeviceInfo d = fake(0, DeviceType::cpu, "llvmpipe");
  d.subgroup_size = 8;
  d.max_storage_buffer_range = 1 << 27;
  d.max_compute_shared_memory_size = 32768;
  DeviceRequirements r;
  r.shader_float16 = true;
  r.cooperative_matrix_shapes = {CoopMatShape{16, 8, 16}};
  r.min_subgroup_size = 32;
  r.min_storage_buffer_range = 4ull << 30;
  Status s = check_requirements(d, r);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(),
            "device 'llvmpipe' lacks shaderFloat16, cooperative matrix shape "
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
