"""The estimator reads like §7 of the paper, and its public API is one list.

``estimator/__init__.py`` and ``estimator/README.md`` map each paragraph of §7 to a path; the paths exist and
each says which paragraph it implements, so the map cannot drift from the code. ``estimator.__all__`` is
exactly the names the package exports (as httpx keeps its own), each loaded on first use, and every name the service
imports from the estimator is among them. A cycle between the estimator's parts breaks ``lint-imports`` (its
``acyclic_siblings`` contract; tests/project/test_layers.py breaks it on purpose).
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
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


def test_all_is_exactly_the_public_names_and_each_loads_from_its_module() -> None:
    """The names load on first use: the type checkers' imports, ``_EXPORTS`` and ``__all__`` agree, and each
    name is the object its module defines."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    checked = {
        alias.name: node.module
        for block in tree.body
        if isinstance(block, ast.If)
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    exports = estimator._EXPORTS
    assert checked == exports
    assert len(set(estimator.__all__)) == len(estimator.__all__)
    assert sorted(estimator.__all__) == sorted(exports)
    for name, module in exports.items():
        assert getattr(estimator, name) is getattr(importlib.import_module(module), name), name
        assert name in dir(estimator)


def test_importing_one_part_of_the_estimator_does_not_import_all_of_it() -> None:
    code = "import sys, estimator.seams.llm; print(sorted(m for m in sys.modules if m.startswith('estimator')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = ast.literal_eval(done.stdout.strip())
    assert "estimator.results.models" not in loaded and "estimator.loo.driver" not in loaded, loaded


def test_every_name_the_service_takes_from_the_estimator_is_public() -> None:
    used: set[str] = set()
    for path in (ROOT / "provenance_api").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and re.match(r"estimator(\.|$)", node.module):
                used.update(alias.name for alias in node.names)
    missing = sorted(used - set(estimator.__all__))
    assert not missing, f"the service imports estimator names that are not in estimator.__all__: {missing}"
