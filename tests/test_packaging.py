"""The set-up files agree with each other: pyproject, CI pins, environment.yml, README, .ci/run."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements/ci.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            (spec,) = req.specifier
            pins[req.name.lower()] = spec.version
    return pins


def test_ci_pins_satisfy_the_package_ranges():
    pins = _pins()
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    for extra in ("lab", "test"):
        reqs += [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][extra]]
    for req in reqs:
        name = req.name.lower()
        assert name in pins, f"{name} is a dependency but CI does not pin it"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), (name, pins[name], str(req.specifier))


def test_environment_yml_installs_this_package_with_the_lab_and_test_extras():
    text = (ROOT / "environment.yml").read_text()
    match = re.search(r"-\s*-e\s+\.\[([a-z,]+)\]", text)
    assert match, "environment.yml must pip-install the package itself"
    extras = set(match.group(1).split(","))
    assert extras <= set(PYPROJECT["project"]["optional-dependencies"]) and {"lab", "test"} <= extras


def test_readme_gives_exactly_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", readme, re.S)
    assert block, "README needs a ```sh block with the two commands"
    commands = [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert commands == ["make lab", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci/run").read_text()
