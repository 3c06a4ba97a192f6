"""Which software produced a result: recorded beside every benchmark's numbers, so a figure can be traced back."""
from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

PACKAGES = ("openai", "pydantic", "jsonschema", "llguidance", "llama-cpp-python")


def software_versions() -> dict[str, str | None]:
    """Python's version and each package's, None for a package that is not installed."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found
