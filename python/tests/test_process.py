"""strata inside a Python process: Ctrl-C and exceptions from callbacks stop a long
decode and leave the process usable; device memory is freed on close, on `with` and on
collection; the device list; a NumPy without numpy.core.multiarray."""

import gc
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import strata


def test_devices_lists_the_selected_device():
    devices = strata.devices()
    assert devices, "no Vulkan device"
    assert sum(d["selected"] for d in devices) == 1
    assert all(isinstance(d["name"], str) and d["name"] for d in devices)


def test_keyboard_interrupt_from_the_callback_stops_the_decode_and_the_next_works(wan22):
    vae, latent, want = wan22
    frames = []

    def stop_at_third_frame(stage, done, total):
        frames.append(done)
        if stage == "decoding frames" and done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # 9 output frames: stopped at the third
        vae.decode(latent, callback=stop_at_third_frame)
    assert max(frames) == 3  # nothing ran after the interrupt
    assert vae.decode(latent).sample.tobytes() == want.tobytes()


def test_sigint_during_a_decode_raises_keyboard_interrupt_and_the_next_works(wan22):
    vae, latent, want = wan22
    first, sent = threading.Event(), threading.Event()

    def kill():  # Ctrl-C, from another thread while the main thread decodes
        first.wait()
        os.kill(os.getpid(), signal.SIGINT)
        sent.set()

    def wait_for_the_signal(stage, done, total):
        if stage == "decoding frames" and done >= 1:
            first.set()
            sent.wait(10)

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            vae.decode(latent, callback=wait_for_the_signal)
    finally:
        first.set()
        killer.join()
    assert vae.decode(latent).sample.tobytes() == want.tobytes()


def test_an_exception_in_on_frame_propagates(wan22):
    vae, latent, _ = wan22

    def fail(index, frame):
        raise ValueError(f"frame {index}")

    with pytest.raises(ValueError, match="frame 0"):
        vae.decode(latent, on_frame=fail)


def test_100_create_decode_close_cycles_leak_no_device_memory(tiny_vae):
    # Each cycle creates a model (its own device, buffers and pipelines), uploads the
    # weights, decodes and closes; the plan comes from the cache the first decode fills.
    # The allocator's counter is exact: a byte left over by any cycle fails.
    latent = np.ones((1, 4, 1, 1), np.float32)
    # One model stays open throughout, as in a process that keeps one loaded. It also
    # keeps the Vulkan loader from unloading the drivers' libraries when a cycle's device
    # goes, and loading and relocating all of them again for the next: most of a cycle's
    # time on lavapipe otherwise.
    with strata.AutoencoderKL.from_pretrained(tiny_vae, precision="f32") as kept:
        want = kept.decode(latent).sample
        before = strata.device_memory_stats()["current"]
        for cycle in range(100):
            vae = strata.AutoencoderKL.from_pretrained(tiny_vae, precision="f32")
            assert vae.decode(latent).sample.tobytes() == want.tobytes(), f"cycle {cycle}"
            assert strata.device_memory_stats()["current"] > before, f"cycle {cycle}: the decode held no device memory"
            vae.close()
            assert strata.device_memory_stats()["current"] == before, f"cycle {cycle} leaked"
        # Closing the others left the kept model's programs alone.
        assert kept.decode(latent).sample.tobytes() == want.tobytes()


def test_collection_and_with_free_device_memory(tiny_vae):
    latent = np.ones((1, 4, 1, 1), np.float32)
    before = strata.device_memory_stats()["current"]
    vae = strata.AutoencoderKL.from_pretrained(tiny_vae, precision="f32")
    vae.decode(latent)
    assert strata.device_memory_stats()["current"] > before
    del vae
    gc.collect()
    assert strata.device_memory_stats()["current"] == before
    with strata.AutoencoderKL.from_pretrained(tiny_vae, precision="f32") as vae:
        vae.decode(latent)
        assert strata.device_memory_stats()["current"] > before
    assert strata.device_memory_stats()["current"] == before


def test_a_numpy_without_numpy_core_multiarray_decodes(tiny_vae):
    # NumPy 2 keeps numpy.core.multiarray, where pybind11 2.10 looks for numpy's C API,
    # only as a deprecated alias of numpy._core.multiarray. Here NumPy 1 is made to look
    # like a NumPy without the alias, in a fresh process (the binding looks once).
    script = f"""
import importlib.abc, sys
import numpy
sys.modules["numpy._core.multiarray"] = sys.modules.pop("numpy.core.multiarray")

class NoAlias(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "numpy.core.multiarray":
            raise ImportError("no module named " + name)

sys.meta_path.insert(0, NoAlias())
import strata
with strata.AutoencoderKL.from_pretrained({str(tiny_vae)!r}, precision="f32") as vae:
    print(vae.decode(numpy.ones((4, 1, 1), numpy.float32)).sample.shape)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "(1, 3, 1, 1)"


def test_arrays_of_earlier_decodes_keep_their_values_through_later_decodes_and_close(tiny_vae):
    # An image's array is made over the memory the device copied it into, without a
    # copy; that memory must stay the array's through the model's later decodes and
    # after the model is closed.
    # 2 x 2 latents: on 1 x 1 the group norms (one channel per group) zero any latent.
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((1, 4, 2, 2)).astype(np.float32) for _ in range(2))
    vae = strata.AutoencoderKL.from_pretrained(tiny_vae, precision="f32")
    first = vae.decode(a).sample
    kept = first.copy()
    second = vae.decode(b).sample
    again = vae.decode(a).sample
    assert first.tobytes() != second.tobytes()
    assert first.tobytes() == kept.tobytes() == again.tobytes()
    vae.close()
    del vae
    gc.collect()
    assert first.tobytes() == kept.tobytes()
    assert second.tobytes() != kept.tobytes()
