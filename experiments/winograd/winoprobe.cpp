// Experiment: a causal 3×3×3 video conv (one output frame from F input frames, C → Co
// channels, H × W, zero padding 1 in H and W) as Winograd F(2×2, 3×3): an input
// transform (wino_input.comp), 16 GEMMs [tiles × F·C] · [F·C × Co] in one batched
// dispatch (wino_gemm.comp, or gemm_scalar.comp where there are no cooperative
// matrices) and an output transform (wino_output.comp). Times each part, checks sampled
// outputs against a direct conv in double from the same f16 inputs and weights, and
// optionally times the direct conv the way the conv kernel stages it
// (coopmat2/gemm_staged.comp -DCONV=2 -DIMW=W, one dispatch per temporal tap).
//   winoprobe DIR C Co H W F R GEMM.spv BM BN [DIRECT.spv]
// DIR holds wino_input.spv and wino_output.spv. Build: g++ -O2 -std=c++20 winoprobe.cpp -lvulkan
#include <vulkan/vulkan.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#define CHECK(x)                                                                  \
  do {                                                                            \
    VkResult r_ = (x);                                                            \
    if (r_ != VK_SUCCESS) {                                                       \
      std::printf("FAILED %s: %d (line %d)\n", #x, int(r_), __LINE__);           \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)

static uint16_t f2h(float f) {  // round to nearest even, subnormals included (|f| < 65504)
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t s = (x >> 16) & 0x8000;
  const int e = int((x >> 23) & 0xff) - 112;
  uint32_t m = (x & 0x7fffff) | 0x800000, shift = 13;
  if (e <= 0) {  // f16 subnormal: shift the significand further
    if (e < -10) return uint16_t(s);
    shift = uint32_t(14 - e);
  }
  uint32_t h = m >> shift;
  const uint32_t rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1))) ++h;
  if (e > 0) h = (uint32_t(e) << 10) + (h - 0x400);  // the implicit bit is the exponent's
  return uint16_t(s | h);
}
static float h2f(uint16_t h) {
  const uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float f;
  if (e == 0) {
    f = std::ldexp(float(m), -24);
    return s ? -f : f;
  }
  const uint32_t x = s | ((e + 112) << 23) | (m << 13);
  std::memcpy(&f, &x, 4);
  return f;
}
static std::vector<char> read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) { std::printf("cannot read %s\n", p.c_str()); std::exit(1); }
  return {std::istreambuf_iterator<char>(in), {}};
}

int main(int argc, char** argv) {
  if (argc < 11) {
    std::printf("usage: winoprobe DIR C Co H W F R GEMM.spv BM BN [DIRECT.spv]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const uint32_t C = atoi(argv[2]), Co = atoi(argv[3]), H = atoi(argv[4]), W = atoi(argv[5]), F = atoi(argv[6]),
                 R = atoi(argv[7]);
  const std::string gemm_path = argv[8];
  const uint32_t BM = atoi(argv[9]), BN = atoi(argv[10]);
  const std::string direct_path = argc > 11 ? argv[11] : "";
  const bool scalar = gemm_path.find("scalar") != std::string::npos;
  const uint32_t T = (H / 2) * (W / 2), TP = (T + BM - 1) / BM * BM, K = F * C;

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  VkInstance inst;
  CHECK(vkCreateInstance(&ici, nullptr, &inst));
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(inst, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(inst, &n, pds.data());
  VkPhysicalDevice pd = pds.at(0);
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(pd, &props);
  std::printf("device: %s\n", props.deviceName);

  // Extensions: the cooperative-matrix ones where the device has them.
  uint32_t ne = 0;
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &ne, nullptr);
  std::vector<VkExtensionProperties> have(ne);
  vkEnumerateDeviceExtensionProperties(pd, nullptr, &ne, have.data());
  std::vector<const char*> exts;
  for (const char* want : {"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"})
    for (auto& e : have)
      if (std::strcmp(e.extensionName, want) == 0) exts.push_back(want);
  struct CoopFeat { VkStructureType sType; void* pNext; VkBool32 a, b; };
  struct Coop2Feat { VkStructureType sType; void* pNext; VkBool32 f[7]; };
  Coop2Feat f2{static_cast<VkStructureType>(1000593000), nullptr, {}};
  CoopFeat fk{static_cast<VkStructureType>(1000506000), nullptr, VK_TRUE, VK_FALSE};
  if (exts.size() == 2) { f2.f[1] = VK_TRUE; fk.pNext = &f2; }
  VkPhysicalDeviceVulkan13Features f13{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, &f13};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  VkPhysicalDeviceFeatures2 feat{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  f12.shaderFloat16 = VK_TRUE;
  f12.vulkanMemoryModel = VK_TRUE;
  f11.storageBuffer16BitAccess = VK_TRUE;
  f13.computeFullSubgroups = VK_TRUE;
  f13.subgroupSizeControl = VK_TRUE;
  if (!exts.empty()) f13.pNext = &fk;
  float prio = 1;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueCount = 1;
  qci.pQueuePriorities = &prio;
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &feat};
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = uint32_t(exts.size());
  dci.ppEnabledExtensionNames = exts.data();
  VkDevice dev;
  CHECK(vkCreateDevice(pd, &dci, nullptr, &dev));
  VkQueue q;
  vkGetDeviceQueue(dev, 0, 0, &q);

  // One layout for every kernel: three storage buffers and 32 bytes of push constants.
  VkDescriptorSetLayoutBinding b[3]{};
  for (int i = 0; i < 3; ++i) {
    b[i].binding = i;
    b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    b[i].descriptorCount = 1;
    b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  dl.bindingCount = 3;
  dl.pBindings = b;
  VkDescriptorSetLayout dsl;
  CHECK(vkCreateDescriptorSetLayout(dev, &dl, nullptr, &dsl));
  VkPushConstantRange pcr{VK_SHADER_STAGE_COMPUTE_BIT, 0, 32};
  VkPipelineLayoutCreateInfo plci{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  plci.setLayoutCount = 1;
  plci.pSetLayouts = &dsl;
  plci.pushConstantRangeCount = 1;
  plci.pPushConstantRanges = &pcr;
  VkPipelineLayout pl;
  CHECK(vkCreatePipelineLayout(dev, &plci, nullptr, &pl));
  auto pipeline = [&](const std::string& path) {
    std::vector<char> code = read_file(path);
    VkShaderModuleCreateInfo smci{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smci.codeSize = code.size();
    smci.pCode = reinterpret_cast<const uint32_t*>(code.data());
    VkShaderModule sm;
    CHECK(vkCreateShaderModule(dev, &smci, nullptr, &sm));
    VkComputePipelineCreateInfo cpci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, nullptr, 0, VK_SHADER_STAGE_COMPUTE_BIT, sm, "main"};
    cpci.layout = pl;
    VkPipeline p;
    CHECK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &cpci, nullptr, &p));
    return p;
  };
  // WINO_SEG=1: V per frame (wino_input_seg.spv; the GEMM must be built with SEG=1);
  // WINO_M16=1: M in f16 (wino_output_m16.spv; the GEMM built with OUT16=1).
  const bool seg = std::getenv("WINO_SEG") && std::atoi(std::getenv("WINO_SEG")),
             m16 = std::getenv("WINO_M16") && std::atoi(std::getenv("WINO_M16"));
  VkPipeline p_in = pipeline(dir + (seg ? "/wino_input_seg.spv" : "/wino_input.spv")), p_gemm = pipeline(gemm_path),
             p_out = pipeline(dir + (m16 ? "/wino_output_m16.spv" : "/wino_output.spv"));
  VkPipeline p_direct = direct_path.empty() ? VK_NULL_HANDLE : pipeline(direct_path);

  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(pd, &mp);
  std::vector<std::pair<VkBuffer, VkDeviceMemory>> all;
  auto make = [&](VkDeviceSize size, bool host) {
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = size;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VkBuffer buf;
    CHECK(vkCreateBuffer(dev, &bci, nullptr, &buf));
    VkMemoryRequirements mr;
    vkGetBufferMemoryRequirements(dev, buf, &mr);
    const VkMemoryPropertyFlags want = host ? (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
                                            : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    uint32_t t = 0;
    for (; t < mp.memoryTypeCount; ++t)
      if ((mr.memoryTypeBits & (1u << t)) && (mp.memoryTypes[t].propertyFlags & want) == want) break;
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = mr.size;
    mai.memoryTypeIndex = t;
    VkDeviceMemory mem;
    CHECK(vkAllocateMemory(dev, &mai, nullptr, &mem));
    CHECK(vkBindBufferMemory(dev, buf, mem, 0));
    all.push_back({buf, mem});
    return all.back();
  };
  const VkDeviceSize sx = VkDeviceSize(F) * H * W * C * 2, sv = VkDeviceSize(16) * TP * K * 2,
                     su = VkDeviceSize(16) * Co * K * 2, sm = VkDeviceSize(16) * TP * Co * 4, sbias = Co * 4,
                     sy = VkDeviceSize(H) * W * Co * 2;
  auto [bX, mX] = make(sx, false);
  auto [bV, mV] = make(sv, false);
  auto [bU, mU] = make(su, false);
  auto [bM, mM] = make(sm, false);
  auto [bBias, mBias] = make(sbias, false);
  auto [bY, mY] = make(sy, false);
  auto [hX, mhX] = make(sx, true);
  auto [hU, mhU] = make(su, true);
  auto [hBias, mhBias] = make(sbias, true);
  auto [hY, mhY] = make(sy, true);

  // Data: x uniform in [−1, 1]; weights g[co][ci][f][ky][kx] scaled so y ~ x in size.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  uint16_t *px, *pu, *py;
  float* pbias;
  vkMapMemory(dev, mhX, 0, sx, 0, (void**)&px);
  vkMapMemory(dev, mhU, 0, su, 0, (void**)&pu);
  vkMapMemory(dev, mhBias, 0, sbias, 0, (void**)&pbias);
  vkMapMemory(dev, mhY, 0, sy, 0, (void**)&py);
  for (size_t i = 0; i < size_t(F) * H * W * C; ++i) px[i] = f2h(u(rng));
  const float gs = std::sqrt(3.0f / (9.0f * K));
  std::vector<uint16_t> g(size_t(Co) * C * F * 9);
  for (auto& v : g) v = f2h(u(rng) * gs);
  for (uint32_t i = 0; i < Co; ++i) pbias[i] = 0.1f * u(rng);
  // U = G g Gᵀ per (co, ci, f), f16, stored U[ξ][co][f·C + ci] (the GEMM's B, [N, K]).
  const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  for (uint32_t co = 0; co < Co; ++co)
    for (uint32_t ci = 0; ci < C; ++ci)
      for (uint32_t f = 0; f < F; ++f) {
        const uint16_t* gk = &g[((size_t(co) * C + ci) * F + f) * 9];
        double t[4][3];
        for (int a = 0; a < 4; ++a)
          for (int x = 0; x < 3; ++x) {
            t[a][x] = 0;
            for (int y = 0; y < 3; ++y) t[a][x] += G[a][y] * h2f(gk[y * 3 + x]);
          }
        for (int a = 0; a < 4; ++a)
          for (int bb = 0; bb < 4; ++bb) {
            double s = 0;
            for (int x = 0; x < 3; ++x) s += t[a][x] * G[bb][x];
            pu[(size_t(a * 4 + bb) * Co + co) * K + f * C + ci] = f2h(float(s));
          }
      }

  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 12};
  VkDescriptorPoolCreateInfo dpci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpci.maxSets = 4;
  dpci.poolSizeCount = 1;
  dpci.pPoolSizes = &ps;
  VkDescriptorPool dp;
  CHECK(vkCreateDescriptorPool(dev, &dpci, nullptr, &dp));
  auto set = [&](VkBuffer b0, VkBuffer b1, VkBuffer b2) {
    VkDescriptorSetAllocateInfo dsai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dsai.descriptorPool = dp;
    dsai.descriptorSetCount = 1;
    dsai.pSetLayouts = &dsl;
    VkDescriptorSet ds;
    CHECK(vkAllocateDescriptorSets(dev, &dsai, &ds));
    VkDescriptorBufferInfo bi[3] = {{b0, 0, VK_WHOLE_SIZE}, {b1, 0, VK_WHOLE_SIZE}, {b2, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet w[3]{};
    for (int i = 0; i < 3; ++i) {
      w[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      w[i].dstSet = ds;
      w[i].dstBinding = i;
      w[i].descriptorCount = 1;
      w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      w[i].pBufferInfo = &bi[i];
    }
    vkUpdateDescriptorSets(dev, 3, w, 0, nullptr);
    return ds;
  };
  VkDescriptorSet s_in = set(bX, bBias, bV), s_gemm = set(bV, bU, bM), s_out = set(bM, bBias, bY),
                  s_direct = set(bX, bU, bM);

  VkCommandPoolCreateInfo cpi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  VkCommandPool cp;
  CHECK(vkCreateCommandPool(dev, &cpi, nullptr, &cp));
  VkCommandBufferAllocateInfo cbai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cbai.commandPool = cp;
  cbai.commandBufferCount = 1;
  cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  VkCommandBuffer cb, cb_up;
  CHECK(vkAllocateCommandBuffers(dev, &cbai, &cb));
  CHECK(vkAllocateCommandBuffers(dev, &cbai, &cb_up));
  const uint32_t nts = 5 * (R + 1);
  VkQueryPoolCreateInfo qpci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qpci.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qpci.queryCount = nts;
  VkQueryPool qp;
  CHECK(vkCreateQueryPool(dev, &qpci, nullptr, &qp));
  VkCommandBufferBeginInfo cbbi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  CHECK(vkBeginCommandBuffer(cb_up, &cbbi));
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER, nullptr, VK_ACCESS_MEMORY_WRITE_BIT,
                     VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
  VkCommandBuffer rec = cb_up;  // the command buffer being recorded
  auto barrier = [&] {
    vkCmdPipelineBarrier(rec, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
  };
  VkBufferCopy cx{0, 0, sx}, cu{0, 0, su}, cbias{0, 0, sbias}, cy{0, 0, sy};
  vkCmdCopyBuffer(cb_up, hX, bX, 1, &cx);
  vkCmdCopyBuffer(cb_up, hU, bU, 1, &cu);
  vkCmdCopyBuffer(cb_up, hBias, bBias, 1, &cbias);
  vkCmdFillBuffer(cb_up, bV, 0, VK_WHOLE_SIZE, 0);  // the padded tile rows stay zero
  barrier();
  CHECK(vkEndCommandBuffer(cb_up));
  VkSubmitInfo su_up{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  su_up.commandBufferCount = 1;
  su_up.pCommandBuffers = &cb_up;
  CHECK(vkQueueSubmit(q, 1, &su_up, VK_NULL_HANDLE));
  CHECK(vkQueueWaitIdle(q));
  rec = cb;
  CHECK(vkBeginCommandBuffer(cb, &cbbi));
  vkCmdResetQueryPool(cb, qp, 0, nts);
  auto dispatch = [&](VkPipeline p, VkDescriptorSet ds, std::vector<uint32_t> pc, uint32_t gx, uint32_t gy, uint32_t gz) {
    vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, nullptr);
    pc.resize(8, 0);
    vkCmdPushConstants(cb, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 32, pc.data());
    vkCmdDispatch(cb, gx, gy, gz);
    barrier();
  };
  const uint32_t in_groups = (T * (C / 8) + 63) / 64, out_groups = (T * (Co / 4) + 63) / 64;
  for (uint32_t r = 0; r <= R; ++r) {  // round 0 warms up; its timestamps are not used
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 5 * r);
    dispatch(p_in, s_in, {H, W, C, F, TP}, in_groups, F, 1);
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 5 * r + 1);
    if (scalar)
      dispatch(p_gemm, s_gemm, {TP, Co, K}, (TP * Co + 63) / 64, 1, 16);
    else
      dispatch(p_gemm, s_gemm, {TP, Co, K, C, 16 * TP * C}, TP / BM, Co / BN, 16);
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 5 * r + 2);
    dispatch(p_out, s_out, {H, W, Co, TP}, out_groups, 1, 1);
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 5 * r + 3);
    // The direct conv, one dispatch per temporal tap over frame 0 (timing only: it
    // overwrites M's first rows, after the output transform has read them).
    if (p_direct != VK_NULL_HANDLE)
      for (uint32_t f = 0; f < F; ++f) dispatch(p_direct, s_direct, {H * W, Co, 9 * C}, H * W / BM, Co / BN, 1);
    vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 5 * r + 4);
  }
  vkCmdCopyBuffer(cb, bY, hY, 1, &cy);
  CHECK(vkEndCommandBuffer(cb));
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cb;
  // The same command buffer REPS times (env, default 4): the clocks ramp up during the
  // first submits after the host's set-up; the last submit's times are reported.
  const int reps = std::getenv("REPS") ? std::atoi(std::getenv("REPS")) : 4;
  double part[4] = {0, 0, 0, 0};
  for (int rep = 0; rep < reps; ++rep) {
    CHECK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE));
    CHECK(vkQueueWaitIdle(q));
    std::vector<uint64_t> ts(nts);
    CHECK(vkGetQueryPoolResults(dev, qp, 0, nts, nts * 8, ts.data(), 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    for (double& p : part) p = 0;
    for (uint32_t r = 1; r <= R; ++r)
      for (int i = 0; i < 4; ++i) part[i] += double(ts[5 * r + i + 1] - ts[5 * r + i]) * props.limits.timestampPeriod * 1e-6 / R;
    if (rep + 1 < reps) std::printf("  rep %d: input %.4f, gemm %.4f, output %.4f, direct %.4f ms\n", rep, part[0], part[1], part[2], part[3]);
  }

  // Check: sampled outputs against the direct conv in double (same f16 x and g).
  std::mt19937 pick(11);
  double se = 0, sr = 0, se16 = 0, maxd = 0;
  const int samples = 600;
  for (int s = 0; s < samples; ++s) {
    const uint32_t y = pick() % H, x = pick() % W, co = pick() % Co;
    double ref = pbias[co];
    for (uint32_t f = 0; f < F; ++f)
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          const int yy = int(y) + ky - 1, xx = int(x) + kx - 1;
          if (yy < 0 || yy >= int(H) || xx < 0 || xx >= int(W)) continue;
          const uint16_t* xp = &px[((size_t(f) * H + yy) * W + xx) * C];
          for (uint32_t ci = 0; ci < C; ++ci)
            ref += double(h2f(g[((size_t(co) * C + ci) * F + f) * 9 + ky * 3 + kx])) * h2f(xp[ci]);
        }
    const double got = h2f(py[(size_t(y) * W + x) * Co + co]);
    se += (got - ref) * (got - ref);
    se16 += (h2f(f2h(float(ref))) - ref) * (h2f(f2h(float(ref))) - ref);
    sr += ref * ref;
    maxd = std::max(maxd, std::fabs(got - ref));
  }
  const double snr = 10 * std::log10(sr / std::max(se, 1e-300)), snr16 = 10 * std::log10(sr / std::max(se16, 1e-300));
  const double wino_flop = 2.0 * 16 * TP * Co * double(K), direct_flop = 2.0 * H * W * Co * 9.0 * K;
  if (seg) part[0] /= F;  // each frame's V is made once and serves F output frames
  std::printf("%s%sC%u Co%u %ux%u F%u: input %.4f ms, gemm %.4f ms (%.1f TFLOP/s), output %.4f ms; winograd %.4f ms "
              "= %.1f direct-equivalent TFLOP/s",
              seg ? "[V per frame, input amortized] " : "", m16 ? "[M f16] " : "", C, Co, H, W, F, part[0], part[1], wino_flop / (part[1] * 1e-3) / 1e12, part[2], part[0] + part[1] + part[2],
              direct_flop / ((part[0] + part[1] + part[2]) * 1e-3) / 1e12);
  if (p_direct != VK_NULL_HANDLE)
    std::printf("; direct %u taps %.4f ms (%.1f TFLOP/s)", F, part[3], direct_flop / (part[3] * 1e-3) / 1e12);
  std::printf("\n  check (%d samples): SNR %.1f dB (f16 output rounding alone %.1f dB), max |d| %.2e, rms y %.3f %s\n",
              samples, snr, snr16, maxd, std::sqrt(sr / samples), snr > 50 ? "OK" : "WRONG");
  vkDeviceWaitIdle(dev);
  return snr > 50 ? 0 : 1;
}
