"""strata.AutoencoderKL gives the bytes `strata decode` writes, for every VAE case:
the same decoder, options and device, the latent from numpy instead of a file."""

import numpy as np
import pytest

import strata
from conftest import ROOT, SHARED_CASES, cli_error, find_case

# Every VAE case (../shared/cases/README.md): image VAEs, then video VAEs.
VAE_CASES = ["flux_small", "qwen_small", "wan22_small", "hunyuan_small", "minimax_small"]


def case_latents():
    """(case, latent file) for every latent of every case; beyond each case's smallest
    latent they are marked slow (each shape compiles its own program)."""
    params = []
    for case in VAE_CASES:
        root = SHARED_CASES if (SHARED_CASES / case).is_dir() else ROOT / "tests" / "data" / "cases"
        files = sorted((root / case).glob("latent_*.npy"), key=lambda p: (p.stat().st_size, p.name))
        if not files:
            params.append(pytest.param(case, None, id=case))
        for i, f in enumerate(files):
            marks = [pytest.mark.slow] if i else []
            params.append(pytest.param(case, f.name, id=f"{case}-{f.stem}", marks=marks))
    return params


@pytest.mark.parametrize("case,name", case_latents())
def test_the_case_latent_gives_the_cli_bytes(case, name, cli, tmp_path):
    folder = find_case(case)
    assert name, f"{folder} has no latent_*.npy"
    out = tmp_path / "cli.npy"
    r = cli("decode", "--vae", folder / "vae", "--latent", folder / name, "--out", out, "--precision", "f16")
    assert r.returncode == 0, r.stderr
    want = np.load(out)
    latent = np.load(folder / name)
    with strata.AutoencoderKL.from_pretrained(folder / "vae", precision="f16") as vae:
        got = vae.decode(latent[None]).sample
        assert got.dtype == np.float32
        assert got.shape == (1, *want.shape)
        assert got[0].tobytes() == want.tobytes(), f"{case} {name}: differs from `strata decode`"
        # Again, through the program the model kept (a video's states reset first).
        assert vae.decode(latent).sample[0].tobytes() == want.tobytes()


def test_video_output_is_b_3_f_h_w_and_f16_batches_decode_alike(wan22):
    vae, latent, first = wan22
    assert vae.is_video and vae.class_name == "AutoencoderKLWan"
    assert first.shape == (1, 3, 9, 64, 96)
    # A batch of two f16 latents: each element as its own decode of the same values (the
    # fixture's latent holds f16 values: `first` is its f32 decode).
    z = latent.astype(np.float16)
    assert z.astype(np.float32).tobytes() == latent.tobytes()
    two = vae.decode(np.concatenate([z, z[:, :, :, ::-1]])).sample
    assert two.shape == (2, 3, 9, 64, 96)
    assert two[0].tobytes() == first[0].tobytes()
    assert two[1].tobytes() != two[0].tobytes()


def test_frames_arrive_in_order_as_they_are_decoded(wan22):
    vae, latent, first = wan22
    seen, stages = [], []
    video = vae.decode(latent, on_frame=lambda i, f: seen.append((i, f.copy())),
                       callback=lambda s, d, t: stages.append((s, d, t))).sample
    assert video.tobytes() == first.tobytes()
    assert [i for i, _ in seen] == list(range(video.shape[2]))
    for i, frame in seen:
        assert frame.tobytes() == np.ascontiguousarray(video[0, :, i]).tobytes()
    assert ("decoding frames", video.shape[2], video.shape[2]) in stages


def test_a_missing_directory_raises_the_cli_message(cli, tmp_path):
    missing = tmp_path / "no_such_vae"
    r = cli("decode", "--vae", missing, "--latent", tmp_path / "z.npy", "--out", tmp_path / "x.npy")
    message = cli_error(r)
    with pytest.raises(strata.StrataError) as e:
        strata.AutoencoderKL.from_pretrained(missing)
    assert str(e.value) == message
    assert isinstance(e.value, RuntimeError)


def test_a_wrong_latent_raises_the_cli_message(cli, tmp_path):
    folder = find_case("flux_small")
    bad = np.zeros((4, 8, 8), np.float32)  # the VAE takes 16 channels
    np.save(tmp_path / "bad.npy", bad)
    message = cli_error(cli("decode", "--vae", folder / "vae", "--latent", tmp_path / "bad.npy", "--out",
                            tmp_path / "x.npy"))
    with strata.AutoencoderKL.from_pretrained(folder / "vae", precision="f32") as vae:
        with pytest.raises(strata.StrataError) as e:
            vae.decode(bad[None])
        # The CLI names the file it read first ("decoding 'bad.npy': ...").
        assert message == f"decoding '{tmp_path / 'bad.npy'}': {e.value}"
        # Still usable after the error.
        assert vae.decode(np.ones((16, 1, 1), np.float32)).sample.shape == (1, 3, 8, 8)


def test_a_closed_model_raises():
    vae = strata.AutoencoderKL.from_pretrained(find_case("flux_small") / "vae")
    vae.close()
    with pytest.raises(strata.StrataError, match="closed"):
        vae.decode(np.zeros((1, 16, 8, 8), np.float32))


def test_a_non_finite_latent_is_refused_unless_allowed():
    latent = np.ones((1, 16, 1, 1), np.float32)
    latent[0, 3, 0, 0] = np.nan
    with strata.AutoencoderKL.from_pretrained(find_case("flux_small") / "vae", precision="f32") as vae:
        with pytest.raises(strata.StrataError, match=r"non-finite value \(nan\) at index 3"):
            vae.decode(latent)
        assert vae.decode(latent, allow_nonfinite=True).sample.shape == (1, 3, 8, 8)
