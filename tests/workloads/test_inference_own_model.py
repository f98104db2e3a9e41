"""docs/inference.md's "Your own model": each export example run exactly as the page shows
it (skipped only where its framework is not installed), and what it writes passes the check
job-add runs, the model's answers computed by ONNX Runtime as the workers compute them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workloads.inference.models import (
    OnnxModel,
    array_from_bytes,
    array_header,
    first_rows,
)
from workloads.inference.runtime import check_model_bounded

pytestmark = pytest.mark.subprocess

DOCS = Path(__file__).resolve().parents[2] / "docs" / "inference.md"


def documented_python(mark: str) -> str:
    """The ```python block after the line `<!-- test: MARK ...`."""
    text = DOCS.read_text()
    start = text.index(f"<!-- test: {mark}")
    block = text[text.index("```python\n", start) + len("```python\n"):]
    return block[:block.index("```")]


@pytest.mark.parametrize(("mark", "framework", "prefix"), [
    ("torch export", "torch", "my"), ("sklearn export", "skl2onnx", "iris")])
def test_the_documented_export_writes_files_job_add_takes(mark: str, framework: str,
                                                          prefix: str, tmp_path: Path) -> None:
    pytest.importorskip(framework)
    done = subprocess.run([sys.executable, "-c", documented_python(mark)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    model = (tmp_path / f"{prefix}_model.onnx").read_bytes()
    testset = (tmp_path / f"{prefix}_testset.npy").read_bytes()
    shape, dtype = array_header(testset, "testset")
    signature = check_model_bounded(model, "model", first_rows(testset, "testset", 2))
    assert signature.accepts(shape, dtype) is None
    labels = array_from_bytes((tmp_path / f"{prefix}_label.npy").read_bytes(), "labels")
    assert labels.shape == (shape[0],)
    answers = OnnxModel(model).predict(array_from_bytes(testset, "testset"))
    assert answers.shape == (shape[0],) and answers.min() >= 0
    if framework == "skl2onnx":  # the forest recalls its training set
        assert np.mean(answers == labels) > 0.95
