"""vocab/errors.one_line: an error's message on one line; a long one (a remote traceback)
keeps its start and the exception at its end."""

from __future__ import annotations

from vocab.errors import one_line


def test_a_long_traceback_keeps_the_exception_that_ended_it() -> None:
    frames = "".join(f'  File "/x/script.py", line {n}, in f{n}\n    g()\n' for n in range(40))
    error = RuntimeError(f"Training failed:\nTraceback (most recent call last):\n{frames}"
                         "KeyError: 'TORCHFT_LIGHTHOUSE'\n")
    line = one_line(error, limit=300)
    assert len(line) == 300 and "\n" not in line
    assert line.startswith("Training failed: Traceback")
    assert line.endswith("KeyError: 'TORCHFT_LIGHTHOUSE'")


def test_a_short_message_is_folded_whole() -> None:
    assert one_line(ValueError("a\n  b"), limit=300) == "a b"
    assert one_line(ValueError("")) == "ValueError"
