"""The work of one task, pure numpy/Pillow: an image transformation, or one gradient of a
small convolutional model on a batch of images."""

from __future__ import annotations

import hashlib
import io

import numpy as np
from PIL import Image, ImageEnhance, ImageFilter

BLUR_RADIUS = 20
POW_ROUNDS = 3
THUMBNAIL = (64, 64)
PS_RESIZE = (400, 500)  # width x height, as the original
FILTERS = 16
CLASSES = 10


def transform_image(data: bytes, seed: int) -> bytes:
    """Large Gaussian blur, a random augmentation, three rounds of element-wise pow/mul on
    the pixels, a 64x64 thumbnail; returns the thumbnail as PNG."""
    rng = np.random.default_rng(seed)
    image = Image.open(io.BytesIO(data)).convert("RGB")
    image = image.filter(ImageFilter.GaussianBlur(BLUR_RADIUS))
    image = image.rotate(float(rng.uniform(-30, 30)))
    if rng.random() < 0.5:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    image = ImageEnhance.Color(image).enhance(float(rng.uniform(0.6, 1.4)))
    pixels = np.asarray(image, dtype=np.float32) / 255.0
    for _ in range(POW_ROUNDS):
        pixels = np.power(pixels, np.float32(rng.uniform(0.9, 1.1))) * np.float32(0.99)
    result = Image.fromarray((np.clip(pixels, 0.0, 1.0) * 255).astype(np.uint8))
    result.thumbnail(THUMBNAIL)
    buffer = io.BytesIO()
    result.save(buffer, "PNG")
    return buffer.getvalue()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


# --- param-server: a tiny CNN (conv 3x3 -> ReLU -> global average pool -> linear) ---------


def initial_weights(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "conv": rng.normal(0, 0.3, (27, FILTERS)).astype(np.float32),
        "conv_b": np.zeros(FILTERS, np.float32),
        "fc": rng.normal(0, 0.3, (FILTERS, CLASSES)).astype(np.float32),
        "fc_b": np.zeros(CLASSES, np.float32),
    }


def load_batch(images: list[bytes]) -> np.ndarray:
    """Decode each image and resize it to 400x500: (n, 500, 400, 3) in [0, 1]."""
    return np.stack(
        [
            np.asarray(
                Image.open(io.BytesIO(data)).convert("RGB").resize(PS_RESIZE), dtype=np.float32
            )
            / 255.0
            for data in images
        ]
    )


def _patches(x: np.ndarray) -> np.ndarray:
    """3x3 valid patches of (n, h, w, 3) as (n, h-2, w-2, 27)."""
    n, h, w, _ = x.shape
    cols = [x[:, i : h - 2 + i, j : w - 2 + j, :] for i in range(3) for j in range(3)]
    return np.concatenate(cols, axis=-1)


def gradient(
    weights: dict[str, np.ndarray], batch: np.ndarray, labels: np.ndarray
) -> tuple[dict[str, np.ndarray], float]:
    """Softmax cross-entropy loss of the batch and its gradient for every weight."""
    patches = _patches(batch)  # (n, H, W, 27)
    pre = patches @ weights["conv"] + weights["conv_b"]
    act = np.maximum(pre, 0.0)
    pooled = act.mean(axis=(1, 2))  # (n, F)
    logits = pooled @ weights["fc"] + weights["fc_b"]
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    n = batch.shape[0]
    loss = float(-np.log(probs[np.arange(n), labels] + 1e-9).mean())
    d_logits = probs
    d_logits[np.arange(n), labels] -= 1.0
    d_logits /= n
    d_pooled = d_logits @ weights["fc"].T  # (n, F)
    spatial = act.shape[1] * act.shape[2]
    d_act = (pre > 0) * (d_pooled[:, None, None, :] / spatial)
    grads = {
        "fc": pooled.T @ d_logits,
        "fc_b": d_logits.sum(axis=0),
        "conv": patches.reshape(-1, patches.shape[-1]).T @ d_act.reshape(-1, d_act.shape[-1]),
        "conv_b": d_act.sum(axis=(0, 1, 2)),
    }
    return {k: v.astype(np.float32) for k, v in grads.items()}, loss
