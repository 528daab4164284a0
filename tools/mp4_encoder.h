// H.264 in .mp4 through FFmpeg's libraries, for VideoWriter's .mp4 output
// (tools/video_output.h): libx264 at its default quality (CRF 23, preset medium),
// yuv420p, BT.709 limited range and tagged so, frames from the diffusers pixel mapping
// of tools/png_writer.h. Built only with FFmpeg (STRATA_HAVE_FFMPEG).
#pragma once

#include "ir/status.h"
#include "ir/tensor.h"

#include <cstdint>
#include <memory>
#include <string>

namespace strata {

class Mp4Encoder {
public:
  Mp4Encoder();
  ~Mp4Encoder();

  // Sets up the muxer writing `tmp` and the encoder for width x height at `fps`
  // frames per second; errors name `out`, the file the caller renames `tmp` onto.
  Status open(const std::string& tmp, const std::string& out, int64_t width, int64_t height, double fps);
  // Frame `index`, [3, H, W] in [-1, 1].
  Status put_frame(int64_t index, const Tensor& chw);
  // Flushes the encoder's delayed frames, writes the trailer and closes the file.
  Status finish();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata
