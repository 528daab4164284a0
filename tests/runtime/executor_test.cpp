// Hand-written Plans run on the test device (lavapipe on CI). Each test that moves
// data runs twice: with mapped device memory (lavapipe's native path) and with
// force_staging (the copy path a discrete GPU takes).
#include "runtime/executor.h"

#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace strata::runtime {
namespace {

using testing::float_bits;
using testing::in_bytes;
using testing::out_bytes;
using testing::pack;
using testing::pipeline;

constexpr uint32_t N = 1000;  // not a multiple of the workgroup size (64)
constexpr uint64_t kBytes = N * sizeof(float);

// GPUs may contract a * x + b into an FMA, so results can differ from the host's
// in the last bits (more where terms cancel): compare with a small tolerance.
::testing::AssertionResult close(float got, float want) {
  if (std::abs(got - want) <= 1e-5f * std::max(1.f, std::abs(want)))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << ", expected " << want;
}

uint32_t groups(uint32_t n, uint32_t size) { return (n + size - 1) / size; }

std::vector<float> ramp(float start, float step) {
  std::vector<float> v(N);
  for (uint32_t i = 0; i < N; ++i) v[i] = start + step * float(i);
  return v;
}

DispatchDesc dispatch(uint32_t pipeline, std::vector<BindingDesc> bindings,
                      std::vector<uint8_t> push, uint32_t group_size = 64) {
  DispatchDesc d;
  d.pipeline = pipeline;
  d.bindings = std::move(bindings);
  d.push_constants = std::move(push);
  d.grid = {groups(N, group_size), 1, 1};
  return d;
}

// y = 2x + 1, then z = 0.5 (y + x): the second dispatch reads what the first wrote.
Plan chain_plan() {
  Plan p;
  p.compiler_version = "test";
  p.pipelines = {pipeline("axpb", testing::kAxpb, 2, 12),
                 pipeline("add", testing::kAdd, 3, 4, {{0, float_bits(0.5f)}})};
  p.buffers = {{"x", kBytes, BufferUsage::input},
               {"y", kBytes, BufferUsage::activations},
               {"z", kBytes, BufferUsage::output}};
  p.dispatches = {
      dispatch(0, {{0, 0, kBytes, Access::read}, {1, 0, kBytes, Access::write}}, pack(2.f, 1.f, N)),
      dispatch(1,
               {{1, 0, kBytes, Access::read}, {0, 0, kBytes, Access::read},
                {2, 0, kBytes, Access::write}},
               pack(N))};
  p.inputs = {TensorIO{"x", {N}, DType::f32, "", 0, 0, kBytes}};
  p.outputs = {TensorIO{"z", {N}, DType::f32, "", 2, 0, kBytes}};
  return p;
}

class RuntimeExecutorTest : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    device_ = testing::open_test_device();
    ASSERT_TRUE(device_);
  }
  ExecutorOptions options() const {
    ExecutorOptions o;
    o.force_staging = GetParam();
    o.weight_staging_bytes = 1;  // one staging round trip per weight: exercises chunking
    return o;
  }
  std::unique_ptr<Executor> load(Plan plan, const WeightSource& weights = {}) {
    Expected<std::unique_ptr<Executor>> e =
        Executor::create(device_, std::move(plan), weights, options());
    EXPECT_TRUE(e) << e.message();
    return e ? std::move(*e) : nullptr;
  }
  std::shared_ptr<Device> device_;
};

TEST_P(RuntimeExecutorTest, TwoDispatchChainWithOneBarrier) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  ASSERT_EQ(exec->barriers().size(), 1u);
  EXPECT_EQ(exec->barriers()[0].before_dispatch, 1u);
  std::vector<float> x = ramp(-3.f, 0.01f), z(N);
  Status s = exec->run({in_bytes(x)}, {out_bytes(z)});
  ASSERT_TRUE(s.is_ok()) << s.message();
  for (uint32_t i = 0; i < N; ++i) ASSERT_TRUE(close(z[i], 0.5f * (3.f * x[i] + 1.f))) << "i=" << i;
}

// run() with the outputs asked for after the wait (Executor::OutputsAfterWait, what
// LoadedProgram::run uses to make large outputs while the device runs): asked for once,
// only when the device is done, the results copied into them; not asked for when the
// inputs are wrong; outputs of the wrong count or size are errors, as with the spans.
TEST_P(RuntimeExecutorTest, OutputsAskedForAfterTheWaitReceiveTheResults) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  std::vector<float> x = ramp(-3.f, 0.01f), z;
  int asked = 0;
  Status s = exec->run("", {in_bytes(x)}, [&] {
    ++asked;
    z.assign(N, -7.f);  // made now, as a caller making them during the run would
    return std::vector<std::span<std::byte>>{out_bytes(z)};
  });
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(asked, 1);
  for (uint32_t i = 0; i < N; ++i) ASSERT_TRUE(close(z[i], 0.5f * (3.f * x[i] + 1.f))) << "i=" << i;

  std::vector<float> short_x(N - 1);
  s = exec->run("", {in_bytes(short_x)}, [&] {
    ++asked;
    return std::vector<std::span<std::byte>>{out_bytes(z)};
  });
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("input 'x'"), std::string::npos) << s.message();
  EXPECT_EQ(asked, 1) << "the outputs were asked for though the run did not start";

  std::vector<float> short_z(N - 1);
  s = exec->run("", {in_bytes(x)}, [&] { return std::vector<std::span<std::byte>>{out_bytes(short_z)}; });
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("'z'"), std::string::npos) << s.message();
  s = exec->run("", {in_bytes(x)}, [&] { return std::vector<std::span<std::byte>>{}; });
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("0 outputs given, the plan makes 1"), std::string::npos) << s.message();
}

// read_windows / write_windows (how ranks exchange rows): windows of several buffers
// in one call, their bytes concatenated in order; reading back what was written,
// and what a run computed. Twice, so the kept staging buffers are reused.
TEST_P(RuntimeExecutorTest, WindowsAreReadAndWrittenInOneBatch) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  std::vector<float> x = ramp(-3.f, 0.01f), z(N);
  ASSERT_TRUE(exec->run({in_bytes(x)}, {out_bytes(z)}).is_ok());
  // y (buffer 1) = 2x + 1: floats 10..19 of it, then floats 0..4 of z (buffer 2).
  const std::vector<Window> windows = {{1, 40, 40}, {2, 0, 20}};
  for (int round = 0; round < 2; ++round) {
    std::vector<float> got(15);
    Status s = exec->read_windows(windows, std::as_writable_bytes(std::span(got)));
    ASSERT_TRUE(s.is_ok()) << s.message();
    for (int i = 0; i < 10; ++i) EXPECT_EQ(got[i], round == 0 ? 2.f * x[10 + i] + 1.f : float(100 + i)) << i;
    for (int i = 0; i < 5; ++i) EXPECT_EQ(got[10 + i], round == 0 ? z[i] : float(200 + i)) << i;
    std::vector<float> put(15);
    for (int i = 0; i < 15; ++i) put[i] = i < 10 ? float(100 + i) : float(200 + i - 10);
    s = exec->write_windows(windows, std::as_bytes(std::span(put)));
    ASSERT_TRUE(s.is_ok()) << s.message();
  }
  std::vector<float> four(4);
  Status s = exec->read_windows(windows, std::as_writable_bytes(std::span(four)));
  EXPECT_NE(s.message().find("the windows hold 60 bytes, the host side 16"), std::string::npos) << s.message();
  const std::vector<Window> outside = {{2, kBytes - 4, 8}};
  s = exec->read_windows(outside, std::as_writable_bytes(std::span(four)).first(8));
  EXPECT_NE(s.message().find("outside the plan's buffers"), std::string::npos) << s.message();
}

TEST_P(RuntimeExecutorTest, ReplayWithNewInputsGivesNewOutputs) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  std::vector<float> x1 = ramp(0.f, 1.f), x2 = ramp(5.f, -0.5f), z1(N), z2(N), z3(N);
  ASSERT_TRUE(exec->run({in_bytes(x1)}, {out_bytes(z1)}).is_ok());
  ASSERT_TRUE(exec->run({in_bytes(x2)}, {out_bytes(z2)}).is_ok());
  ASSERT_TRUE(exec->run({in_bytes(x1)}, {out_bytes(z3)}).is_ok());
  for (uint32_t i = 0; i < N; ++i) {
    ASSERT_TRUE(close(z1[i], 0.5f * (3.f * x1[i] + 1.f))) << "i=" << i;
    ASSERT_TRUE(close(z2[i], 0.5f * (3.f * x2[i] + 1.f))) << "i=" << i;
  }
  EXPECT_EQ(z1, z3);
}

TEST_P(RuntimeExecutorTest, WrongInputSizeNamesTheInput) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  std::vector<float> x(N - 1), z(N);
  Status s = exec->run({in_bytes(x)}, {out_bytes(z)});
  EXPECT_EQ(s.message(), "run: input 'x' is 3996 bytes, the plan expects 4000 (f32[1000])");
  std::vector<float> x_ok(N), z_short(10);
  s = exec->run({in_bytes(x_ok)}, {out_bytes(z_short)});
  EXPECT_NE(s.message().find("output 'z' has room for 40 bytes"), std::string::npos) << s.message();
  s = exec->run({}, {out_bytes(z)});
  EXPECT_EQ(s.message(), "run: 0 inputs given, the plan takes 1");
}

// replay() submits the recorded decode again on the inputs run() left in place.
TEST_P(RuntimeExecutorTest, ReplayRepeatsTheLastRunsDecode) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  std::vector<float> a = ramp(0.f, 1.f), b = ramp(5.f, -0.5f), out1(N), out2(N), got(N, -1.f);
  Status s = exec->run({in_bytes(a)}, {out_bytes(out1)});
  ASSERT_TRUE(s.is_ok()) << s.message();
  s = exec->replay();
  ASSERT_TRUE(s.is_ok()) << s.message();
  s = exec->read_outputs({out_bytes(got)});
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(std::memcmp(got.data(), out1.data(), kBytes), 0);

  ASSERT_TRUE(exec->run({in_bytes(b)}, {out_bytes(out2)}).is_ok());
  EXPECT_NE(out1, out2);
  for (uint32_t i = 0; i < N; ++i) ASSERT_TRUE(close(out2[i], 0.5f * (3.f * b[i] + 1.f))) << "i=" << i;
  std::fill(got.begin(), got.end(), -1.f);
  ASSERT_TRUE(exec->replay().is_ok());
  ASSERT_TRUE(exec->read_outputs({out_bytes(got)}).is_ok());
  EXPECT_EQ(std::memcmp(got.data(), out2.data(), kBytes), 0);
}

// acc += x, out = acc: each execution adds the input once more, so the outputs
// show that a replay really executes (a no-op would leave the last output) and
// with which input. Integers: the sums are exact.
Plan accumulate_plan() {
  Plan p;
  p.compiler_version = "test";
  p.pipelines = {pipeline("add", testing::kAdd, 3, 4), pipeline("axpb", testing::kAxpb, 2, 12)};
  p.buffers = {{"x", kBytes, BufferUsage::input},
               {"acc", kBytes, BufferUsage::activations},
               {"out", kBytes, BufferUsage::output}};
  p.dispatches = {
      dispatch(0,
               {{1, 0, kBytes, Access::read}, {0, 0, kBytes, Access::read},
                {2, 0, kBytes, Access::write}},
               pack(N)),
      dispatch(1, {{2, 0, kBytes, Access::read}, {1, 0, kBytes, Access::write}}, pack(1.f, 0.f, N))};
  p.inputs = {TensorIO{"x", {N}, DType::f32, "", 0, 0, kBytes}};
  p.outputs = {TensorIO{"out", {N}, DType::f32, "", 2, 0, kBytes}};
  return p;
}

TEST_P(RuntimeExecutorTest, ReplayExecutesAgainWithTheLastRunsInputs) {
  std::unique_ptr<Executor> exec = load(accumulate_plan());
  ASSERT_TRUE(exec);
  std::vector<float> a = ramp(1.f, 1.f), b = ramp(-3.f, 2.f), out(N);
  auto expect_out = [&](float ka, float kb, const char* when) {
    ASSERT_TRUE(exec->read_outputs({out_bytes(out)}).is_ok()) << when;
    for (uint32_t i = 0; i < N; ++i) ASSERT_EQ(out[i], ka * a[i] + kb * b[i]) << when << ", i=" << i;
  };
  ASSERT_TRUE(exec->run({in_bytes(a)}, {out_bytes(out)}).is_ok());
  expect_out(1, 0, "after run(a)");
  ASSERT_TRUE(exec->replay().is_ok());
  expect_out(2, 0, "after replay");
  ASSERT_TRUE(exec->replay().is_ok());
  expect_out(3, 0, "after a second replay");
  ASSERT_TRUE(exec->run({in_bytes(b)}, {out_bytes(out)}).is_ok());
  expect_out(3, 1, "after run(b)");
  ASSERT_TRUE(exec->replay().is_ok());
  expect_out(3, 2, "after replay with b in place");
}

TEST_P(RuntimeExecutorTest, ReplayBeforeAnyRunIsAnError) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  Status s = exec->replay();
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "replay: no run() yet, the inputs are not in place");
  std::vector<float> z(N);
  s = exec->read_outputs({out_bytes(z)});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("no run() yet"), std::string::npos) << s.message();
  // A run refused for its sizes puts nothing in place either.
  std::vector<float> x_short(N - 1);
  EXPECT_FALSE(exec->run({in_bytes(x_short)}, {out_bytes(z)}).is_ok());
  EXPECT_FALSE(exec->replay().is_ok());
}

TEST_P(RuntimeExecutorTest, ReadOutputsChecksSizes) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  std::vector<float> x = ramp(0.f, 1.f), z(N), z_short(10);
  ASSERT_TRUE(exec->run({in_bytes(x)}, {out_bytes(z)}).is_ok());
  Status s = exec->read_outputs({out_bytes(z_short)});
  EXPECT_EQ(s.message(), "read_outputs: output 'z' has room for 40 bytes, the plan writes 4000 (f32[1000])");
  s = exec->read_outputs({});
  EXPECT_EQ(s.message(), "read_outputs: 0 outputs given, the plan makes 1");
}

// run_held(): outputs the caller keeps without a host copy. Each held result stays as
// its run left it through later runs and after the executor is gone; staged (the
// discrete-GPU path) each lives in a readback buffer of its own, and a released one is
// reused by the next run_held.
TEST_P(RuntimeExecutorTest, HeldOutputsOutliveLaterRunsAndTheExecutor) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  auto expect_chain = [](const HeldOutputs& held, const std::vector<float>& x) {
    ASSERT_EQ(held.outputs.size(), 1u);
    ASSERT_EQ(held.outputs[0].size(), kBytes);
    const float* z = reinterpret_cast<const float*>(held.outputs[0].data());
    for (uint32_t i = 0; i < N; ++i) ASSERT_TRUE(close(z[i], 0.5f * (3.f * x[i] + 1.f))) << "i=" << i;
  };
  const std::vector<float> x1 = ramp(-3.f, 0.01f), x2 = ramp(1.f, 0.02f), x3 = ramp(5.f, -0.03f);
  Expected<HeldOutputs> h1 = exec->run_held("", {in_bytes(x1)});
  ASSERT_TRUE(h1) << h1.message();
  Expected<HeldOutputs> h2 = exec->run_held("", {in_bytes(x2)});
  ASSERT_TRUE(h2) << h2.message();
  std::vector<float> z(N);
  ASSERT_TRUE(exec->run({in_bytes(x3)}, {out_bytes(z)}).is_ok());
  expect_chain(*h1, x1);
  expect_chain(*h2, x2);
  EXPECT_NE(h1->outputs[0].data(), h2->outputs[0].data());

  const std::byte* released = h1->outputs[0].data();
  *h1 = HeldOutputs{};
  Expected<HeldOutputs> h3 = exec->run_held("", {in_bytes(x3)});
  ASSERT_TRUE(h3) << h3.message();
  if (GetParam()) {
    EXPECT_EQ(h3->outputs[0].data(), released) << "the released readback buffer was not reused";
  }
  expect_chain(*h2, x2);
  expect_chain(*h3, x3);

  // The inputs are in place for replay(); read_outputs() reads only run()'s and replay()'s.
  Status s = exec->read_outputs({out_bytes(z)});
  EXPECT_EQ(s.message(), "read_outputs: no run() yet, there are no outputs to read");
  ASSERT_TRUE(exec->replay().is_ok());
  ASSERT_TRUE(exec->read_outputs({out_bytes(z)}).is_ok());
  for (uint32_t i = 0; i < N; ++i) ASSERT_TRUE(close(z[i], 0.5f * (3.f * x3[i] + 1.f))) << "i=" << i;

  std::vector<float> short_x(N - 1);
  Expected<HeldOutputs> bad = exec->run_held("", {in_bytes(short_x)});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message(), "run: input 'x' is 3996 bytes, the plan expects 4000 (f32[1000])");

  exec.reset();
  expect_chain(*h2, x2);
  expect_chain(*h3, x3);
}

// At most ExecutorOptions::held_readbacks buffers are made: five results held at once
// are all right, the two beyond the buffers copied into memory of their own; once
// released, the buffers are taken again.
TEST_P(RuntimeExecutorTest, HeldReadbacksAreBoundedAndBeyondThemTheOutputsAreCopied) {
  std::unique_ptr<Executor> exec = load(chain_plan());
  ASSERT_TRUE(exec);
  ASSERT_EQ(ExecutorOptions{}.held_readbacks, 3u);
  const uint64_t base = exec->host_bytes();
  std::vector<const std::byte*> buffers;
  {
    std::vector<HeldOutputs> held;
    std::vector<std::vector<float>> xs;
    for (int i = 0; i < 5; ++i) {
      xs.push_back(ramp(float(i), 0.5f));
      Expected<HeldOutputs> h = exec->run_held("", {in_bytes(xs.back())});
      ASSERT_TRUE(h) << h.message();
      held.push_back(std::move(*h));
    }
    for (int i = 0; i < 5; ++i) {
      const float* z = reinterpret_cast<const float*>(held[i].outputs[0].data());
      for (uint32_t k = 0; k < N; ++k) ASSERT_TRUE(close(z[k], 0.5f * (3.f * xs[i][k] + 1.f))) << i << ", " << k;
      for (int j = 0; j < i; ++j) EXPECT_NE(held[i].outputs[0].data(), held[j].outputs[0].data());
    }
    EXPECT_EQ(exec->host_bytes(), base + (GetParam() ? 3 * kBytes : 0));
    for (int i = 0; i < 3; ++i) buffers.push_back(held[i].outputs[0].data());
  }
  const std::vector<float> x = ramp(0.f, 1.f);
  Expected<HeldOutputs> h = exec->run_held("", {in_bytes(x)});
  ASSERT_TRUE(h) << h.message();
  if (GetParam()) {
    EXPECT_NE(std::find(buffers.begin(), buffers.end(), h->outputs[0].data()), buffers.end())
        << "a released readback buffer was not taken again";
  }
  EXPECT_EQ(exec->host_bytes(), base + (GetParam() ? 3 * kBytes : 0));
}

// One arena holding x, y1 and y2 at `stride`-aligned offsets; dispatches bind
// windows of it: y1 = 2x + 1 and y2 = -x + 0.5 (disjoint windows, no barrier), then
// z = y1 + y2 (reads both: barrier), then y1 = 4x (overwrites what the add read:
// barrier). Outputs z and the final y1.
Plan windowed_plan(uint64_t stride) {
  BindingDesc x{0, 0, kBytes, Access::read};
  BindingDesc y1w{0, stride, kBytes, Access::write}, y1r{0, stride, kBytes, Access::read};
  BindingDesc y2w{0, 2 * stride, kBytes, Access::write}, y2r{0, 2 * stride, kBytes, Access::read};
  Plan p;
  p.pipelines = {pipeline("axpb", testing::kAxpb, 2, 12), pipeline("add", testing::kAdd, 3, 4)};
  p.buffers = {{"arena", 3 * stride, BufferUsage::activations}, {"z", kBytes, BufferUsage::output}};
  p.dispatches = {dispatch(0, {x, y1w}, pack(2.f, 1.f, N)), dispatch(0, {x, y2w}, pack(-1.f, 0.5f, N)),
                  dispatch(1, {y1r, y2r, {1, 0, kBytes, Access::write}}, pack(N)),
                  dispatch(0, {x, y1w}, pack(4.f, 0.f, N))};
  p.inputs = {TensorIO{"x", {N}, DType::f32, "", 0, 0, kBytes}};
  p.outputs = {TensorIO{"z", {N}, DType::f32, "", 1, 0, kBytes},
               TensorIO{"y1", {N}, DType::f32, "", 0, stride, kBytes}};
  return p;
}

uint64_t window_stride(const Device& dev) {
  uint64_t align = std::max<uint64_t>(256, dev.info().min_storage_buffer_offset_alignment);
  return (kBytes + align - 1) / align * align;
}

TEST_P(RuntimeExecutorTest, WindowedBindingsOfOneBuffer) {
  Plan p = windowed_plan(window_stride(*device_));
  std::unique_ptr<Executor> exec = load(p);
  ASSERT_TRUE(exec);
  // Disjoint windows: no barrier between the two producers. The add reads both
  // (read after write); the last dispatch overwrites y1, which the add read.
  ASSERT_EQ(exec->barriers().size(), 2u) << describe(p);
  EXPECT_EQ(exec->barriers()[0].before_dispatch, 2u);
  EXPECT_EQ(exec->barriers()[1].before_dispatch, 3u);
  EXPECT_NE(exec->barriers()[1].reason.find("read by dispatch 2"), std::string::npos);
  std::vector<float> xs = ramp(1.f, 0.125f), z(N), y1(N);
  ASSERT_TRUE(exec->run({in_bytes(xs)}, {out_bytes(z), out_bytes(y1)}).is_ok());
  for (uint32_t i = 0; i < N; ++i) {
    ASSERT_TRUE(close(z[i], xs[i] + 1.5f)) << "i=" << i;
    ASSERT_TRUE(close(y1[i], 4.f * xs[i])) << "i=" << i;
  }
}

// One SPIR-V module, two pipelines: different specialisation constants (including
// the workgroup size) and different push constants.
TEST_P(RuntimeExecutorTest, SpecialisationAndPushConstants) {
  std::vector<uint32_t> spirv = testing::compile_glsl(testing::kSpec, "spec");
  PipelineDesc times{"times3_wg32", spirv, "main", {{0, float_bits(3.f)}, {1, 0}, {2, 32}}, 4, 2};
  PipelineDesc plus{"plus3_wg64", spirv, "main", {{0, float_bits(3.f)}, {1, 1}}, 4, 2};
  Plan p;
  p.pipelines = {times, plus};
  p.buffers = {{"x", kBytes, BufferUsage::input},
               {"a", kBytes, BufferUsage::output},
               {"b", kBytes, BufferUsage::output}};
  // n = N - 5 via push constants: the last five outputs stay untouched (zero).
  p.dispatches = {dispatch(0, {{0, 0, kBytes, Access::read}, {1, 0, kBytes, Access::write}},
                           pack(N - 5), 32),
                  dispatch(1, {{0, 0, kBytes, Access::read}, {2, 0, kBytes, Access::write}},
                           pack(N))};
  p.weights = {};
  p.inputs = {TensorIO{"x", {N}, DType::f32, "", 0, 0, kBytes}};
  p.outputs = {TensorIO{"a", {N}, DType::f32, "", 1, 0, kBytes},
               TensorIO{"b", {N}, DType::f32, "", 2, 0, kBytes}};
  std::unique_ptr<Executor> exec = load(p);
  ASSERT_TRUE(exec);
  EXPECT_TRUE(exec->barriers().empty());
  std::vector<float> x = ramp(-2.f, 0.25f), a(N), b(N);
  ASSERT_TRUE(exec->run({in_bytes(x)}, {out_bytes(a), out_bytes(b)}).is_ok());
  for (uint32_t i = 0; i < N; ++i) {
    ASSERT_TRUE(close(a[i], i < N - 5 ? 3.f * x[i] : 0.f)) << "i=" << i;
    ASSERT_TRUE(close(b[i], x[i] + 3.f)) << "i=" << i;
  }
}

// Weights come from a caller-supplied source, into windows of one weights buffer.
TEST_P(RuntimeExecutorTest, WeightsUploadedOnce) {
  uint64_t bias_offset = (kBytes + 255) / 256 * 256;
  Plan p;
  p.pipelines = {pipeline("weighted", testing::kWeighted, 4, 4)};
  p.buffers = {{"x", kBytes, BufferUsage::input},
               {"weights", bias_offset + kBytes, BufferUsage::weights},
               {"y", kBytes, BufferUsage::output}};
  p.weights = {WeightUpload{"layer.weight", {}, 1, 0, kBytes},
               WeightUpload{"layer.bias", {}, 1, bias_offset, kBytes}};
  p.dispatches = {dispatch(0,
                           {{0, 0, kBytes, Access::read}, {1, 0, kBytes, Access::read},
                            {1, bias_offset, kBytes, Access::read}, {2, 0, kBytes, Access::write}},
                           pack(N))};
  p.inputs = {TensorIO{"x", {N}, DType::f32, "", 0, 0, kBytes}};
  p.outputs = {TensorIO{"y", {N}, DType::f32, "", 2, 0, kBytes}};
  std::vector<float> w = ramp(0.5f, 0.001f), bias = ramp(-1.f, 0.002f);

  Expected<std::unique_ptr<Executor>> missing = Executor::create(
      device_, p, weights_from_map({{"layer.weight", in_bytes(w)}}), options());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.message(), "uploading weights: weight 'layer.bias': not among the provided weights");

  std::unique_ptr<Executor> exec = load(
      p, weights_from_map({{"layer.weight", in_bytes(w)}, {"layer.bias", in_bytes(bias)}}));
  ASSERT_TRUE(exec);
  std::vector<float> x = ramp(3.f, -0.01f), y(N);
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(exec->run({in_bytes(x)}, {out_bytes(y)}).is_ok());
    for (uint32_t i = 0; i < N; ++i) ASSERT_TRUE(close(y[i], w[i] * x[i] + bias[i])) << "i=" << i;
    x = ramp(-1.f, 0.02f);
  }
}

// Nine pipelines (eight specialisations of one shader chained, then a weighted
// one reading uploaded weights): x -> a1 -> ... -> a8 -> y.
Plan many_pipelines_plan() {
  std::vector<uint32_t> spirv = testing::compile_glsl(testing::kSpec, "spec");
  Plan p;
  p.compiler_version = "test";
  p.buffers.push_back({"x", kBytes, BufferUsage::input});
  for (int k = 1; k <= 8; ++k) p.buffers.push_back({fmt::format("a{}", k), kBytes, BufferUsage::activations});
  const uint64_t bias_offset = (kBytes + 255) / 256 * 256;
  p.buffers.push_back({"weights", bias_offset + kBytes, BufferUsage::weights});  // 9
  p.buffers.push_back({"y", kBytes, BufferUsage::output});                       // 10
  for (uint32_t k = 0; k < 8; ++k) {
    p.pipelines.push_back(PipelineDesc{fmt::format("spec{}", k), spirv, "main",
                                       {{0, float_bits(1.f + 0.25f * float(k))}, {1, k % 2}}, 4, 2});
    p.dispatches.push_back(dispatch(k, {{k, 0, kBytes, Access::read}, {k + 1, 0, kBytes, Access::write}}, pack(N)));
  }
  p.pipelines.push_back(pipeline("weighted", testing::kWeighted, 4, 4));
  p.dispatches.push_back(dispatch(8,
                                  {{8, 0, kBytes, Access::read}, {9, 0, kBytes, Access::read},
                                   {9, bias_offset, kBytes, Access::read}, {10, 0, kBytes, Access::write}},
                                  pack(N)));
  p.weights = {WeightUpload{"layer.weight", {}, 9, 0, kBytes}, WeightUpload{"layer.bias", {}, 9, bias_offset, kBytes}};
  p.inputs = {TensorIO{"x", {N}, DType::f32, "", 0, 0, kBytes}};
  p.outputs = {TensorIO{"y", {N}, DType::f32, "", 10, 0, kBytes}};
  return p;
}

// Pipelines built on several threads while the weights upload give the executor
// that one thread builds: the same outputs bit for bit, and the host's values.
TEST_P(RuntimeExecutorTest, PipelinesBuiltOnSeveralThreadsGiveTheSameOutputs) {
  const std::vector<float> w = ramp(0.5f, 0.001f), bias = ramp(-1.f, 0.002f), x = ramp(3.f, -0.01f);
  const WeightSource weights = weights_from_map({{"layer.weight", in_bytes(w)}, {"layer.bias", in_bytes(bias)}});
  std::vector<std::vector<float>> outputs;
  for (uint32_t threads : {1u, 4u}) {
    SCOPED_TRACE(threads);
    ExecutorOptions o = options();
    o.pipeline_threads = threads;
    Expected<std::unique_ptr<Executor>> e = Executor::create(device_, many_pipelines_plan(), weights, o);
    ASSERT_TRUE(e) << e.message();
    const LoadTimes& t = (*e)->load_times();
    EXPECT_EQ(t.pipeline_threads, threads);
    EXPECT_EQ(t.pipelines, 9u);
    EXPECT_FALSE(t.slowest_pipeline.empty());
    EXPECT_GE(t.pipelines_ms, t.slowest_pipeline_ms);
    EXPECT_GE(t.total_ms, t.pipelines_ms);
    std::vector<float> y(N);
    ASSERT_TRUE((*e)->run({in_bytes(x)}, {out_bytes(y)}).is_ok());
    for (uint32_t i = 0; i < N; ++i) {
      float v = x[i];
      for (uint32_t k = 0; k < 8; ++k) v = k % 2 == 0 ? v * (1.f + 0.25f * float(k)) : v + (1.f + 0.25f * float(k));
      ASSERT_TRUE(close(y[i], w[i] * v + bias[i])) << "i=" << i;
    }
    outputs.push_back(std::move(y));
  }
  EXPECT_EQ(std::memcmp(outputs[0].data(), outputs[1].data(), kBytes), 0);
}

// A weight source that fails while other threads build pipelines: create() waits
// for them and returns the weight's error, not a pipeline's and not a crash.
TEST_P(RuntimeExecutorTest, UploadErrorWhilePipelinesBuildIsReturned) {
  const std::vector<float> w = ramp(0.5f, 0.001f);
  ExecutorOptions o = options();
  o.pipeline_threads = 4;
  Expected<std::unique_ptr<Executor>> e =
      Executor::create(device_, many_pipelines_plan(), weights_from_map({{"layer.weight", in_bytes(w)}}), o);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.message(), "uploading weights: weight 'layer.bias': not among the provided weights");
}

INSTANTIATE_TEST_SUITE_P(Memory, RuntimeExecutorTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Staged") : std::string("Mapped");
                         });

// f16 storage: needs shaderFloat16 + storageBuffer16BitAccess enabled on the device.
TEST(RuntimeExecutor, HalfPrecisionStorageWithFeaturesEnabled) {
  Plan p;
  p.requirements.shader_float16 = true;
  p.requirements.storage_buffer_16bit_access = true;
  p.pipelines = {pipeline("to_f16", testing::kToF16, 2, 4),
                 pipeline("from_f16", testing::kFromF16, 2, 4)};
  p.buffers = {{"x", kBytes, BufferUsage::input},
               {"h", N * 2, BufferUsage::activations},
               {"y", kBytes, BufferUsage::output}};
  p.dispatches = {dispatch(0, {{0, 0, kBytes, Access::read}, {1, 0, N * 2, Access::write}}, pack(N)),
                  dispatch(1, {{1, 0, N * 2, Access::read}, {2, 0, kBytes, Access::write}}, pack(N))};
  p.inputs = {TensorIO{"x", {N}, DType::f32, "", 0, 0, kBytes}};
  p.outputs = {TensorIO{"y", {N}, DType::f32, "", 2, 0, kBytes}};

  // A device opened without the features is refused by name.
  std::shared_ptr<Device> plain = testing::open_test_device();
  ASSERT_TRUE(plain);
  Expected<std::unique_ptr<Executor>> refused = Executor::create(plain, p);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("needs shaderFloat16, but device '"), std::string::npos)
      << refused.message();

  std::shared_ptr<Device> dev = testing::open_test_device(p.requirements);
  ASSERT_TRUE(dev);
  Expected<std::unique_ptr<Executor>> exec = Executor::create(dev, p);
  ASSERT_TRUE(exec) << exec.message();
  std::vector<float> x = ramp(-100.f, 0.25f), y(N);  // exactly representable in f16
  ASSERT_TRUE((*exec)->run({in_bytes(x)}, {out_bytes(y)}).is_ok());
  for (uint32_t i = 0; i < N; ++i) ASSERT_EQ(y[i], 2.f * x[i]) << "i=" << i;
}

TEST(RuntimeExecutor, DeviceLimitsAreChecked) {
  std::shared_ptr<Device> dev = testing::open_test_device();
  ASSERT_TRUE(dev);
  uint64_t align = dev->info().min_storage_buffer_offset_alignment;
  if (align <= 4) GTEST_SKIP() << "device accepts 4-byte binding offsets";
  Plan p = chain_plan();
  p.buffers[1].size_bytes += 4;
  p.dispatches[0].bindings[1].offset = 4;
  p.dispatches[1].bindings[0].offset = 4;
  Expected<std::unique_ptr<Executor>> e = Executor::create(dev, p);
  ASSERT_FALSE(e);
  EXPECT_NE(e.message().find("dispatch 0 ('axpb') binding 1: offset 4 is not a multiple of device"),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("minStorageBufferOffsetAlignment"), std::string::npos);
}

TEST(RuntimeExecutor, PipelineCacheRoundTrip) {
  std::shared_ptr<Device> dev = testing::open_test_device();
  ASSERT_TRUE(dev);
  Expected<std::unique_ptr<Executor>> first = Executor::create(dev, chain_plan());
  ASSERT_TRUE(first) << first.message();
  EXPECT_FALSE((*first)->used_pipeline_cache_data());
  Expected<std::vector<uint8_t>> data = (*first)->pipeline_cache_data();
  ASSERT_TRUE(data) << data.message();
  ASSERT_GE(data->size(), 32u);

  ExecutorOptions warm;
  warm.pipeline_cache_data = *data;
  Expected<std::unique_ptr<Executor>> second = Executor::create(dev, chain_plan(), {}, warm);
  ASSERT_TRUE(second) << second.message();
  EXPECT_TRUE((*second)->used_pipeline_cache_data());

  ExecutorOptions stale;
  stale.pipeline_cache_data = *data;
  stale.pipeline_cache_data[8] ^= 0xff;  // another vendor
  Expected<std::unique_ptr<Executor>> third = Executor::create(dev, chain_plan(), {}, stale);
  ASSERT_TRUE(third) << third.message();
  EXPECT_FALSE((*third)->used_pipeline_cache_data());
  std::vector<float> x = ramp(0.f, 1.f), z(N);
  ASSERT_TRUE((*third)->run({in_bytes(x)}, {out_bytes(z)}).is_ok());
  EXPECT_TRUE(close(z[10], 0.5f * (3.f * 10.f + 1.f)));
}

// --pipeline-stats: where the device offers VK_KHR_pipeline_executable_properties the
// executor keeps the driver's statistics of every pipeline; where it does not
// (lavapipe), opening the device for them is an error naming the extension. Asking
// the executor without a device opened for them is an error too, and by default
// there are none.
TEST(RuntimeExecutor, PipelineStatisticsWhereTheDeviceOffersThem) {
  std::shared_ptr<Device> plain = testing::open_test_device();
  ASSERT_TRUE(plain);
  {
    Expected<std::unique_ptr<Executor>> exec = Executor::create(plain, chain_plan());
    ASSERT_TRUE(exec) << exec.message();
    EXPECT_TRUE((*exec)->pipeline_statistics().empty());
    ExecutorOptions o;
    o.pipeline_statistics = true;
    Expected<std::unique_ptr<Executor>> refused = Executor::create(plain, chain_plan(), {}, o);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.message().find("DeviceOptions::pipeline_statistics"), std::string::npos) << refused.message();
  }
  DeviceOptions opts;
  opts.index = static_cast<int>(plain->info().index);
  opts.pipeline_statistics = true;
  Expected<std::shared_ptr<Device>> dev = open_device(opts, DeviceRequirements{});
  if (!plain->info().pipeline_executable_info) {
    ASSERT_FALSE(dev);
    EXPECT_NE(dev.message().find("VK_KHR_pipeline_executable_properties"), std::string::npos) << dev.message();
    return;
  }
  ASSERT_TRUE(dev) << dev.message();
  EXPECT_TRUE((*dev)->pipeline_statistics());
  ExecutorOptions o;
  o.pipeline_statistics = true;
  const Plan plan = chain_plan();
  Expected<std::unique_ptr<Executor>> exec = Executor::create(*dev, plan, {}, o);
  ASSERT_TRUE(exec) << exec.message();
  for (const PipelineDesc& p : plan.pipelines) {
    bool found = false;
    for (const PipelineStatistics& st : (*exec)->pipeline_statistics())
      found = found || (st.pipeline == p.name && !st.values.empty());
    EXPECT_TRUE(found) << "no statistics for pipeline " << p.name;
  }
}

TEST(RuntimeExecutor, ProfilerTimesEveryDispatch) {
  std::shared_ptr<Device> dev = testing::open_test_device();
  ASSERT_TRUE(dev);
  if (!dev->info().timestamps) GTEST_SKIP() << "no timestamps on this device";
  ExecutorOptions o;
  o.profile = true;
  Expected<std::unique_ptr<Executor>> exec = Executor::create(dev, chain_plan(), {}, o);
  ASSERT_TRUE(exec) << exec.message();
  std::vector<float> x(N, 1.f), z(N);
  ASSERT_TRUE((*exec)->run({in_bytes(x)}, {out_bytes(z)}).is_ok());
  const Profile& prof = (*exec)->last_profile();
  ASSERT_EQ(prof.dispatch_us.size(), 2u);
  EXPECT_GE(prof.total_us, 0.0);
  for (double t : prof.dispatch_us) EXPECT_GE(t, 0.0);
  EXPECT_TRUE(close(z[0], 2.f));
}

// Synchronization validation (VK_LAYER_KHRONOS_validation) checks the barriers the
// runtime records against what the kernels actually access. Skipped where the
// layer is not installed (Debian package vulkan-validationlayers).
std::shared_ptr<Device> open_validated_device() {
  DeviceOptions opts;
  opts.validation = true;
  Expected<std::shared_ptr<Device>> dev = open_device(opts, DeviceRequirements{});
  EXPECT_TRUE(dev) << dev.message();
  return dev ? *dev : nullptr;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

TEST(RuntimeValidation, RecordedBarriersPassSynchronizationValidation) {
  std::shared_ptr<Device> dev = open_validated_device();
  ASSERT_TRUE(dev);
  if (!dev->instance().validation_enabled()) GTEST_SKIP() << "validation layer not installed";
  for (bool staged : {false, true}) {
    ExecutorOptions o;
    o.force_staging = staged;
    for (const Plan& plan : {chain_plan(), windowed_plan(window_stride(*dev)), accumulate_plan()}) {
      Expected<std::unique_ptr<Executor>> exec = Executor::create(dev, plan, {}, o);
      ASSERT_TRUE(exec) << exec.message();
      std::vector<float> x = ramp(1.f, 0.5f), a(N), b(N);
      std::vector<std::span<std::byte>> outs = {out_bytes(a)};
      if (plan.outputs.size() == 2) outs.push_back(out_bytes(b));
      for (int run = 0; run < 2; ++run) ASSERT_TRUE((*exec)->run({in_bytes(x)}, outs).is_ok());
      ASSERT_TRUE((*exec)->replay().is_ok());
      ASSERT_TRUE((*exec)->read_outputs(outs).is_ok());
      // The pool's copies into buffers of their own, and a run() after them.
      Expected<HeldOutputs> first = (*exec)->run_held("", {in_bytes(x)});
      ASSERT_TRUE(first) << first.message();
      Expected<HeldOutputs> second = (*exec)->run_held("", {in_bytes(x)});
      ASSERT_TRUE(second) << second.message();
      ASSERT_TRUE((*exec)->run({in_bytes(x)}, outs).is_ok());
    }
  }
  std::vector<std::string> messages = dev->instance().take_validation_messages();
  EXPECT_TRUE(messages.empty()) << joined(messages);
}

// The negative control: a plan that mislabels a written binding as read-only gets
// no barrier, and the layer must notice. Shows the test above can fail.
TEST(RuntimeValidation, MislabelledWriteIsCaught) {
  std::shared_ptr<Device> dev = open_validated_device();
  ASSERT_TRUE(dev);
  if (!dev->instance().validation_enabled()) GTEST_SKIP() << "validation layer not installed";
  Plan p = chain_plan();
  p.dispatches[0].bindings[1].access = Access::read;  // the kernel writes it
  Expected<std::unique_ptr<Executor>> exec = Executor::create(dev, p);
  ASSERT_TRUE(exec) << exec.message();
  EXPECT_TRUE((*exec)->barriers().empty());
  std::vector<float> x(N, 1.f), z(N);
  ASSERT_TRUE((*exec)->run({in_bytes(x)}, {out_bytes(z)}).is_ok());
  std::string messages = joined(dev->instance().take_validation_messages());
  EXPECT_NE(messages.find("SYNC-HAZARD-READ-AFTER-WRITE"), std::string::npos) << messages;
}

}  // namespace
}  // namespace strata::runtime
