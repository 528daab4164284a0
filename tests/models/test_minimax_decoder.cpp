// The MiniMax-H3 decoder (models/minimax_decoder.h) against diffusers on the CPU: the
// clip and tile schedule equals each case JSON's "geometry" (diffusers' own numbers),
// the program interpreter's decode of both minimax_small latents (one tile and one
// clip; two clips of two tiles across) matches diffusers' float64 decode within 1e-4,
// and the latent diffusers cannot decode (probe_2x4x6.json) is one error naming the
// shortest length that decodes.
#include "ir/npy.h"
#include "ir/program_interpreter.h"
#include "models/minimax_decoder.h"
#include "models/vae.h"
#include "models/weights.h"
#include "tests/cases.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

namespace strata {
namespace {

using json = nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f, nullptr, false);
}

std::vector<int64_t> ints(const json& j) { return j.get<std::vector<int64_t>>(); }

// Decodes a video latent with the interpreter, as the CLI does, `tile_batch` tiles per
// run (0: all tiles of a clip).
Expected<Tensor> interpret_video(Vae& vae, const Tensor& latent, int64_t tile_batch = 0) {
  const auto& config = std::get<MiniMaxVaeConfig>(vae.config);
  STRATA_ASSIGN_OR_RETURN(VideoLatentShape s, check_video_latent_shape(vae.config, latent.shape));
  STRATA_ASSIGN_OR_RETURN(MiniMaxGeometry g, minimax_geometry(config, s.frames, s.height, s.width));
  ModelWeights weights(vae.weights);
  STRATA_ASSIGN_OR_RETURN(ProgramGraph program, build_minimax_program(config, weights, s.frames, s.height, s.width,
                                                                          DType::f32, tile_batch));
  STRATA_ASSIGN_OR_RETURN(ProgramInterpreter pi, ProgramInterpreter::create(std::move(program), vae.weights));
  Tensor video({3, g.output_frames, s.height * 16, s.width * 16});
  STRATA_RETURN_IF_ERROR(decode_minimax_video(
      config, latent, [&](const std::string& plan, const std::vector<Tensor>& in) { return pi.run(plan, in); },
      [&](int64_t index, const Tensor& frame) {
        Tensor one = frame;
        one.shape.insert(one.shape.begin(), 1);
        return place_frames(video, one, index);
      },
      tile_batch));
  return video;
}

TEST(MiniMaxConfig, ReadsTheCaseConfig) {
  STRATA_REQUIRE_CASE("minimax_small");
  auto config = read_vae_config(test_cases::case_file("minimax_small", "vae/config.json"));
  ASSERT_TRUE(config) << config.message();
  ASSERT_TRUE(std::holds_alternative<MiniMaxVaeConfig>(*config));
  const auto& c = std::get<MiniMaxVaeConfig>(*config);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.latents_std[1], 1.3926);
  const MiniMaxDims d = minimax_dims(c);
  EXPECT_EQ(d.patch, 16);
  EXPECT_EQ(d.patch_t, 4);
  EXPECT_EQ(d.rope_dim, 48);
  EXPECT_TRUE(is_video_vae(*config));
}

class MiniMaxCase : public ::testing::TestWithParam<std::string> {};

TEST_P(MiniMaxCase, GeometryEqualsDiffusers) {
  STRATA_REQUIRE_CASE("minimax_small");
  const json j = read_json(test_cases::case_file("minimax_small", "case_" + GetParam() + ".json"));
  ASSERT_FALSE(j.is_discarded());
  const auto& geo = j["decode_path"]["geometry"];
  const auto& tiles = geo["tiles"];
  const std::vector<int64_t> shape = ints(j["latent_shape"]);
  const MiniMaxVaeConfig c = minimax_small_config();
  const MiniMaxDims d = minimax_dims(c);
  EXPECT_EQ(d.frame_pre_padding, geo["frame_pre_padding"].get<int64_t>());
  EXPECT_EQ(d.tokens_chunk_size, geo["tokens_chunk_size"].get<int64_t>());
  EXPECT_EQ(d.token_overlap, geo["token_overlap"].get<int64_t>());
  EXPECT_EQ(d.frame_overlap, geo["frame_overlap"].get<int64_t>());
  auto g = minimax_geometry(c, shape[1], shape[2], shape[3]);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(g->pad_tokens, geo["pad_tokens"].get<int64_t>());
  EXPECT_EQ(g->num_chunks, geo["num_chunks"].get<int64_t>());
  std::vector<std::vector<int64_t>> clips;
  for (auto [a, e] : g->clips) clips.push_back({a, e});
  EXPECT_EQ(clips, geo["clips_latent_frames"].get<std::vector<std::vector<int64_t>>>());
  EXPECT_EQ(g->ty.starts, ints(tiles["y_starts_px"]));
  EXPECT_EQ(g->ty.lengths, ints(tiles["y_lengths_px"]));
  EXPECT_EQ(g->ty.overlaps, ints(tiles["y_overlaps_px"]));
  EXPECT_EQ(g->tx.starts, ints(tiles["x_starts_px"]));
  EXPECT_EQ(g->tx.lengths, ints(tiles["x_lengths_px"]));
  EXPECT_EQ(g->tx.overlaps, ints(tiles["x_overlaps_px"]));
  EXPECT_EQ(g->tiles(), j["decode_path"]["decoder_calls"].get<int64_t>() / g->num_chunks);
  const std::vector<int64_t> call = ints(j["decode_path"]["decoder_call_input_shapes"][0]);
  EXPECT_EQ((std::vector<int64_t>{g->clip_frames, g->tile_h, g->tile_w}), (std::vector<int64_t>{call[2], call[3], call[4]}));
  EXPECT_EQ(g->output_frames, ints(j["output_shape"])[1]);
}

TEST_P(MiniMaxCase, InterpreterMatchesDiffusersWithin1e4) {
  STRATA_REQUIRE_CASE("minimax_small");
  auto vae = load_vae_dir(test_cases::case_file("minimax_small", "vae"));
  ASSERT_TRUE(vae) << vae.message();
  auto latent = read_npy(test_cases::case_file("minimax_small", "latent_" + GetParam() + ".npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("minimax_small", "expected_" + GetParam() + ".npy"));
  ASSERT_TRUE(expected) << expected.message();
  auto video = interpret_video(*vae, *latent);
  ASSERT_TRUE(video) << video.message();
  ASSERT_EQ(video->shape, expected->shape);
  EXPECT_LE(max_abs_diff(*video, *expected), 1e-4);
}

// The 12x2x24 case's two tiles one per run (a plan of one tile) give what one run of
// both gives: a tile attends only within itself, batched or not.
TEST(MiniMaxTiles, OneTilePerRunEqualsBatchedTiles) {
  STRATA_REQUIRE_CASE("minimax_small");
  auto vae = load_vae_dir(test_cases::case_file("minimax_small", "vae"));
  ASSERT_TRUE(vae) << vae.message();
  auto latent = read_npy(test_cases::case_file("minimax_small", "latent_12x2x24.npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto batched = interpret_video(*vae, *latent);
  ASSERT_TRUE(batched) << batched.message();
  auto single = interpret_video(*vae, *latent, 1);
  ASSERT_TRUE(single) << single.message();
  EXPECT_EQ(single->data, batched->data);
  EXPECT_EQ(minimax_tile_batch(28, 0), 28);
  EXPECT_EQ(minimax_tile_batch(28, 8), 7);  // the largest divisor: every run one plan
  EXPECT_EQ(minimax_tile_batch(13, 8), 1);
  EXPECT_EQ(minimax_tile_batch(2, 5), 2);
}

// Tile stitching over 2 × 2 tiles (no case covers tiles above each other): 384 px is
// two 256 px tiles overlapping 128 px. A stub decoder makes tile (i, j) the constant
// c[i][j]; diffusers blends a tile with the raw tile above, then the *raw* tile to its
// left (not the left tile's blended rows), then crops.
TEST(MiniMaxTiles, BlendAboveThenRawLeft) {
  const MiniMaxVaeConfig c = minimax_small_config();
  auto g = minimax_geometry(c, 7, 24, 24);
  ASSERT_TRUE(g) << g.message();
  ASSERT_EQ(g->ty.overlaps, (std::vector<int64_t>{128}));
  ASSERT_EQ(g->tx.overlaps, (std::vector<int64_t>{128}));
  const double tile_value[4] = {1.0, 2.0, 4.0, 8.0};  // (0,0), (0,1), (1,0), (1,1)
  int runs = 0;
  auto stub = [&](const std::string&, const std::vector<Tensor>& in) -> Expected<std::vector<Tensor>> {
    ++runs;
    const int64_t b = in[0].shape[0];
    Tensor out({b, 3, 28, 256, 256});
    const size_t per = out.data.size() / static_cast<size_t>(b);
    for (int64_t t = 0; t < b; ++t)
      std::fill_n(out.data.begin() + static_cast<ptrdiff_t>(per * t), per, static_cast<float>(tile_value[t]));
    std::vector<Tensor> result;  // (a braced list would copy the 88 MB)
    result.push_back(std::move(out));
    return result;
  };
  Tensor frame0;
  int64_t frames = 0;
  Status s = decode_minimax_video(c, Tensor({24, 7, 24, 24}), stub, [&](int64_t index, const Tensor& f) {
    if (index == 0) frame0 = f;
    ++frames;
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(runs, 1);  // 4 tiles in one run
  EXPECT_EQ(frames, 22);
  ASSERT_EQ(frame0.shape, (Shape{3, 384, 384}));
  auto px = [&](int64_t y, int64_t x) { return static_cast<double>(frame0.data[static_cast<size_t>(y * 384 + x)]); };
  EXPECT_EQ(px(0, 0), 1.0);
  EXPECT_EQ(px(0, 127), 1.0);
  EXPECT_EQ(px(0, 128), 1.0);            // x = 0 of tile (0,1): all left tile
  EXPECT_DOUBLE_EQ(px(0, 192), 1.5);     // x = 64: (1 + 2) / 2
  EXPECT_EQ(px(0, 383), 2.0);
  EXPECT_DOUBLE_EQ(px(192, 0), 2.5);     // y = 64 of tile (1,0): (1 + 4) / 2
  // Tile (1,1) at y = x = 64: above-blend (2 + 8) / 2 = 5, then with the raw left tile
  // (4, not its blended 2.5): (4 + 5) / 2.
  EXPECT_DOUBLE_EQ(px(192, 192), 4.5);
  EXPECT_EQ(px(383, 383), 8.0);
}

// The stitching against a serial one written from diffusers' code, bit for bit: two
// clips of 2 × 2 tiles (two runs of two tiles each) whose values are a hash of (clip,
// tile, channel, frame, row, column). Each frame: every tile blended with the raw tile
// above, then the raw tile to its left, in f64, cropped; the first frames of each
// clip cross-faded with the previous clip's last chunk; that chunk of the last clip
// appended. (The decoder stitches frames in parallel, row by row: their bits must not
// depend on it.)
TEST(MiniMaxTiles, StitchedFramesAreTheSerialBlendBitForBit) {
  const MiniMaxVaeConfig c = minimax_small_config();
  const MiniMaxDims d = minimax_dims(c);
  auto g = minimax_geometry(c, 12, 24, 24);
  ASSERT_TRUE(g) << g.message();
  ASSERT_EQ(g->clips.size(), 2u);
  ASSERT_EQ(g->tiles(), 4);
  const int64_t clip_out = g->clip_frames * d.patch_t, th = g->tile_h * d.patch, tw = g->tile_w * d.patch;
  auto value = [](int64_t clip, int64_t tile, int64_t ch, int64_t f, int64_t y, int64_t x) {
    uint64_t z = ((((static_cast<uint64_t>(clip) * 8 + tile) * 4 + ch) * 64 + f) * 512 + y) * 512 + x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<float>(static_cast<double>((z ^ (z >> 31)) >> 40) / double(1ull << 23) - 1.0);
  };
  int runs = 0;
  auto stub = [&](const std::string&, const std::vector<Tensor>& in) -> Expected<std::vector<Tensor>> {
    const int64_t b = in[0].shape[0], clip = runs / 2, first_tile = (runs % 2) * b;
    ++runs;
    Tensor out({b, 3, clip_out, th, tw});
    size_t k = 0;
    for (int64_t t = 0; t < b; ++t)
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t f = 0; f < clip_out; ++f)
          for (int64_t y = 0; y < th; ++y)
            for (int64_t x = 0; x < tw; ++x) out.data[k++] = value(clip, first_tile + t, ch, f, y, x);
    std::vector<Tensor> result;
    result.push_back(std::move(out));
    return result;
  };
  std::vector<Tensor> got;
  Status s = decode_minimax_video(c, Tensor({24, 12, 24, 24}), stub, [&](int64_t index, const Tensor& f) {
    EXPECT_EQ(index, static_cast<int64_t>(got.size()));
    got.push_back(f);
    return Status::ok();
  }, 2);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_EQ(runs, 4);

  // The serial reference.
  const int64_t rows = 2, cols = 2, chunk = d.tokens_chunk_size * d.patch_t;
  auto kept = [](const TileSplit& t, int64_t i) {
    return t.lengths[static_cast<size_t>(i)] - (i + 1 < static_cast<int64_t>(t.starts.size()) ? t.overlaps[static_cast<size_t>(i)] : 0);
  };
  const int64_t height = kept(g->ty, 0) + kept(g->ty, 1), width = kept(g->tx, 0) + kept(g->tx, 1);
  auto frame = [&](int64_t clip, int64_t f) {
    std::vector<double> img(static_cast<size_t>(3 * height * width));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t ny = i > 0 ? std::min(th, g->ty.overlaps[0]) : 0, nx = j > 0 ? std::min(tw, g->tx.overlaps[0]) : 0;
        const int64_t y0 = i > 0 ? kept(g->ty, 0) : 0, x0 = j > 0 ? kept(g->tx, 0) : 0;
        for (int64_t ch = 0; ch < 3; ++ch)
          for (int64_t y = 0; y < kept(g->ty, i); ++y)
            for (int64_t x = 0; x < kept(g->tx, j); ++x) {
              double v = value(clip, i * cols + j, ch, f, y, x);
              if (y < ny) {
                const double wb = static_cast<double>(y) / static_cast<double>(ny);
                v = double(value(clip, (i - 1) * cols + j, ch, f, th - ny + y, x)) * (1.0 - wb) + v * wb;
              }
              if (x < nx) {
                const double wb = static_cast<double>(x) / static_cast<double>(nx);
                v = double(value(clip, i * cols + j - 1, ch, f, y, tw - nx + x)) * (1.0 - wb) + v * wb;
              }
              img[static_cast<size_t>((ch * height + y0 + y) * width + x0 + x)] = v;
            }
      }
    return img;
  };
  std::vector<std::vector<double>> want, tail;
  for (int64_t clip = 0; clip < 2; ++clip) {
    const int64_t a0 = d.frame_pre_padding, e0 = std::min(clip_out, chunk);
    const int64_t blend = std::min({d.frame_overlap, static_cast<int64_t>(tail.size()), e0 - a0});
    for (int64_t f = a0; f < e0; ++f) {
      std::vector<double> img = frame(clip, f);
      const int64_t x = f - a0;
      if (x < blend) {
        const std::vector<double>& prev = tail[tail.size() - static_cast<size_t>(blend - x)];
        const double wb = static_cast<double>(x) / static_cast<double>(blend);
        for (size_t q = 0; q < img.size(); ++q) img[q] = prev[q] * (1.0 - wb) + img[q] * wb;
      }
      want.push_back(std::move(img));
    }
    tail.clear();
    for (int64_t f = std::min(chunk + d.frame_pre_padding, clip_out); f < std::min(clip_out, 2 * chunk); ++f)
      tail.push_back(frame(clip, f));
  }
  for (auto& f : tail) want.push_back(std::move(f));
  want.resize(static_cast<size_t>(g->output_frames));
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(got[k].shape, (Shape{3, height, width}));
    size_t bad = 0;
    for (size_t q = 0; q < want[k].size(); ++q) bad += got[k].data[q] != static_cast<float>(want[k][q]);
    EXPECT_EQ(bad, 0u) << "frame " << k;
  }
}

// Clip k's frames are stitched and handed to the sink while clip k + 1 runs: the sink
// of clip 0's first frame waits (up to 10 s) for the second run to start. A decode that
// stitched before running the next clip would time out here.
TEST(MiniMaxTiles, StitchingOverlapsTheNextClipsRun) {
  const MiniMaxVaeConfig c = minimax_small_config();
  auto g = minimax_geometry(c, 12, 4, 6);  // two clips of one 64 × 96 px tile
  ASSERT_TRUE(g) << g.message();
  ASSERT_EQ(g->clips.size(), 2u);
  std::mutex mu;
  std::condition_variable cv;
  int runs = 0;
  auto stub = [&](const std::string&, const std::vector<Tensor>& in) -> Expected<std::vector<Tensor>> {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++runs;
    }
    cv.notify_all();
    std::vector<Tensor> result;
    result.push_back(Tensor({in[0].shape[0], 3, 28, 64, 96}));
    return result;
  };
  bool second_run_seen_by_sink = false;
  int64_t frames = 0;
  Status s = decode_minimax_video(c, Tensor({24, 12, 4, 6}), stub, [&](int64_t index, const Tensor&) {
    if (index == 0) {
      std::unique_lock<std::mutex> lock(mu);
      second_run_seen_by_sink = cv.wait_for(lock, std::chrono::seconds(10), [&] { return runs >= 2; });
    }
    ++frames;
    return Status::ok();
  });
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(frames, g->output_frames);
  EXPECT_TRUE(second_run_seen_by_sink) << "clip 1 did not run while clip 0 was being stitched";
}

// A run that fails after an earlier clip was handed to the stitcher: the error names
// the failing clip, and every frame of the earlier clip's first chunk reached the sink
// (the stitching finished before the decode returned).
TEST(MiniMaxTiles, AFailingRunWaitsForTheStitchingBeforeItReturns) {
  const MiniMaxVaeConfig c = minimax_small_config();
  int runs = 0;
  auto stub = [&](const std::string&, const std::vector<Tensor>& in) -> Expected<std::vector<Tensor>> {
    if (++runs == 2) return error("device lost");
    std::vector<Tensor> result;
    result.push_back(Tensor({in[0].shape[0], 3, 28, 64, 96}));
    return result;
  };
  std::atomic<int64_t> frames{0};
  Status s = decode_minimax_video(c, Tensor({24, 12, 4, 6}), stub, [&](int64_t, const Tensor&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a slow writer
    ++frames;
    return Status::ok();
  });
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("device lost"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("decoding clip 1"), std::string::npos) << s.message();
  EXPECT_EQ(frames.load(), 17);  // clip 0's chunk 0; its chunk 1 is the tail clip 1 would fade from
}

// Weights are looked up by diffusers' names and checked against the config's shapes.
TEST(MiniMaxWeights, MissingAndMisShapedTensorsAreErrorsNamingThem) {
  STRATA_REQUIRE_CASE("minimax_small");
  WeightStore empty;
  ModelWeights none(empty);
  auto missing = build_minimax_program(minimax_small_config(), none, 7, 4, 6);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("post_quant_conv.weight"), std::string::npos) << missing.message();

  auto vae = load_vae_dir(test_cases::case_file("minimax_small", "vae"));
  ASSERT_TRUE(vae) << vae.message();
  MiniMaxVaeConfig wide = std::get<MiniMaxVaeConfig>(vae->config);
  wide.num_heads = 4;  // dim 256: the case's 128-wide tensors do not fit
  ModelWeights weights(vae->weights);
  auto bad = build_minimax_program(wide, weights, 7, 4, 6);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("decoder.proj_in.weight"), std::string::npos) << bad.message();
}

INSTANTIATE_TEST_SUITE_P(SharedCases, MiniMaxCase, ::testing::Values("7x4x6", "12x2x24"));

// _split_tiles by hand for 720 px: 3 tiles of 256 cannot keep 64 px overlaps, 4 can
// with 112 px to spare, spread round-robin in 16 px steps (7 steps: +48, +32, +32).
TEST(MiniMaxTiles, SpreadTheSlackRoundRobin) {
  const TileSplit s = minimax_split_tiles(720, 256, 64, 16);
  EXPECT_EQ(s.overlaps, (std::vector<int64_t>{112, 96, 96}));
  EXPECT_EQ(s.starts, (std::vector<int64_t>{0, 144, 304, 464}));
  EXPECT_EQ(s.lengths, (std::vector<int64_t>{256, 256, 256, 256}));
  const TileSplit one = minimax_split_tiles(256, 256, 64, 16);
  EXPECT_EQ(one.starts, (std::vector<int64_t>{0}));
  EXPECT_EQ(one.lengths, (std::vector<int64_t>{256}));
  EXPECT_TRUE(one.overlaps.empty());
}

// 17n + 5 video frames have 5n + 2 latent frames; a latent that is not of that form is
// padded by repeating its last frame and the extra frames are cut: 3 latent frames
// (pad 4) give one clip and 17 + 5 − (1 + 4 + 4 + 4) = 9 frames.
TEST(MiniMaxGeometry, PadsShortLatentsAndCutsTheirFrames) {
  const MiniMaxVaeConfig c = minimax_small_config();
  auto g = minimax_geometry(c, 3, 4, 6);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(g->pad_tokens, 4);
  EXPECT_EQ(g->num_chunks, 1);
  EXPECT_EQ(g->output_frames, 9);
  auto g17 = minimax_geometry(c, 17, 4, 6);  // 5·3 + 2: three clips, no padding
  ASSERT_TRUE(g17) << g17.message();
  EXPECT_EQ(g17->pad_tokens, 0);
  EXPECT_EQ(g17->output_frames, 17 * 3 + 5);
}

TEST(MiniMaxGeometry, TooShortLatentIsOneErrorNamingTheShortestLength) {
  STRATA_REQUIRE_CASE("minimax_small");
  const json probe = read_json(test_cases::case_file("minimax_small", "probe_2x4x6.json"));
  ASSERT_FALSE(probe.is_discarded());
  ASSERT_FALSE(probe["ok"].get<bool>());  // diffusers fails on it
  const std::vector<int64_t> shape = ints(probe["latent_shape"]);
  auto g = minimax_geometry(minimax_small_config(), shape[1], shape[2], shape[3]);
  ASSERT_FALSE(g);
  EXPECT_NE(g.message().find("at least 3 latent frames"), std::string::npos) << g.message();
  // The decode reports it before running anything.
  Tensor latent({shape[0], shape[1], shape[2], shape[3]});
  bool ran = false;
  Status s = decode_minimax_video(
      minimax_small_config(), latent,
      [&](const std::string&, const std::vector<Tensor>&) -> Expected<std::vector<Tensor>> {
        ran = true;
        return std::vector<Tensor>{};
      },
      [](int64_t, const Tensor&) { return Status::ok(); });
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("at least 3 latent frames"), std::string::npos) << s.message();
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace strata
