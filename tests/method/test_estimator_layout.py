"""The estimator reads like §7 of the paper, and its public API is one list.

``estimator/__init__.py`` and ``estimator/README.md`` map each paragraph of §7 to a path; the paths exist and
each says which paragraph it implements, so the map cannot drift from the code. ``estimator.__all__`` is
exactly the public names of the package (as httpx keeps its own), and every name the service
imports from the estimator is among them. A cycle between the estimator's parts breaks ``lint-imports`` (its
``acyclic_siblings`` contract; tests/project/test_layers.py breaks it on purpose).
"""

from __future__ import annotations

import ast
import re
import types
from pathlib import Path

import estimator

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "estimator"

# §7 paragraph -> where its code is (what estimator/__init__.py and estimator/README.md say).
SECTION_7 = {
    "7.1": "corpus",
    "7.2": "free_tier/anchors.py",
    "7.3": "free_tier/gating.py",
    "7.4": "loo",
    "7.5": "spans",
    "7.6": "probe.py",
    "7.7": "fence.py",
    "7.8": "params.py",
    "7.9": "cost.py",
}


def _docstring(path: Path) -> str:
    source = path / "__init__.py" if path.is_dir() else path
    return ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""


def test_each_paragraph_of_section_7_is_where_the_map_says_and_says_so() -> None:
    readme = (PACKAGE / "README.md").read_text(encoding="utf-8")
    package_doc = estimator.__doc__ or ""
    for section, where in SECTION_7.items():
        path = PACKAGE / where
        assert path.exists(), f"§{section}: {where} is missing"
        assert f"§{section}" in _docstring(path), f"{where}'s docstring does not cite §{section}"
        for name, text in (("README.md", readme), ("__init__", package_doc)):
            line = next((ln for ln in text.splitlines() if f"§{section} " in ln), "")
            assert where.rstrip("/") in line.replace("``", ""), f"estimator {name} maps §{section} elsewhere: {line!r}"


def test_every_folder_of_the_estimator_says_what_it_holds() -> None:
    for folder in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "__init__.py").exists(), folder.name
        doc = _docstring(folder)
        assert doc, f"estimator/{folder.name}/__init__.py has no docstring"
        for module in sorted(folder.glob("*.py")):
            if module.stem != "__init__":
                assert f"``{module.stem}``" in doc, f"estimator/{folder.name}'s docstring omits {module.stem}"


def test_all_is_sorted_and_is_exactly_the_public_names() -> None:
    public = sorted(
        name
        for name, value in vars(estimator).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    )
    # The order is ruff's (RUF022: constants, classes, functions), checked by the lint step.
    assert len(set(estimator.__all__)) == len(estimator.__all__)
    assert sorted(estimator.__all__) == public


def test_every_name_the_service_takes_from_the_estimator_is_public() -> None:
    used: set[str] = set()
    for path in (ROOT / "provenance_api").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and re.match(r"estimator(\.|$)", node.module):
                used.update(alias.name for alias in node.names)
    missing = sorted(used - set(estimator.__all__))
    assert not missing, f"the service imports estimator names that are not in estimator.__all__: {missing}"
