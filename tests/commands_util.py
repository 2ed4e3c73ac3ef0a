"""Running the operator's commands as the operator does: ``scrapy <command>`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def env() -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": str(ROOT)}
    out.pop("POLITE_STATE_DIR", None)
    return out


def scrapy(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=ROOT, env=env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def scrapy_json(*args: str) -> Any:
    done = scrapy(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def crawl_cmd(urls: list[str], state: Path, jobdir: Path | None = None,
              **settings: Any) -> list[str]:
    sets = {"POLITE_STATE_DIR": str(state), "POLITE_REST_PAGE": "0.1", "POLITE_JITTER": "0",
            "POLITE_CHECKPOINT_INTERVAL": "0.5", "LOG_LEVEL": "INFO",
            **{k: str(v) for k, v in settings.items()}}
    if jobdir is not None:
        sets["JOBDIR"] = str(jobdir)
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"url={','.join(urls)}"]
    for k, v in sets.items():
        cmd += ["-s", f"{k}={v}"]
    return cmd
