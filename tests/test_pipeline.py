"""The image pipeline of the real datasets: batched colour operations against torchvision and PIL,
the authors' crop geometry, whole-image canvases for file-backed images, determinism, and the
decoding that feeds a bank one batch ahead."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchvision.transforms.v2.functional as TF
from PIL import Image, ImageOps

from bench.data import DatasetError, ImageSet
from bench.data import decode as D
from bench.features import augment as A
from bench.features.augment import get_policy, random_shift
from bench.data.files import decode


def images(n: int = 6, h: int = 20, w: int = 20, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 3, h, w, generator=torch.Generator().manual_seed(seed))


def pil(x: torch.Tensor) -> Image.Image:
    return Image.fromarray(x.permute(1, 2, 0).numpy())


def from_pil(img: Image.Image) -> torch.Tensor:
    return torch.from_numpy(np.array(img)).permute(2, 0, 1).float() / 255


@pytest.mark.parametrize("op, reference, factors", [
    (A.brightness, TF.adjust_brightness, [0.6, 0.9, 1.0, 1.2, 1.4, 0.0]),
    (A.contrast, TF.adjust_contrast, [0.6, 0.9, 1.0, 1.2, 1.4, 0.0]),
    (A.saturation, TF.adjust_saturation, [0.6, 0.9, 1.0, 1.2, 1.4, 0.0]),
    (A.hue, TF.adjust_hue, [-0.1, -0.05, 0.0, 0.03, 0.1, 0.5]),
])
def test_batched_jitter_operations_equal_torchvision_per_image(op, reference, factors):
    x = images()
    out = op(x.clone(), torch.tensor(factors))
    expected = torch.stack([reference(x[i], f) for i, f in enumerate(factors)])
    assert torch.allclose(out, expected, atol=1e-5)


def test_grayscale_solarize_and_equalize_equal_torchvision_and_pil():
    x = images()
    assert torch.allclose(A.grayscale(x), TF.rgb_to_grayscale(x, num_output_channels=3), atol=1e-6)
    u = (x * 255).round().to(torch.uint8)
    q = u.float() / 255
    thresholds = [0.0, 50.0, 127.5, 128.0, 200.0, 255.9]  # the authors draw U[0, 256) on 0..255 pixels
    solarized = A.solarize(q, torch.tensor(thresholds) / 255)
    expected = torch.stack([from_pil(ImageOps.solarize(pil(u[i]), t)) for i, t in enumerate(thresholds)])
    assert torch.allclose(solarized, expected, atol=1e-6)
    expected = torch.stack([from_pil(ImageOps.equalize(pil(u[i]))) for i in range(len(u))])
    assert torch.equal(A.equalize(q), expected)


def test_blur_with_a_sigma_per_image_equals_torchvision_away_from_the_border():
    x = images(4, 24, 24)
    sigmas = [0.3, 0.8, 1.5, 2.0]
    out = A.gaussian_blur(x.clone(), torch.tensor(sigmas))
    for i, s in enumerate(sigmas):
        expected = TF.gaussian_blur(x[i], [13, 13], [s, s])
        assert torch.allclose(out[i, :, 6:-6, 6:-6], expected[:, 6:-6, 6:-6], atol=1e-5)


def authors_frame(x: torch.Tensor, frame: int = 256) -> torch.Tensor:
    """The authors' Resize(256) (bicubic) of a float image batch."""
    return TF.resize(x, [frame], interpolation=TF.InterpolationMode.BICUBIC, antialias=True).clamp(0, 1)


def smooth(h: int, w: int, seed: int = 0) -> torch.Tensor:
    return F.interpolate(images(1, 6, 6, seed), size=(h, w), mode="bilinear", align_corners=False)


def test_one_resampling_matches_the_authors_resize_then_crop():
    x = smooth(32, 48)  # 2:3, so the frame is 256×384
    sizes = torch.tensor([[32, 48]])
    fh, fw = torch.tensor([256.0]), torch.tensor([384.0])
    frame = authors_frame(x)
    assert frame.shape[-2:] == (256, 384)
    one = torch.tensor([1.0])
    # RandomCrop(224, padding=16) at offset (0, 116) of the padded image: 16 zero rows on top
    out = A.resample(x, sizes, 224, -16 * one, 100 * one, 224 * one, 224 * one, fh, fw, torch.tensor([False]))
    expected = F.pad(frame, (16, 16, 16, 16))[..., 0:224, 116:340]
    assert out[..., :16, :].abs().max() == 0
    assert (out - expected).abs().mean() < 0.005 and (out - expected).abs().max() < 0.03
    # RandomResizedCrop window, flipped: the authors resize the window bilinearly to 224
    out = A.resample(x, sizes, 224, 30 * one, 50 * one, 180 * one, 220 * one, fh, fw, torch.tensor([True]))
    expected = TF.resized_crop(frame, 30, 50, 180, 220, [224, 224], antialias=True).flip(-1)
    assert (out - expected).abs().mean() < 0.005 and (out - expected).abs().max() < 0.03


def test_crop_windows_follow_the_authors_random_crop_and_random_resized_crop():
    n = 4000
    sizes = torch.tensor([[375, 500]]).expand(n, 2)  # CUB-like 4:3, frame 256×341
    top, left, height, width, fh, fw, flip = A.crop_windows(sizes, 224, torch.Generator().manual_seed(1))
    assert fh.unique().tolist() == [256.0] and fw.unique().tolist() == [341.0]  # int(256·500/375)
    padded = (height == 224) & (width == 224)  # RandomCrop's windows (a RandomResizedCrop one rarely is)
    assert 0.45 < float(padded.float().mean()) < 0.55 and 0.45 < float(flip.float().mean()) < 0.55
    # RandomCrop(224, padding=16): offsets in [-16, dim + 16 - 224], all of them reached
    assert top[padded].min() == -16 and top[padded].max() == 256 + 16 - 224
    assert left[padded].min() == -16 and left[padded].max() == 341 + 16 - 224
    # RandomResizedCrop(224, scale=(0.5, 1)): 50-100% of the frame's area, ratio 3/4-4/3, inside it
    area, ratio = (height * width / (256 * 341))[~padded], (width / height)[~padded]
    assert area.min() > 0.49 and area.max() <= 1.0 and ratio.min() > 0.74 and ratio.max() < 1.34
    assert (top[~padded] >= 0).all() and (top + height <= 256)[~padded].all() and (left + width <= 341)[~padded].all()


def test_views_have_the_backbone_size_and_are_deterministic_per_generator():
    x = images(8, 32, 32)
    for preset in ("code", "paper"):
        policy = get_policy("cifar", preset, size=48)
        a = policy(x, torch.Generator().manual_seed(3))
        b = policy(x, torch.Generator().manual_seed(3))
        c = policy(x, torch.Generator().manual_seed(4))
        assert a.shape == (8, 3, 48, 48) and torch.equal(a, b) and not torch.equal(a, c)
        assert a.min() >= 0 and a.max() <= 1
    # uint8 and float inputs of the same pixels give the same views
    u = (x * 255).round().to(torch.uint8)
    policy = get_policy("tinyimagenet", "code", size=40)
    assert torch.allclose(policy(u, torch.Generator().manual_seed(0)),
                          policy(u.float() / 255, torch.Generator().manual_seed(0)), atol=1e-6)


def test_each_colour_operation_touches_its_share_of_the_batch():
    """Colour draws come after the geometry's, so with one seed a policy and its colour-free version
    cut the same windows; the images that differ are those the operation was applied to."""
    x = images(1500, 8, 8)
    plain = A.ViewPolicy(size=8)(x, torch.Generator().manual_seed(0))
    for policy, p in [(A.ViewPolicy(jitter_p=0.6, size=8), 0.6), (A.ViewPolicy(grayscale_p=0.2, size=8), 0.2),
                      (A.ViewPolicy(solarize_p=0.1, size=8), 0.1), (A.ViewPolicy(equalize_p=0.1, size=8), 0.1)]:
        out = policy(x, torch.Generator().manual_seed(0))
        changed = (out - plain).flatten(1).abs().max(1).values > 1e-6
        assert abs(float(changed.float().mean()) - p) < 0.05, (policy, float(changed.float().mean()))


def test_presets_pick_the_papers_or_the_authors_policy_and_leave_toy_datasets_alone():
    assert get_policy("cifar", "code") == A.CODE_POLICIES["cifar"]
    assert A.CODE_POLICIES["cifar"].solarize_p == 0.1 and A.CODE_POLICIES["cifar"].equalize_p == 0.1
    assert A.CODE_POLICIES["tinyimagenet"].blur_p == 0.2 and A.CODE_POLICIES["finegrained"].jitter_p == 0
    assert get_policy("finegrained", "paper", size=224) == A.PAPER_POLICY.with_size(224)
    assert get_policy("shift", "paper") is random_shift


def write_jpeg(path, h: int, w: int, left_colour=None) -> None:
    pixels = np.full((h, w, 3), 128, np.uint8)
    pixels += np.random.default_rng(h * w).integers(0, 20, (h, w, 3), dtype=np.uint8)
    if left_colour is not None:
        pixels[:, : w // 8] = left_colour
    Image.fromarray(pixels).save(path, quality=95)


def test_a_canvas_holds_whole_images_and_its_centre_squares_are_what_load_decodes(tmp_path):
    shapes = [(300, 400), (400, 300), (256, 256), (100, 700), (333, 257)]
    paths = []
    for i, (h, w) in enumerate(shapes):
        paths.append(tmp_path / f"{i}.jpg")
        write_jpeg(paths[-1], h, w)
    canvas = D.decode_canvas(paths)
    # shorter side 256, longer side scaled (and at most 2:1, the centre of anything longer)
    assert canvas.sizes.tolist() == [[256, 341], [341, 256], [256, 256], [256, 512], [332, 256]]
    assert canvas.pixels.dtype == torch.uint8 and canvas.pixels.shape == (5, 3, 341, 512)
    assert np.array_equal(canvas.center_squares(), decode(paths))
    data = ImageSet(paths, np.zeros(len(paths)))
    (batch, views), = list(D.batches(data, 8, views=True))
    assert np.array_equal(batch, data.load(slice(0, 5))) and isinstance(views, D.Canvas)


def test_views_of_a_file_backed_image_see_beyond_its_centre_square(tmp_path):
    path = tmp_path / "wide.jpg"
    write_jpeg(path, 300, 600, left_colour=(255, 0, 0))  # a red band on the left eighth
    data = ImageSet([path], np.zeros(1))
    assert (decode([path])[0, :, :, 0] > 200).mean() < 0.01  # the centre square never shows it
    canvas = D.view_input(data, np.zeros(64, dtype=np.int64))  # 64 views of the one image
    views = A.ViewPolicy(size=56)(canvas, torch.Generator().manual_seed(0))
    red = ((views[:, 0] > 0.8) & (views[:, 1] < 0.2)).flatten(1).float().mean(1)
    assert (red > 0.02).float().mean() > 0.2


def test_padding_beyond_a_canvas_image_is_its_edge_not_the_filler():
    """Two images in one canvas: the small one's views must equal its views cut alone."""
    big, small = smooth(40, 60, 1), smooth(32, 32, 2)
    canvas = torch.zeros(2, 3, 40, 60)
    canvas[0] = big[0]
    canvas[1] = F.pad(small, (0, 28, 0, 8), mode="replicate")[0]
    together = A.cut_views(canvas, torch.tensor([[40, 60], [32, 32]]), 24, torch.Generator().manual_seed(5))
    gen = torch.Generator().manual_seed(5)
    windows = A.crop_windows(torch.tensor([[40, 60], [32, 32]]), 24, gen)
    alone = A.resample(small, torch.tensor([[32, 32]]), 24, *(w[1:] for w in windows))
    assert torch.allclose(together[1], alone[0], atol=1e-5)


def test_batches_decode_ahead_in_order_and_name_an_unreadable_file(tmp_path):
    paths = []
    for i in range(7):
        paths.append(tmp_path / f"{i}.jpg")
        write_jpeg(paths[-1], 64 + i, 80)
    data = ImageSet(paths, np.arange(7))
    got = [b for b, _ in D.batches(data, 3, views=False)]
    assert [len(b) for b in got] == [3, 3, 1]
    assert np.array_equal(np.concatenate(got), data.load(slice(0, 7)))
    paths[5].write_bytes(paths[5].read_bytes()[:200])  # truncated
    with pytest.raises(DatasetError, match=r"unreadable image .*5\.jpg"):
        list(D.batches(data, 3, views=True))


def test_in_memory_batches_are_sliced_not_copied_through_a_decoder():
    x = (np.random.default_rng(0).random((10, 32, 32, 3)) * 255).astype(np.uint8)
    data = ImageSet(x, np.arange(10))
    (batch, views), = list(D.batches(data, 16, views=True))
    assert np.array_equal(batch, x) and views.shape == (10, 3, 32, 32)
    assert math.isclose(float(views[0, 0, 0, 0]), x[0, 0, 0, 0] / 255, rel_tol=1e-6)
