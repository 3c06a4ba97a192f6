"""The verdict line that every "your turn" check cell prints."""
from __future__ import annotations


def check(solved: bool, praise: str, hint: str) -> None:
    """Print whether an exercise is solved, with what to try next when it is not."""
    print(f"✅ Solved: {praise}" if solved else f"❌ Not yet: {hint}")
