"""The import graph of the library: no cycles, imports point down the layers, and an import
inside a function only keeps a heavy library out of start-up, saying which.

Read from the source with `ast` (no module is imported), counting imports inside functions,
so that a cycle hidden behind one is still a cycle. `if TYPE_CHECKING:` blocks never run and
are left out. The layers, lowest first (a module may import its own layer and those below):

    engine:        tree_kernels < leaf types < runtime, models < draft < drafters, verify
                   < methods, tree_bounds < iteration < decode < train, curves, certify
    orchestrator:  records < spec, store < run < results < ui < cli < the package's public API
    db imports nothing of ours; bench and tests may import anything.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tree_kernels", "engine", "db", "orchestrator", "bench")

# (module prefix, layer); a module's layer is its longest matching prefix's
LAYERS = [
    ("tree_kernels", 0),
    ("engine", 1),  # leaf types: config, transfer, clock, sampling, tree, metrics, ...
    ("engine.runtime", 2),
    ("engine.models", 2),
    ("engine.draft", 3),
    ("engine.drafters", 4),
    ("engine.verify", 4),
    ("engine.methods", 5),
    ("engine.tree_bounds", 5),
    ("engine.iteration", 6),
    ("engine.decode", 7),
    ("engine.train", 8),
    ("engine.curves", 8),
    ("engine.certify", 8),
    ("db", 9),
    ("orchestrator", 10),  # records and the other leaf modules at the top of the package
    ("orchestrator.spec", 11),
    ("orchestrator.store", 11),
    ("orchestrator.run", 12),
    ("orchestrator.results", 13),
    ("orchestrator.ui", 14),  # orch ui: the dashboard over results
    ("orchestrator.cli", 15),
    ("orchestrator.__init__", 16),  # `load`, the public API over results
    ("bench", 20),
]
# libraries an import inside a function may keep out of start-up (`# lazy: <library>`)
HEAVY = {
    "torch",
    "transformers",
    "triton",
    "pandas",
    "numpy",
    "scipy",
    "sqlalchemy",
    "alembic",
    "ray",
    "matplotlib",
    "pyarrow",
    "gguf",
    "accelerate",
    "huggingface_hub",  # measured: 0.3 s (httpx)
    "psycopg",
    "yaml",
    "tqdm",  # measured: a quarter of `orch --help`'s start-up
    "importlib.metadata",  # measured: a third of `orch --help`'s start-up
}
LAZY = re.compile(r"#[ ]*lazy:[ ]*([\w., ]+)")  # the libraries, before any "(why)"


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of ours that `name` (a module or a name inside one) lives in, or None."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test)


@dataclass
class Import:
    module: str  # the importing module
    line: int
    targets: set[str]  # the modules of ours it imports
    name: str  # the first module it names
    inner: bool  # inside a function
    comment: str  # the statement's source lines

    @property
    def root(self) -> str:
        return self.name.split(".")[0]


def _imports(module: str, path: Path) -> list[Import]:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []

    def visit(node: ast.AST, inner: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            deeper = inner or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names = [f"{base}.{a.name}" for a in child.names]
            else:
                visit(child, deeper)
                continue
            targets = {t for t in map(_resolve, names) if t and t != module}
            name = names[0] if isinstance(child, ast.Import) else base
            text = "\n".join(lines[child.lineno - 1 : child.end_lineno])
            out.append(Import(module, child.lineno, targets, name, deeper, text))

    visit(tree, False)
    return out


IMPORTS = {m: _imports(m, p) for m, p in MODULES.items()}


def _layer(module: str) -> int:
    key = module if module != "orchestrator" else "orchestrator.__init__"
    best = max((p for p, _ in LAYERS if key == p or key.startswith(p + ".")), key=len)
    return dict(LAYERS)[best]


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph = {m: sorted({t for i in IMPORTS[m] for t in i.targets}) for m in MODULES}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in MODULES:
        if m not in index:
            visit(m)
    return out


def _heavy_closure() -> dict[str, set[str]]:
    """The heavy libraries each module imports at module level, itself or through ours."""
    direct = {
        m: {i.root for i in imps if not i.inner and i.root in HEAVY} for m, imps in IMPORTS.items()
    }
    deps = {m: {t for i in imps if not i.inner for t in i.targets} for m, imps in IMPORTS.items()}
    closure = {}
    for m in MODULES:
        seen, todo, libs = {m}, [m], set()
        while todo:
            x = todo.pop()
            libs |= direct[x]
            for t in deps[x]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
                    parent = t.rpartition(".")[0]  # importing a module runs its packages too
                    while parent in MODULES and parent not in seen:
                        seen.add(parent)
                        todo.append(parent)
                        parent = parent.rpartition(".")[0]
        closure[m] = libs
    return closure


def test_the_scan_sees_the_library():
    assert len(MODULES) > 150 and "engine.decode" in MODULES


def test_no_import_cycles():
    assert _cycles() == []


def test_imports_point_down_the_layers():
    upward = [
        f"{i.module}:{i.line} imports {t} (layer {_layer(i.module)} -> {_layer(t)})"
        for imps in IMPORTS.values()
        for i in imps
        for t in i.targets
        if _layer(t) > _layer(i.module) and not t.startswith(i.module + ".")
    ]
    assert upward == []


def test_packages_import_only_what_their_part_may():
    allowed = {
        "tree_kernels": ("tree_kernels",),
        "db": ("db",),
        "engine": ("engine", "tree_kernels"),
        "orchestrator": ("orchestrator", "engine", "db", "tree_kernels"),
    }
    never = {"engine": {"orchestrator", "db", "ray", "sqlalchemy", "click", "alembic"}}
    bad = []
    for m, imps in IMPORTS.items():
        part = m.split(".")[0]
        for i in imps:
            ours = {t.split(".")[0] for t in i.targets}
            if part in allowed and not ours <= set(allowed[part]):
                bad.append(f"{m}:{i.line} imports {sorted(ours)}")
            if i.root in never.get(part, ()):
                bad.append(f"{m}:{i.line} imports {i.root}")
    assert bad == []


def test_imports_inside_functions_only_keep_heavy_libraries_out_of_start_up():
    """Each says which heavy library it keeps out (`# lazy: torch`), and that library is what
    the import brings: directly, or through a module of ours that imports it at its top."""
    closure = _heavy_closure()
    bad = []
    for m, imps in IMPORTS.items():
        if m.startswith("bench"):
            continue  # scripts: each reads its command line before loading torch
        for i in imps:
            if not i.inner:
                continue
            said = LAZY.search(i.comment)
            if i.targets:
                libs = set().union(*map(closure.get, i.targets))
            else:
                libs = {i.root, i.name} & HEAVY
            named = (
                {w.split()[0].lower() for w in said.group(1).split(",") if w.strip()}
                if said
                else set()
            )
            if not said or not named <= HEAVY or not named & libs:
                bad.append(f"{m}:{i.line}: {i.comment.splitlines()[0]} (brings {sorted(libs)})")
    assert bad == []


def test_orchestrator_is_packages_by_role():
    """At most 15 modules at the top of orchestrator/; the rest in its packages by role."""
    top = sorted(p.name for p in (ROOT / "orchestrator").glob("*.py"))
    assert len(top) <= 15, top
