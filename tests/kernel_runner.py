"""A Jupyter kernel for tests that run notebook cells by hand: a chosen interpreter, environment and working
directory, and each cell's printed text back, or its traceback as the failure."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class CellError(AssertionError):
    pass


class Kernel:
    """`with Kernel(cwd=...) as kernel: kernel.run(code)`; `python` picks the interpreter (default: this one's)."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None, python: Path | None = None,
                 specs: Path | None = None) -> None:
        if python is None:
            self.manager = KernelManager(kernel_name="python3")
        else:  # a kernelspec of our own, so the kernel runs in another virtual environment
            spec = Path(specs) / "kernels" / "test-kernel"
            spec.mkdir(parents=True, exist_ok=True)
            argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "test", "language": "python"}))
            self.manager = KernelManager(kernel_name="test-kernel", kernel_spec_manager=KernelSpecManager(
                kernel_dirs=[str(spec.parent)], ensure_native_kernel=False))
        self.cwd, self.env = str(cwd), {**os.environ, **(env or {})}

    def __enter__(self) -> Kernel:
        self.manager.start_kernel(cwd=self.cwd, env=self.env)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        return self

    def __exit__(self, *exc) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)

    def restart(self) -> None:
        """What Colab's Runtime > Restart session does: a new process, same environment and folder."""
        self.manager.restart_kernel(now=True)
        self.client.wait_for_ready(timeout=120)

    def run(self, code: str, timeout: float = 600) -> str:
        texts: list[str] = []

        def collect(message: dict) -> None:
            content = message["content"]
            if message["msg_type"] == "stream":
                texts.append(content["text"])
            elif message["msg_type"] in ("execute_result", "display_data"):
                texts.append(content["data"].get("text/plain", "") + "\n")
            elif message["msg_type"] == "error":
                texts.append(ANSI.sub("", "\n".join(content["traceback"])))

        reply = self.client.execute_interactive(code, output_hook=collect, timeout=timeout, allow_stdin=False)
        output = "".join(texts)
        if reply["content"]["status"] != "ok":
            raise CellError(f"the cell failed:\n{code}\n--- its output ---\n{output}")
        return output
