// The pipeline interface (models/pipeline.h, models/video_pipeline.h): the shared
// bench loop runs W warm-ups and R timed calls and stops at the first error; the
// factory gives each video VAE family its decoder and image VAEs none; a family
// takes only its own options, and its bench latent follows its frame rule.
#include "models/minimax_decoder.h"
#include "models/pipeline.h"
#include "models/vae.h"
#include "models/video_pipeline.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(BenchRuns, WarmUpsUntimedThenTimedRunsInOrder) {
  std::vector<int64_t> ran, before;
  auto times = bench_runs(
      2, 3,
      [&](int64_t i) {
        ran.push_back(i);
        return Status::ok();
      },
      [&](int64_t i) { before.push_back(i); });
  ASSERT_TRUE(times) << times.message();
  EXPECT_EQ(times->size(), 3u);
  EXPECT_EQ(ran, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(before, ran);
  for (double ms : *times) EXPECT_GE(ms, 0.0);
}

TEST(BenchRuns, StopsAtTheFirstError) {
  int64_t calls = 0;
  auto times = bench_runs(1, 5, [&](int64_t i) {
    ++calls;
    return i == 2 ? error("run {} failed", i) : Status::ok();
  });
  ASSERT_FALSE(times);
  EXPECT_EQ(times.message(), "run 2 failed");
  EXPECT_EQ(calls, 3);
}

TEST(BenchTimes, MedianIsTheUpperMiddleOfTheSortedTimes) {
  const BenchTimes t = bench_times({5.0, 1.0, 4.0, 2.0});
  EXPECT_EQ(t.sorted, (std::vector<double>{1.0, 2.0, 4.0, 5.0}));
  EXPECT_EQ(t.median(), 4.0);
  EXPECT_EQ(t.min(), 1.0);
  EXPECT_EQ(t.count(), 4u);
}

TEST(VideoDecoderFor, OneDecoderPerVideoFamilyAndNoneForImageVaes) {
  Vae flux = seeded_vae(flux_small_config(), 0);
  EXPECT_EQ(video_decoder_for(flux), nullptr);
  Vae wan = seeded_vae(wan22_small_config(), 0), hunyuan = seeded_vae(hunyuan_small_config(), 0),
      minimax = seeded_vae(minimax_small_config(), 0);
  for (Vae* v : {&wan, &hunyuan, &minimax}) {
    auto d = video_decoder_for(*v);
    ASSERT_NE(d, nullptr) << vae_class_name(v->config);
    EXPECT_EQ(d->class_name(), vae_class_name(v->config));
  }
}

TEST(VideoDecoder, EachFamilyTakesOnlyItsOwnOptions) {
  Vae wan = seeded_vae(wan22_small_config(), 0), hunyuan = seeded_vae(hunyuan_small_config(), 0),
      minimax = seeded_vae(minimax_small_config(), 0);
  auto w = video_decoder_for(wan), h = video_decoder_for(hunyuan), m = video_decoder_for(minimax);
  EXPECT_TRUE(h->accepts_whole("--whole"));
  EXPECT_TRUE(h->accepts_slab_frames(true));
  EXPECT_FALSE(h->accepts_slab_frames(false));
  EXPECT_TRUE(m->accepts_tile_batch());
  const Status whole = w->accepts_whole("--frames whole");
  ASSERT_FALSE(whole);
  EXPECT_EQ(whole.message(), "--frames whole applies to AutoencoderKLHunyuanVideo; AutoencoderKLWan decodes frame "
                             "by frame");
  const Status tiles = h->accepts_tile_batch();
  ASSERT_FALSE(tiles);
  EXPECT_EQ(tiles.message(), "--tile-batch applies to AutoencoderKLMiniMaxH3, not AutoencoderKLHunyuanVideo");
  EXPECT_FALSE(m->accepts_whole("--whole"));
  EXPECT_FALSE(w->accepts_slab_frames(true));
  EXPECT_TRUE(m->imagenet_normalized());
  EXPECT_FALSE(w->imagenet_normalized());
}

TEST(VideoDecoder, WanBenchLatentFollowsItsFrameRule) {
  Vae wan = seeded_vae(wan22_full_config(), 0);
  auto d = video_decoder_for(wan);
  // Wan 2.2: 1 + 4(T − 1) frames of 16h x 16w.
  auto s = d->bench_latent(61, {704, 1280});
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(s->frames, 16);
  EXPECT_EQ(s->height, 44);
  EXPECT_EQ(s->width, 80);
  auto g = d->geometry(*s);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(g->frames, 61);
  EXPECT_EQ(g->scale, 16);
  auto bad = d->bench_latent(60, {704, 1280});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.message(), "--frames 60: a video VAE decodes 1 + 4·k frames (1, 5, 9, ...)");
  EXPECT_FALSE(d->bench_latent(61, {700, 1280}));
}

}  // namespace
}  // namespace strata
