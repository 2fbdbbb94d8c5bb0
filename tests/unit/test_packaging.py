"""One `pip install -e .` serves every front door: what the bots, the CLI and the dashboard
import comes from [project.dependencies] (or what those need), never from an extra."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers import ROOT

OWN_PACKAGES = {"bots", "memory_core", "config", "tests"}
FRONT_DOORS = (
    "bots.cli.main",
    "bots.discord.bot",
    "bots.slack.bot",
    "bots.runner",
    "bots.dashboard.server",
)


def dependencies() -> list[str]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        listed: list[str] = tomllib.load(fh)["project"]["dependencies"]
    return listed


def installed_closure(requirements: list[str]) -> set[str]:
    """The distributions these requirements install, with everything they require."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        key = f"{name}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        seen.add(name)
        try:
            needs = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here: whatever it would import cannot have been loaded
        for raw in needs:
            sub = Requirement(raw)
            extras = req.extras or {""}
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras):
                todo.append(sub)
    return {key for key in seen if "[" not in key}


def loaded_at_start() -> set[str]:
    """Top-level modules a bare interpreter has loaded (site, .pth hooks): not ours."""
    code = "import json, sys; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(out)}


def test_the_platform_libraries_are_dependencies() -> None:
    listed = {canonicalize_name(Requirement(r).name) for r in dependencies()}
    for name in ("discord.py", "slack-bolt", "slack-sdk", "aiohttp"):
        assert canonicalize_name(name) in listed, f"{name} is not in [project.dependencies]"


def test_front_doors_import_with_only_the_dependencies() -> None:
    """In a fresh interpreter where every installed module that no dependency provides is
    made unimportable (as on a machine after `pip install -e .` alone), every front door
    imports: nothing it needs is an extra (libraries' optional imports fall back)."""
    allowed = installed_closure(dependencies())
    keep = set(sys.stdlib_module_names) | OWN_PACKAGES | loaded_at_start()
    blocked = sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if module not in keep and not {canonicalize_name(d) for d in dists} & allowed
    )
    code = (
        "import json, sys; sys.modules.update(dict.fromkeys(json.loads(sys.argv[1]))); "
        + "; ".join(f"import {m}" for m in FRONT_DOORS)
    )
    run = subprocess.run(
        [sys.executable, "-c", code, json.dumps(blocked)], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, (
        f"a front door needs a module outside the dependencies:\n{run.stderr[-2000:]}"
    )
