// VideoWriter: .npy read back element by element, PNG frames read back through libpng,
// .mp4 checked with ffprobe/ffmpeg, and the error paths, each of which must leave no
// output and no temporary behind.
#include "tools/video_output.h"

#include "ir/npy.h"
#include "tools/png_writer.h"

#include <gtest/gtest.h>
#include <png.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace strata {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kH = 16, kW = 24;

class VideoOutputTest : public ::testing::Test {
protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("strata_video_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Everything in the test folder, to check that no temporary is left behind.
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.insert(e.path().filename().string());
    return names;
  }
  fs::path dir_;
};

// A value for every (c, f, y, x), distinct across the whole video and inside [-1, 1].
float value(int64_t c, int64_t f, int64_t y, int64_t x) {
  return -1.0f + float(((c * 7 + f) * kH + y) * kW + x) / 4096.0f;
}

Tensor frame(int64_t f) {
  Tensor t({3, kH, kW});
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < kH; ++y)
      for (int64_t x = 0; x < kW; ++x) t.data[size_t((c * kH + y) * kW + x)] = value(c, f, y, x);
  return t;
}

std::unique_ptr<VideoWriter> open_ok(const std::string& p, int64_t frames, double fps = 24.0) {
  auto w = VideoWriter::open({p, frames, kH, kW, fps});
  EXPECT_TRUE(w.has_value()) << w.message();
  return w ? std::move(*w) : nullptr;
}

std::string read_text(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command and returns its stdout.
std::string run(const std::string& cmd) {
  std::string out;
  if (std::FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

bool have_program(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

TEST(VideoOutputFormat, FollowsTheExtension) {
  EXPECT_EQ(*video_format_for_path("out.npy"), VideoFormat::npy);
  EXPECT_EQ(*video_format_for_path("dir/OUT.NPY"), VideoFormat::npy);
  EXPECT_EQ(*video_format_for_path("frames/"), VideoFormat::png_frames);
  EXPECT_EQ(*video_format_for_path("frames.d/"), VideoFormat::png_frames);
  EXPECT_EQ(*video_format_for_path("frames"), VideoFormat::png_frames);
  EXPECT_EQ(*video_format_for_path(fs::temp_directory_path().string()), VideoFormat::png_frames);
  if (video_mp4_supported()) {
    EXPECT_EQ(*video_format_for_path("a.mp4"), VideoFormat::mp4);
  }
  for (const char* bad : {"video.gif", "video.png", "video.avi"}) {
    auto f = video_format_for_path(bad);
    ASSERT_FALSE(f.has_value()) << bad;
    EXPECT_NE(f.message().find(fs::path(bad).extension().string()), std::string::npos) << f.message();
    EXPECT_NE(f.message().find(".npy"), std::string::npos) << f.message();
    EXPECT_NE(f.message().find("folder"), std::string::npos) << f.message();
  }
  EXPECT_FALSE(video_format_for_path("").has_value());
}

TEST(VideoOutputFormat, Mp4WithoutFfmpegIsAClearError) {
  if (video_mp4_supported()) GTEST_SKIP() << "built with FFmpeg";
  auto f = video_format_for_path("a.mp4");
  ASSERT_FALSE(f.has_value());
  EXPECT_NE(f.message().find("without FFmpeg"), std::string::npos) << f.message();
}

TEST_F(VideoOutputTest, NpyHoldsEveryValueInDiffusersLayout) {
  const int64_t F = 3;
  auto w = open_ok(path("v.npy"), F);
  ASSERT_TRUE(w);
  for (int64_t f = 0; f < F; ++f) {
    Tensor t = frame(f);
    if (f == 1) t.shape = {1, 3, kH, kW};  // a batch dim of 1 is accepted
    ASSERT_TRUE(w->write_frame(t)) << f;
  }
  ASSERT_TRUE(w->finish());
  EXPECT_EQ(entries(), std::set<std::string>{"v.npy"});

  auto back = read_npy(path("v.npy"));
  ASSERT_TRUE(back.has_value()) << back.message();
  ASSERT_EQ(back->shape, (Shape{3, F, kH, kW}));
  size_t i = 0;  // NumPy's C order over [3, F, H, W]
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t f = 0; f < F; ++f)
      for (int64_t y = 0; y < kH; ++y)
        for (int64_t x = 0; x < kW; ++x, ++i)
          ASSERT_EQ(back->data[i], value(c, f, y, x)) << c << " " << f << " " << y << " " << x;

  // Byte for byte what write_npy (NumPy's header layout) makes of the whole video.
  Tensor whole({3, F, kH, kW}, back->data);
  ASSERT_TRUE(write_npy(path("whole.npy"), whole));
  EXPECT_EQ(read_text(path("v.npy")), read_text(path("whole.npy")));
}

TEST_F(VideoOutputTest, PngFramesAreNumberedAndUseTheDiffusersMapping) {
  const int64_t F = 3;
  auto w = open_ok(path("frames/"), F);
  ASSERT_TRUE(w);
  for (int64_t f = 0; f < F; ++f) ASSERT_TRUE(w->write_frame(frame(f)));
  ASSERT_TRUE(w->finish());
  EXPECT_EQ(entries(), std::set<std::string>{"frames"});
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir_ / "frames")) files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"frame_00000.png", "frame_00001.png", "frame_00002.png"}));

  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  ASSERT_TRUE(png_image_begin_read_from_file(&image, path("frames/frame_00002.png").c_str()))
      << image.message;
  image.format = PNG_FORMAT_RGB;
  ASSERT_EQ(image.width, uint32_t(kW));
  ASSERT_EQ(image.height, uint32_t(kH));
  std::vector<uint8_t> rgb(PNG_IMAGE_SIZE(image));
  ASSERT_TRUE(png_image_finish_read(&image, nullptr, rgb.data(), 0, nullptr)) << image.message;
  const int64_t y = 5, x = 7;
  for (int64_t c = 0; c < 3; ++c)
    EXPECT_EQ(rgb[size_t((y * kW + x) * 3 + c)], to_u8_pixel(value(c, 2, y, x))) << c;
}

TEST_F(VideoOutputTest, PngFolderWithoutExtensionReplacesAnEarlierOutput) {
  fs::create_directories(dir_ / "frames");
  for (int i = 0; i < 5; ++i) std::ofstream(dir_ / "frames" / fmt::format("frame_{:05d}.png", i)) << "old";
  auto w = open_ok(path("frames"), 2);
  ASSERT_TRUE(w);
  for (int64_t f = 0; f < 2; ++f) ASSERT_TRUE(w->write_frame(frame(f)));
  // Until finish() the earlier output is untouched.
  EXPECT_EQ(read_text(path("frames/frame_00004.png")), "old");
  ASSERT_TRUE(w->finish());
  EXPECT_EQ(entries(), std::set<std::string>{"frames"});
  EXPECT_FALSE(fs::exists(dir_ / "frames" / "frame_00002.png"));
  EXPECT_NE(read_text(path("frames/frame_00001.png")), "old");
}

TEST_F(VideoOutputTest, PngFolderHoldingOtherFilesIsNotReplaced) {
  fs::create_directories(dir_ / "mine");
  std::ofstream(dir_ / "mine" / "notes.txt") << "keep";
  auto w = VideoWriter::open({path("mine/"), 2, kH, kW});
  ASSERT_FALSE(w.has_value());
  EXPECT_NE(w.message().find("notes.txt"), std::string::npos) << w.message();
  EXPECT_EQ(read_text(path("mine/notes.txt")), "keep");
  EXPECT_EQ(entries(), std::set<std::string>{"mine"});
}

TEST_F(VideoOutputTest, Mp4IsH264WithTheFramesAndSize) {
  if (!video_mp4_supported()) GTEST_SKIP() << "strata was built without FFmpeg";
  if (!have_program("ffprobe")) GTEST_SKIP() << "ffprobe is not installed (apt-get install ffmpeg)";
  const int64_t F = 5;
  auto w = open_ok(path("v.mp4"), F, 12.0);
  ASSERT_TRUE(w);
  for (int64_t f = 0; f < F; ++f) ASSERT_TRUE(w->write_frame(frame(f)));
  ASSERT_TRUE(w->finish());
  EXPECT_EQ(entries(), std::set<std::string>{"v.mp4"});
  // ffprobe prints the entries in its own order: codec_name,width,height,nb_read_frames.
  std::string probe = run("ffprobe -v error -count_frames -select_streams v:0 -show_entries "
                          "stream=nb_read_frames,width,height,codec_name -of csv=p=0 '" +
                          path("v.mp4") + "'");
  EXPECT_EQ(probe, fmt::format("h264,{},{},{}\n", kW, kH, F));
  std::string rate = run("ffprobe -v error -select_streams v:0 -show_entries "
                         "stream=avg_frame_rate,pix_fmt -of csv=p=0 '" + path("v.mp4") + "'");
  EXPECT_EQ(rate, "yuv420p,12/1\n");
}

// The colour conversion is BT.709 limited range, as the stream is tagged: pure red
// has luma 16 + 219 * 0.2126 = 62.6 (BT.601 would give 81.5, full range 54.2).
TEST_F(VideoOutputTest, Mp4LumaIsBt709LimitedRange) {
  if (!video_mp4_supported()) GTEST_SKIP() << "strata was built without FFmpeg";
  if (!have_program("ffmpeg")) GTEST_SKIP() << "ffmpeg is not installed (apt-get install ffmpeg)";
  auto w = open_ok(path("red.mp4"), 2);
  ASSERT_TRUE(w);
  Tensor red({3, kH, kW});
  for (int64_t i = 0; i < kH * kW; ++i) {
    red.data[size_t(i)] = 1.0f;
    red.data[size_t(kH * kW + i)] = red.data[size_t(2 * kH * kW + i)] = -1.0f;
  }
  for (int f = 0; f < 2; ++f) ASSERT_TRUE(w->write_frame(red));
  ASSERT_TRUE(w->finish());
  std::string yuv = run("ffmpeg -v error -i '" + path("red.mp4") +
                        "' -frames:v 1 -f rawvideo -pix_fmt yuv420p -");
  ASSERT_EQ(yuv.size(), size_t(kH * kW * 3 / 2));
  for (int64_t i = 0; i < kH * kW; ++i) ASSERT_NEAR(uint8_t(yuv[size_t(i)]), 62.6, 2.0) << i;
  std::string tags = run("ffprobe -v error -select_streams v:0 -show_entries "
                         "stream=color_space,color_range -of csv=p=0 '" + path("red.mp4") + "'");
  EXPECT_EQ(tags, "tv,bt709\n");
}

TEST_F(VideoOutputTest, Mp4RefusesOddSizesAndBadFps) {
  if (!video_mp4_supported()) GTEST_SKIP() << "strata was built without FFmpeg";
  auto odd = VideoWriter::open({path("v.mp4"), 2, 15, 24});
  ASSERT_FALSE(odd.has_value());
  EXPECT_NE(odd.message().find("even"), std::string::npos) << odd.message();
  auto fps = VideoWriter::open({path("v.mp4"), 2, kH, kW, 0.0});
  ASSERT_FALSE(fps.has_value());
  EXPECT_NE(fps.message().find("fps"), std::string::npos) << fps.message();
  EXPECT_TRUE(entries().empty());
}

TEST_F(VideoOutputTest, UnsupportedExtensionFailsInOpen) {
  auto w = VideoWriter::open({path("v.gif"), 2, kH, kW});
  ASSERT_FALSE(w.has_value());
  EXPECT_NE(w.message().find(".gif"), std::string::npos) << w.message();
  EXPECT_TRUE(entries().empty());
}

TEST_F(VideoOutputTest, UnwritablePathFailsInOpenNamingPathAndReason) {
  std::ofstream(dir_ / "plain") << "a regular file";
  std::vector<std::pair<std::string, std::string>> cases = {
      {"/nonexistent-dir/x.npy", "No such file or directory"},
      {"/nonexistent-dir/frames/", "No such file or directory"},
      {path("plain/x.npy"), "Not a directory"},
      {path("plain/frames/"), "Not a directory"}};
  if (video_mp4_supported()) cases.push_back({path("plain/x.mp4"), "Not a directory"});
  for (const auto& [p, reason] : cases) {
    auto w = VideoWriter::open({p, 2, kH, kW});
    ASSERT_FALSE(w.has_value()) << p;
    EXPECT_NE(w.message().find(p.back() == '/' ? p.substr(0, p.size() - 1) : p), std::string::npos)
        << w.message();
    EXPECT_NE(w.message().find(reason), std::string::npos) << w.message();
    EXPECT_EQ(w.message().find('\n'), std::string::npos) << w.message();
  }
  EXPECT_EQ(entries(), std::set<std::string>{"plain"});
}

TEST_F(VideoOutputTest, ReadOnlyDirectoryFailsInOpen) {
  if (geteuid() == 0) GTEST_SKIP() << "root can write into a read-only directory";
  fs::create_directories(dir_ / "ro");
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  auto w = VideoWriter::open({path("ro/x.npy"), 2, kH, kW});
  ASSERT_FALSE(w.has_value());
  EXPECT_NE(w.message().find("Permission denied"), std::string::npos) << w.message();
  fs::permissions(dir_ / "ro", fs::perms::owner_all);
  EXPECT_TRUE(fs::is_empty(dir_ / "ro"));
}

// For every format: destruction after 1 of 3 frames, finish() after 2 of 3, a 4th
// frame and a wrong shape each leave nothing, not even a temporary.
TEST_F(VideoOutputTest, FailedOrAbandonedWritesLeaveNothing) {
  std::vector<std::string> outs = {"v.npy", "frames/"};
  if (video_mp4_supported()) outs.push_back("v.mp4");
  for (const std::string& out : outs) {
    SCOPED_TRACE(out);
    {
      auto w = open_ok(path(out), 3);
      ASSERT_TRUE(w);
      ASSERT_TRUE(w->write_frame(frame(0)));
      EXPECT_FALSE(entries().empty());  // the temporary exists while writing
    }
    EXPECT_TRUE(entries().empty());
    {
      auto w = open_ok(path(out), 3);
      ASSERT_TRUE(w);
      for (int f = 0; f < 2; ++f) ASSERT_TRUE(w->write_frame(frame(f)));
      Status s = w->finish();
      ASSERT_FALSE(s);
      EXPECT_NE(s.message().find("only 2 of the 3"), std::string::npos) << s.message();
      EXPECT_TRUE(entries().empty());
      EXPECT_FALSE(w->finish());  // dead after an error
      EXPECT_FALSE(w->write_frame(frame(2)));
    }
    EXPECT_TRUE(entries().empty());
    {
      auto w = open_ok(path(out), 1);
      ASSERT_TRUE(w);
      ASSERT_TRUE(w->write_frame(frame(0)));
      Status s = w->write_frame(frame(1));
      ASSERT_FALSE(s);
      EXPECT_NE(s.message().find("past the 1 frames"), std::string::npos) << s.message();
      EXPECT_TRUE(entries().empty());
    }
    {
      auto w = open_ok(path(out), 2);
      ASSERT_TRUE(w);
      Status s = w->write_frame(Tensor({3, kH, kW + 2}));
      ASSERT_FALSE(s);
      EXPECT_NE(s.message().find(fmt::format("[3,{},{}]", kH, kW)), std::string::npos) << s.message();
      EXPECT_TRUE(entries().empty());
    }
  }
}

TEST_F(VideoOutputTest, PreExistingOutputSurvivesAFailedWriteAndIsReplacedOnSuccess) {
  std::vector<std::string> outs = {"v.npy"};
  if (video_mp4_supported()) outs.push_back("v.mp4");
  for (const std::string& out : outs) {
    SCOPED_TRACE(out);
    std::ofstream(path(out)) << "keep";
    {
      auto w = open_ok(path(out), 3);
      ASSERT_TRUE(w);
      ASSERT_TRUE(w->write_frame(frame(0)));
      EXPECT_FALSE(w->finish());
    }
    EXPECT_EQ(read_text(path(out)), "keep");
    EXPECT_EQ(entries(), std::set<std::string>{out});
    {
      auto w = open_ok(path(out), 1);
      ASSERT_TRUE(w);
      ASSERT_TRUE(w->write_frame(frame(0)));
      ASSERT_TRUE(w->finish());
      EXPECT_FALSE(w->finish());  // once only
    }
    EXPECT_NE(read_text(path(out)), "keep");
    EXPECT_EQ(entries(), std::set<std::string>{out});
    fs::remove(path(out));
  }
}

}  // namespace
}  // namespace strata
