// Which format an output path asks for (tools/video_output.h).
#include "tools/video_output.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace strata {

namespace fs = std::filesystem;

const char* video_format_name(VideoFormat f) {
  switch (f) {
    case VideoFormat::npy: return "npy";
    case VideoFormat::png_frames: return "png frames";
    case VideoFormat::mp4: return "mp4";
  }
  return "?";
}

bool video_mp4_supported() {
#ifdef STRATA_HAVE_FFMPEG
  return true;
#else
  return false;
#endif
}

Expected<VideoFormat> video_format_for_path(const std::string& out) {
  if (out.empty()) return error("no output path given");
  std::error_code ec;
  if (out.back() == '/' || fs::is_directory(out, ec)) return VideoFormat::png_frames;
  std::string ext = fs::path(out).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext.empty()) return VideoFormat::png_frames;
  if (ext == ".npy") return VideoFormat::npy;
  if (ext == ".mp4") {
    if (!video_mp4_supported())
      return error("cannot write '{}': strata was built without FFmpeg, so .mp4 output is not "
                   "available (install libavcodec-dev libavformat-dev libavutil-dev "
                   "libswscale-dev and rebuild), or write .npy or PNG frames to a folder",
                   out);
    return VideoFormat::mp4;
  }
  return error("cannot write video to '{}': unsupported extension '{}'; supported: .npy "
               "(float32 [3,F,H,W]), {}a folder (an existing directory, or a path ending "
               "in '/' or without extension) for PNG frames",
               out, ext, video_mp4_supported() ? ".mp4 (H.264), " : "");
}

}  // namespace strata
