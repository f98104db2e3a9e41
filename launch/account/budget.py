"""The budget prompt before a deployment: both ends of the hourly cost, then y/N."""

from __future__ import annotations

from collections.abc import Callable


def confirm_budget(
    min_hourly_usd: float,
    max_hourly_usd: float,
    *,
    yes: bool,
    ask: Callable[[str], str] = input,
    say: Callable[[str], None] = print,
) -> bool:
    """Print the hourly cost at minimum and maximum scale; True when the user agrees (or
    `yes`). Anything but y/yes, or no terminal to answer from, is a no."""
    if min_hourly_usd < 0 or max_hourly_usd < min_hourly_usd:
        raise ValueError(
            f"hourly cost: minimum ${min_hourly_usd:.4f} and maximum ${max_hourly_usd:.4f} "
            "must satisfy 0 <= minimum <= maximum"
        )
    say(
        f"Hourly cost: ${min_hourly_usd:.2f} at minimum scale, ${max_hourly_usd:.2f} at maximum "
        f"scale (up to ${max_hourly_usd * 24:.2f} per day while it runs at maximum)"
    )
    if yes:
        say("--yes: deploying without asking")
        return True
    try:
        answer = ask("Deploy and start paying for this? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
