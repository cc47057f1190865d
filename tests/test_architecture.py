"""The headless core, proved: collectors and planner never import Textual or Rich, heavy libraries load
lazily, and imports flow one way (tui → planner → collectors; tui → demo → collectors) in every import form,
with no cycle even through imports inside functions; no two public classes of the product share a name
(one concept, one type: a second ``Lifetime`` cannot come back). The rooms: a family of modules shares a
sub-package (``collectors/prometheus/``, not ``prometheus_*.py`` side by side), each package says in its
docstring what it holds, a source's room names its source ``source.py``, and every package ships. Also: the
code passes ruff, mypy is strict on the collectors and the planner, and every ``type: ignore`` names its error
code and says why."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import io
import re
import shutil
import subprocess
import sys
import tokenize
import tomllib
from pathlib import Path

import pytest

from tests.import_graph import (
    cycles,
    graph,
    layer_violations,
    lazy_homes,
    private_imports,
    read_scripts,
    read_sources,
)

REPO = Path(__file__).resolve().parents[1]


def _modules(folder: str) -> list[str]:
    out = []
    for path in sorted((REPO / folder).rglob("*.py")):
        rel = path.relative_to(REPO / folder).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        out.append(".".join(["cmdare", folder, *parts]))
    return out


def test_core_imports_no_ui_and_no_heavy_libraries_at_import_time():
    mods = _modules("collectors") + _modules("planner") + _modules("demo")
    code = (
        "import importlib, sys\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in ('textual', 'rich', 'pandas', 'sklearn') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"imported at module level: {out.stdout.strip()}"


def test_app_module_does_not_load_pandas_or_sklearn():
    code = "import sys, cmdare.tui.app, cmdare.tui.cli; print(','.join(m for m in ('pandas','sklearn') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_imports_flow_one_way_in_every_form():
    """tui -> planner -> collectors, demo -> collectors; every import form, anywhere in a file."""
    assert layer_violations(read_sources(REPO)) == []


def test_no_import_cycle_even_inside_functions():
    assert cycles(graph(read_sources(REPO))) == []


@pytest.mark.parametrize(
    "source",
    [
        "import cmdare.tui.app",
        "from cmdare import tui",
        "from cmdare.tui import app",
        "from cmdare.tui.app import CmdareApp",
        "from ... import tui",
        "from ...tui.app import CmdareApp",
        "import importlib\nimportlib.import_module('cmdare.tui.app')",
        "from importlib import import_module\nimport_module('cmdare.tui')",
        "name = 'app'\n__import__(f'cmdare.tui.{name}')",
        "def later():\n    from cmdare.tui import app\n    return app",
        "from cmdare.demo import cluster",
    ],
)
def test_layer_check_catches_every_import_form(source: str):
    """Each form, written in a collectors module, is reported (the check is not blind to it)."""
    sources = {"cmdare.collectors.sub.x": (source, False), "cmdare.tui.app": ("", False),
               "cmdare.demo.cluster": ("", False)}  # fmt: skip
    assert layer_violations(sources), source


def test_layer_check_accepts_the_allowed_directions():
    sources = {
        "cmdare.tui.app": ("from cmdare.planner import analysis\nfrom cmdare.demo import cluster", False),
        "cmdare.planner.analysis": ("from cmdare.collectors import store\nfrom . import overview", False),
        "cmdare.demo.cluster": ("from cmdare.collectors.exporter import TrainingExporter", False),
    }
    assert layer_violations(sources) == []


@pytest.mark.parametrize(
    "b_source",
    [
        "from cmdare.planner import a",
        "def f():\n    from cmdare.planner.a import thing\n    return thing",
        "from . import a",
        "import importlib\n\ndef f():\n    return importlib.import_module('cmdare.planner.a')",
    ],
)
def test_cycle_check_catches_a_cycle_in_any_form(b_source: str):
    sources = {
        "cmdare.planner.a": ("from cmdare.planner import b", False),
        "cmdare.planner.b": (b_source, False),
    }
    assert cycles(graph(sources)) == [["cmdare.planner.a", "cmdare.planner.b"]]


def test_cycle_check_sees_through_a_lazy_package():
    """A name taken from a lazy package (``_HOME``) imports its home module on first use: a cycle
    through it is a cycle, though no line names the home module."""
    sources = {
        "cmdare.planner.pkg": ('_HOME: dict[str, str] = {"thing": "a"}', True),
        "cmdare.planner.pkg.a": ("from cmdare.planner.pkg import b", False),
        "cmdare.planner.pkg.b": ("def f():\n    from cmdare.planner.pkg import thing", False),
    }
    assert cycles(graph(sources)) == [["cmdare.planner.pkg.a", "cmdare.planner.pkg.b"]]


def lazy_packages() -> dict[str, dict[str, str]]:
    """Every package of the product whose ``__init__`` lists public names lazily: package -> name -> home."""
    sources = read_sources(REPO)
    return {m: lazy_homes(src) for m, (src, is_pkg) in sources.items() if is_pkg and lazy_homes(src)}


def test_each_lazy_package_lists_public_names_defined_in_their_home():
    """The public names in each planner sub-package's ``__init__`` exist where it says, are public
    there, and are all the package exposes (``__all__``): a renamed function cannot leave a stale name."""
    import importlib

    packages = lazy_packages()
    assert set(packages) >= {f"cmdare.planner.{p}" for p in ("speed", "risk_cost", "geo", "rules")}
    for package, homes in packages.items():
        pkg = importlib.import_module(package)
        assert sorted(pkg.__all__) == sorted(homes), package
        for name, home in homes.items():
            module = importlib.import_module(f"{package}.{home}")
            assert not name.startswith("_") and name in vars(module), f"{package}.{name} not in {home}"
            assert getattr(pkg, name) is getattr(module, name)


def test_cycle_check_accepts_a_one_way_chain():
    sources = {"cmdare.planner.a": ("from cmdare.planner import b", False),
               "cmdare.planner.b": ("def f():\n    from cmdare.planner import c", False),
               "cmdare.planner.c": ("", False)}  # fmt: skip
    assert cycles(graph(sources)) == []


#: Private names still taken across modules, to be made public in their home (issue 19): prometheus/source.py
#: reads prometheus/aggregate.py's query tables (``_sel``, ``_of_tasks``, ``_*_KEYS``…) while both are reworked.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()
TEST_FILES = {f"tests.{path.stem}" for path in (REPO / "tests").glob("*.py")}


def held_to_privacy(module: str, other: str) -> bool:
    """Who the private-helper rule binds: every product module, script and benchmark; a test or test
    support module may read its subject's private helpers (a product module), never another test's."""
    if (module, other) in KNOWN_PRIVATE_IMPORTS:
        return False
    return not (module in TEST_FILES and other.startswith("cmdare."))


def test_no_private_helper_is_imported_across_modules():
    """Private helpers stay private or become public in their home module (issue 19 item 4)."""
    sources = {**read_sources(REPO), **read_scripts(REPO)}
    assert private_imports(sources, held_to_privacy) == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("cmdare.collectors.a", "from cmdare.collectors.b import _helper"),
        ("cmdare.collectors.a", "from .b import public, _helper"),
        ("cmdare.collectors.a", "def f():\n    from cmdare.collectors.b import _helper"),
        ("bench_a", "from bench_b import _helper"),
        ("test_a", "from test_b import _helper"),
    ],
)
def test_private_import_check_catches_each_form(module: str, source: str):
    other = "bench_b" if module == "bench_a" else "test_b" if module == "test_a" else "cmdare.collectors.b"
    sources = {module: (source, False), other: ("", False)}
    assert private_imports(sources, lambda m, o: True) == [
        f"{module}:{source.count(chr(10)) + 1} takes _helper from {other}"
    ]


def test_private_import_check_accepts_public_names_dunders_and_a_test_of_its_subject():
    sources = {
        "cmdare.collectors.a": ("from cmdare.collectors.b import helper, __version__", False),
        "cmdare.collectors.b": ("", False),
        "test_b": ("from cmdare.collectors.b import _helper", False),
    }
    assert private_imports(sources, lambda m, o: m != "test_b") == []
    assert not held_to_privacy("tests.test_shapes", "cmdare.collectors.b") and held_to_privacy(
        "tests.test_shapes", "tests.import_graph"
    )


#: Modules that still spell catalogue metric names (issue 19: to read them from collectors/metrics.py while
#: the Prometheus reads are reworked).
KNOWN_SPELLERS = {"cmdare.collectors.prometheus.aggregate", "cmdare.collectors.prometheus.source"}


def catalogue_sample_names() -> frozenset[str]:
    """Every sample name of every family in the metric catalogue (``_total``, ``_sum``, ``_count`` too)."""
    from cmdare.collectors import metrics as M

    families = [d.name for d in vars(M).values() if isinstance(d, M.MetricDef)]
    return frozenset(f"{name}{suffix}" for name in families for suffix in ("", "_total", "_sum", "_count"))


def spelled_metric_names(module: str, source: str, names: frozenset[str]) -> list[str]:
    """``module:line name`` for each string constant of ``source`` that is a catalogue sample name
    (docstrings and prose that mentions one are not spellings)."""
    tree = ast.parse(source)
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        f"{module}:{node.lineno} {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in docs
    ]


def test_metric_names_are_spelled_only_in_the_catalogue():
    """One vocabulary: a metric's name is written once, in ``collectors/metrics.py``; every other module
    reads it from there (a renamed metric cannot leave a stale spelling behind)."""
    names = catalogue_sample_names()
    found = [
        hit
        for module, (source, _) in read_sources(REPO).items()
        if module != "cmdare.collectors.metrics" and module not in KNOWN_SPELLERS
        for hit in spelled_metric_names(module, source, names)
    ]
    assert found == []


def test_metric_spelling_check_catches_a_name_and_skips_docstrings_and_prose():
    names = catalogue_sample_names()
    source = (
        '"""Reads cmdare_worker_steps_total."""\n'
        'KEYS = {"cmdare_worker_steps_total": 1}\n'
        'NOTE = "no rank reports cmdare_allreduce_seconds"\n'
        'def f():\n    """DCGM_FI_DEV_GPU_UTIL"""\n    return "DCGM_FI_DEV_GPU_UTIL"\n'
    )
    assert spelled_metric_names("m", source, names) == [
        "m:2 cmdare_worker_steps_total",
        "m:6 DCGM_FI_DEV_GPU_UTIL",
    ]


def shared_class_names(sources: dict[str, tuple[str, bool]]) -> dict[str, list[str]]:
    """Public class names defined in more than one place: name -> ``module:line`` of each definition
    (nested classes count; ``_private`` helpers stay their module's business)."""
    homes: dict[str, list[str]] = {}
    for module, (source, _) in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                homes.setdefault(node.name, []).append(f"{module}:{node.lineno}")
    return {name: where for name, where in homes.items() if len(where) > 1}


def test_no_two_classes_share_a_name():
    """One concept, one type: e.g. one ``Lifetime`` (collectors) and one ``ModelSpec`` for what a job
    trains, used from the config to the collectors to the planner."""
    assert shared_class_names(read_sources(REPO)) == {}


def test_shared_class_name_check_catches_a_second_definition():
    sources = {
        "cmdare.collectors.samples": ("class Lifetime:\n    pass\nclass _Cache:\n    pass", False),
        "cmdare.planner.risk": (
            "def f():\n    class Lifetime:\n        pass\nclass _Cache:\n    pass",
            False,
        ),
    }
    assert shared_class_names(sources) == {
        "Lifetime": ["cmdare.collectors.samples:1", "cmdare.planner.risk:2"]
    }


TYPE_CHECKED = ("collectors", "planner", "tui", "demo")  # what scripts/typecheck.sh runs mypy on
# ``# type: ignore[code]  # why``: one or more error codes, then the reason the checker cannot see
IGNORE_WITH_REASON = re.compile(r"#\s*type:\s*ignore\[[a-z0-9-]+(?:,\s*[a-z0-9-]+)*\]  # \S")


def ignores_without_reason(sources: dict[str, str]) -> list[str]:
    """``path:line`` of each ``type: ignore`` comment that lacks an error code or a reason after it."""
    out = []
    for path, text in sources.items():
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        for tok in tokens:
            if tok.type == tokenize.COMMENT and "type: ignore" in tok.string:
                if not IGNORE_WITH_REASON.search(tok.string):
                    out.append(f"{path}:{tok.start[0]}")
    return out


def test_every_type_ignore_names_its_code_and_reason():
    """The checker is silenced only where it cannot see what the code knows, and the line says what."""
    sources = {
        str(p.relative_to(REPO)): p.read_text("utf-8")
        for folder in TYPE_CHECKED
        for p in sorted((REPO / folder).rglob("*.py"))
    }
    assert ignores_without_reason(sources) == []


def test_ignore_reason_check_catches_a_bare_or_unexplained_ignore():
    sources = {
        "bare.py": "x = f()  # type: ignore\n",
        "code_only.py": "x = f()  # type: ignore[arg-type]\n",
        "explained.py": "x = f()  # type: ignore[arg-type]  # f's stub is wrong about None\n",
        "two_codes.py": "x = f()  # type: ignore[arg-type, misc]  # why\n",
        "in_a_string.py": "s = '# type: ignore'\n",
    }
    assert ignores_without_reason(sources) == ["bare.py:1", "code_only.py:1"]


def test_mypy_is_strict_on_the_collectors_and_the_planner():
    """[tool.mypy] checks the four packages, the collectors and the planner strictly (scripts/typecheck.sh)."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["mypy"]
    assert set(cfg["packages"]) == {f"cmdare.{name}" for name in TYPE_CHECKED}
    strict = next(o for o in cfg["overrides"] if "cmdare.collectors.*" in o["module"])
    assert "cmdare.planner.*" in strict["module"]
    for flag in (
        "disallow_untyped_defs",
        "disallow_any_generics",
        "warn_return_any",
        "disallow_untyped_calls",
    ):
        assert strict[flag] is True, flag
    assert cfg["warn_unused_ignores"] is True and "ignore-without-code" in cfg["enable_error_code"]


WIDE_FIELDS = 6  # a frozen type with this many fields or more is built by keyword only


def positional_wide_types(modules: list[str]) -> list[str]:
    """``module.Class`` of each frozen dataclass with ``WIDE_FIELDS`` or more init fields that one may build
    by position (a field not keyword-only)."""
    out = []
    for name in modules:
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and dataclasses.is_dataclass(cls) and cls.__module__ == name):
                continue
            init = [f for f in dataclasses.fields(cls) if f.init]
            if (
                cls.__dataclass_params__.frozen
                and len(init) >= WIDE_FIELDS
                and not all(f.kw_only for f in init)
            ):
                out.append(f"{name}.{cls.__qualname__}")
    return out


def test_wide_frozen_types_are_built_by_keyword():
    """``NodeView(name=…, role=…)``, never eighteen values in a row (six ``None``s that can trade places)."""
    mods = [m for folder in TYPE_CHECKED for m in _modules(folder)]
    assert positional_wide_types(mods) == []


def test_ruff_passes():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff not installed")
    out = subprocess.run(
        [ruff, "check", "--output-format", "concise", str(REPO)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout[-3000:]


#: The product's code folders (``cmdare.<folder>``).
FOLDERS = ("collectors", "planner", "tui", "demo")


def flat_families(modules: list[str], rooms: list[str]) -> dict[str, list[str]]:
    """Modules that belong in a room: flat modules sharing their first word (``prometheus_api``,
    ``prometheus_fleet``), or a flat module named after a room beside it (``prometheus_x`` by ``prometheus/``)."""
    by_word: dict[str, list[str]] = {}
    for name in sorted(modules):
        by_word.setdefault(name.split("_")[0], []).append(name)
    return {
        word: names
        for word, names in sorted(by_word.items())
        if len(names) > 1 or (word in rooms and names != [word])
    }


#: Flat modules that share a first word and stay side by side, with why.
FLAT_PAIRS = {"view": ["view", "view_json"]}  # the planner's typed answer and its one JSON rendering


@pytest.mark.parametrize(
    ("folder", "expected_rooms"),
    [
        (
            "collectors",
            {"prometheus", "tensorboard", "scrape", "logs", "mlflow", "recording", "exporter", "pricing"},
        ),
        ("planner", {"speed", "risk_cost", "geo", "rules", "live", "predict"}),
    ],
)
def test_no_prefix_family_stays_flat(folder: str, expected_rooms: set[str]):
    """``ls collectors`` and ``ls planner`` read as rooms plus what the rooms share: a family of modules
    (``prometheus_*`` ×7, ``tensorboard``/``tb*``…; ``live_*``, ``predict_*``) lives in its sub-package,
    as ``pricing/`` does (issue 32 item 4)."""
    root = REPO / folder
    modules = [p.stem for p in root.glob("*.py") if p.stem != "__init__"]
    rooms = [p.name for p in root.iterdir() if (p / "__init__.py").exists()]
    families = {
        word: names for word, names in flat_families(modules, rooms).items() if FLAT_PAIRS.get(word) != names
    }
    assert families == {}
    assert expected_rooms <= set(rooms)


def test_flat_family_check_catches_a_family_and_a_stray_beside_its_room():
    assert flat_families(["prometheus_api", "prometheus_fleet", "store"], []) == {
        "prometheus": ["prometheus_api", "prometheus_fleet"]
    }
    assert flat_families(["prometheus_auth", "store"], ["prometheus"]) == {"prometheus": ["prometheus_auth"]}
    assert flat_families(["http_client", "store", "scrape"], ["scrape"]) == {}


def product_packages() -> list[Path]:
    """Every package folder of the product (a folder with an ``__init__.py``)."""
    return sorted(p.parent for folder in FOLDERS for p in (REPO / folder).rglob("__init__.py"))


def test_each_package_says_what_it_holds():
    """A newcomer reads a room from its ``__init__`` docstring: every package has one."""
    bare = [
        str(pkg.relative_to(REPO))
        for pkg in product_packages()
        if not ast.get_docstring(ast.parse((pkg / "__init__.py").read_text("utf-8")))
    ]
    assert bare == []


def test_every_package_ships():
    """pyproject lists its packages by hand: a room missing there would be missing from the wheel."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {name: REPO / path for name, path in config["package-dir"].items()}
    found = {
        ".".join([top, *pkg.relative_to(root).parts])
        for top, root in folders.items()
        for pkg in product_packages()
        if pkg.is_relative_to(root)
    }
    assert found - listed == set()


def test_a_source_room_names_its_source_source_py():
    """In a source's room, ``source.py`` holds the source the poller runs (one public ``…Source`` class)."""
    for path in sorted((REPO / "collectors").glob("*/source.py")):
        classes = [
            node.name
            for node in ast.parse(path.read_text("utf-8")).body
            if isinstance(node, ast.ClassDef) and node.name.endswith("Source")
        ]
        assert len(classes) == 1, f"{path.relative_to(REPO)}: {classes}"
    assert {p.parent.name for p in (REPO / "collectors").glob("*/source.py")} >= {
        "prometheus",
        "tensorboard",
        "scrape",
        "logs",
    }
