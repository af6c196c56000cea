"""`orch report --claims FILE`: the papers' headline claims as data, each decided from the
database (examples/claims.yaml holds this project's; docs/reproduction.md's table is this
module's output, and a test keeps the two equal).

A claims file:

```yaml
claims:
  - paper: DynaTree
    claim: DynaTree > fixed tree > linear > autoregressive
    source: Table 1                   # where the paper makes it
    sweep: dynatree-grid-scaled       # the sweep whose finished trials test it
    metric: tokens_per_iteration      # a results column; speedup and tokens_per_iteration
                                      # have bootstrap intervals (intervals.py)
    where: [temperature=0]            # optional: filters (orch query --where) for every cell
    for_each: [dataset]               # optional: one test per value combination of these
    cells:                            # name -> filters; a cell is the best config by `metric`
      DynaTree: [method=dynatree, dynamic_depth=True]   # among the configs that match
      fixed tree: [method=fixed_tree]
    rule: order                       # see RULES
    value: 1.13                       # at_least only
    among: [method=dynatree]          # best only: the configs the first cell must lead
    note: ...                         # optional text beside the verdict
```

Cells are compared with their 95% intervals where the metric has them: A is *above* B when
A's interval lies wholly above B's, *below* when wholly under, else *level*; without intervals
by their values. RULES decide each setting reproduced / partly / not, and a claim over several
settings is reproduced where every setting is, not where none is, else partly ("k of n").
A cell no finished trial matches leaves its setting "no data", and so does a cell filter on a
parameter no trial of the sweep has (`selector=nde` where no trial ran the NDE selector): a claim
can name the trials that would test it before they exist.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from engine.config import ConfigError
from orchestrator.results.frame import _WHERE, QueryError, apply_where, frame_column, load_frame
from orchestrator.results.settings import CONFIG_KEY, settings_keys
from orchestrator.spec.values import SpecError, mapping
from orchestrator.spec.yaml_file import read_yaml
from orchestrator.store import Store

RULES = {
    "order": "each cell above the next, in the listed order",
    "above": "the first cell above every other cell",
    "below": "the last cell below every other cell",
    "at_least": "the first cell's value over the second's at least `value`, and the first above "
    "the second",
    "best": "the first cell the best of the configs `among` selects, or tied with it",
    "nondecreasing": "no cell below the one before it, and the last above the first",
    "nonincreasing": "no cell above the one before it, and the last below the first",
}
INTERVAL_OF = {
    "speedup": ("speedup_lo", "speedup_hi"),
    "tokens_per_iteration": ("tau_lo", "tau_hi"),
}
KEYS = ("paper", "claim", "source", "sweep", "metric", "cells", "rule")
OPTIONAL = ("where", "for_each", "value", "among", "note")


@dataclass(frozen=True)
class Claim:
    paper: str
    claim: str
    source: str
    sweep: str
    metric: str
    cells: tuple[tuple[str, tuple[str, ...]], ...]
    rule: str
    where: tuple[str, ...] = ()
    for_each: tuple[str, ...] = ()
    value: float | None = None
    among: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Cell:
    name: str
    value: float
    lo: float
    hi: float
    params: str
    machine: str
    trials: tuple[int, ...]


@dataclass(frozen=True)
class Outcome:
    """One setting of a claim: its label, cells (None: no trial matched) and verdict."""

    setting: str
    cells: tuple[Cell | None, ...]
    verdict: str  # reproduced | partly | not | no data
    why: str


def _filters(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: expected a list of filters like 'method=linear'")
    return tuple(value)


def load_claims(path: str | Path) -> list[Claim]:
    """The claims of a claims file, strictly checked (SpecError: one line naming the entry)."""
    path = Path(path)
    data = mapping(read_yaml(path), str(path), required=("claims",), optional=("claims",))
    entries = data["claims"]
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{path}: claims: expected a non-empty list")
    out = []
    for i, e in enumerate(entries):
        at = f"{path}: claims[{i}]"
        mapping(e, at, required=KEYS, optional=OPTIONAL)
        for k in ("paper", "claim", "source", "sweep", "metric", "rule"):
            if not isinstance(e[k], str) or not e[k]:
                raise SpecError(f"{at}.{k}: expected a non-empty string")
        if e["rule"] not in RULES:
            raise SpecError(f"{at}.rule: {e['rule']!r} is not one of {', '.join(RULES)}")
        cells = e["cells"]
        if not isinstance(cells, dict) or len(cells) < (1 if e["rule"] == "best" else 2):
            raise SpecError(f"{at}.cells: expected a mapping of names to filters (2 or more)")
        value = e.get("value")
        if (e["rule"] == "at_least") != (value is not None):
            raise SpecError(f"{at}.value: a number for rule at_least, and only for it")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise SpecError(f"{at}.value: expected a number, got {value!r}")
        if (e["rule"] == "best") != ("among" in e):
            raise SpecError(f"{at}.among: filters for rule best, and only for it")
        for_each = e.get("for_each", [])
        if not isinstance(for_each, list) or not all(isinstance(c, str) for c in for_each):
            raise SpecError(f"{at}.for_each: expected a list of column names")
        out.append(
            Claim(
                paper=e["paper"],
                claim=e["claim"],
                source=e["source"],
                sweep=e["sweep"],
                metric=e["metric"],
                cells=tuple((str(k), _filters(v, f"{at}.cells.{k}")) for k, v in cells.items()),
                rule=e["rule"],
                where=_filters(e.get("where", []), f"{at}.where"),
                for_each=tuple(for_each),
                value=None if value is None else float(value),
                among=_filters(e.get("among", []), f"{at}.among"),
                note=str(e.get("note", "")),
            )
        )
    return out


def _absent(df: pd.DataFrame, filters: tuple[str, ...]) -> list[str]:
    """The columns `filters` name that `df` lacks (as apply_where resolves names)."""
    out = []
    for expr in filters:
        m = _WHERE.match(expr)
        col = frame_column(m.group(1)) if m else ""
        if m and col not in df.columns and f"param.{col}" not in df.columns:
            out.append(m.group(1))
    return out


def _cell(df: pd.DataFrame, name: str, filters: tuple[str, ...], metric: str) -> Cell | None:
    """The best config (by mean `metric` over its repeats) among the trials matching `filters`
    (None where none does, or where a filter names a parameter no trial has)."""
    if _absent(df, filters):
        return None
    rows = apply_where(df, filters)
    rows = rows[rows[metric].notna()]
    if rows.empty:
        return None
    lo_col, hi_col = INTERVAL_OF.get(metric, (None, None))
    keys = settings_keys(rows, CONFIG_KEY)
    best = None
    for _, g in rows.groupby(keys, sort=False):
        value = float(g[metric].mean())
        if best is None or value > best[0]:
            best = (value, g)
    value, g = best
    first = g.iloc[0]
    return Cell(
        name=name,
        value=value,
        lo=float(first[lo_col]) if lo_col in g else math.nan,
        hi=float(first[hi_col]) if hi_col in g else math.nan,
        params=str(first["params"]),
        machine=", ".join(sorted(set(g["machine"]))),
        trials=tuple(int(t) for t in sorted(g["trial_id"])),
    )


def relation(a: Cell, b: Cell) -> str:
    """above / level / below: by the intervals where both have one, else by the values."""
    if not any(math.isnan(x) for x in (a.lo, a.hi, b.lo, b.hi)):
        return "above" if a.lo > b.hi else "below" if a.hi < b.lo else "level"
    return "above" if a.value > b.value else "below" if a.value < b.value else "level"


def decide(claim: Claim, cells: list[Cell], among: list[Cell]) -> tuple[str, str]:
    """(verdict, why) of one setting whose cells all matched."""
    first = cells[0]
    if claim.rule in ("order", "above", "below"):
        names = {
            "order": list(zip(cells, cells[1:])),
            "above": [(first, c) for c in cells[1:]],
            "below": [(c, cells[-1]) for c in cells[:-1]],
        }[claim.rule]
        pairs = [relation(x, y) for x, y in names]
        why = "; ".join(f"{x.name} {r} {y.name}" for (x, y), r in zip(names, pairs))
        n = sum(r == "above" for r in pairs)
        return ("reproduced" if n == len(pairs) else "not" if n == 0 else "partly"), why
    if claim.rule == "at_least":
        ratio = first.value / cells[1].value
        r = relation(first, cells[1])
        why = (
            f"{first.name} / {cells[1].name} = {ratio:.3f} (claim: at least {claim.value:g}); "
            f"{first.name} {r} {cells[1].name}"
        )
        met = (ratio >= claim.value) + (r == "above")
        return ("reproduced" if met == 2 else "partly" if met == 1 else "not"), why
    if claim.rule == "best":
        top = max([*among, first], key=lambda c: c.value)
        if top.trials == first.trials:
            return "reproduced", f"{first.name} is the best"
        r = relation(first, top)
        ci = "" if math.isnan(top.lo) else f" ({top.lo:.2f}-{top.hi:.2f})"
        trials = ", ".join(map(str, top.trials))
        why = f"{first.name} {r} the best, {top.value:.3f}{ci} [{top.params}; trials {trials}]"
        return ("not" if r == "below" else "reproduced"), why
    sign = 1 if claim.rule == "nondecreasing" else -1
    against = "below" if sign > 0 else "above"
    ends = relation(cells[-1], first)
    falls = [(y, x) for x, y in zip(cells, cells[1:]) if relation(y, x) == against]
    steps = [f"{y.name} {against} {x.name}" for y, x in falls]
    why = (
        ", ".join(f"{c.name} {c.value:.3f}" for c in cells)
        + f"; {cells[-1].name} {ends} {first.name}"
        + (f"; {', '.join(steps)}" if steps else "")
    )
    if ends == ("above" if sign > 0 else "below"):
        return ("partly" if steps else "reproduced"), why
    if steps or sign * (cells[-1].value - first.value) <= 0:
        return "not", why
    return "partly", why


def _among(df: pd.DataFrame, claim: Claim) -> list[Cell]:
    rows = apply_where(df, claim.among)
    rows = rows[rows[claim.metric].notna()]
    keys = settings_keys(rows, CONFIG_KEY)
    out = []
    for _, g in rows.groupby(keys, sort=False):
        c = _cell(g, "config", (), claim.metric)
        if c is not None:
            out.append(c)
    return out


def evaluate(claim: Claim, df: pd.DataFrame) -> list[Outcome]:
    """One Outcome per setting (for_each value combination) of `claim` over its sweep's frame."""
    if claim.metric not in df.columns:
        raise QueryError(f"claim {claim.claim!r}: unknown metric {claim.metric!r}")
    df = apply_where(df, claim.where)
    columns = []  # for_each names a parameter by its bare name, as the filters do
    for c in claim.for_each:
        col = frame_column(c)
        col = col if col in df.columns else f"param.{col}"
        if col not in df.columns:
            raise QueryError(f"claim {claim.claim!r}: unknown for_each column {c!r}")
        columns.append(col)
    settings = [("", df)]
    if claim.for_each:
        groups = df.groupby(columns, sort=True, dropna=False)
        settings = [
            (", ".join(f"{c}={v}" for c, v in zip(claim.for_each, k)), g) for k, g in groups
        ]
    out = []
    for label, g in settings:
        cells = [_cell(g, name, f, claim.metric) for name, f in claim.cells]
        if any(c is None for c in cells):
            missing = []
            for (n, f), c in zip(claim.cells, cells):
                if c is None:
                    absent = _absent(g, f)
                    missing.append(n + (f" (no trial has {', '.join(absent)})" if absent else ""))
            out.append(
                Outcome(label, tuple(cells), "no data", f"no trial for {', '.join(missing)}")
            )
            continue
        verdict, why = decide(claim, cells, _among(g, claim) if claim.rule == "best" else [])
        out.append(Outcome(label, tuple(cells), verdict, why))
    return out


def overall(outcomes: list[Outcome]) -> str:
    """A claim's verdict over its settings: reproduced / partly (k of n) / not / no data."""
    known = [o for o in outcomes if o.verdict != "no data"]
    if not known:
        return "no data"
    n = sum(o.verdict == "reproduced" for o in known)
    if n == len(known) and len(known) == len(outcomes):
        return "reproduced"
    if n == 0 and not any(o.verdict == "partly" for o in known):
        return "not reproduced"
    return f"partly ({n} of {len(outcomes)} settings)" if len(outcomes) > 1 else "partly"


def claims_report(store: Store, claims: list[Claim]) -> list[tuple[Claim, list[Outcome]]]:
    """Every claim evaluated over its sweep (each sweep's frame read once)."""
    frames: dict[str, pd.DataFrame] = {}
    out = []
    for claim in claims:
        if claim.sweep not in frames:
            try:
                frames[claim.sweep] = load_frame(
                    store, claim.sweep, per_prompt=True, certificates=False
                )
            except ConfigError as e:
                raise QueryError(f"claim {claim.claim!r}: {e}") from None
        out.append((claim, evaluate(claim, frames[claim.sweep])))
    return out


def _num(c: Cell) -> str:
    ci = "" if math.isnan(c.lo) else f" ({c.lo:.2f}-{c.hi:.2f})"
    return f"{c.name} {c.value:.3f}{ci}"


def render_claims(results: list[tuple[Claim, list[Outcome]]]) -> str:
    """Markdown: the claims table (one row per claim: verdict, numbers with 95% intervals, the
    machines, the sweep), then each claim's settings with their cells' configs and trial ids."""
    lines = [
        "| paper | claim | here | numbers (95% CI) | measured on | sweep |",
        "|---|---|---|---|---|---|",
    ]
    details = []
    for i, (claim, outcomes) in enumerate(results, start=1):
        verdict = overall(outcomes)
        shown = [o for o in outcomes if o.verdict != "no data"]
        if len(outcomes) == 1 and shown:
            numbers = "; ".join(_num(c) for c in shown[0].cells)
        else:
            numbers = f"{len(outcomes)} settings: claim {i} below" if shown else outcomes[0].why
        machines = sorted({c.machine for o in shown for c in o.cells if c is not None})
        note = f"; {claim.note}" if claim.note else ""
        lines.append(
            f"| {claim.paper} | {claim.claim} ({claim.source}) | **{verdict}**{note} | {numbers} "
            f"| {', '.join(machines) or '-'} | {claim.sweep} |"
        )
        rule = f"rule `{claim.rule}`: {RULES[claim.rule]}; metric `{claim.metric}`"
        details += [
            "",
            f"**Claim {i}.** {claim.paper}: {claim.claim} ({claim.source}); {rule}.",
            "",
        ]
        for o in outcomes:
            head = f"{o.setting}: " if o.setting else ""
            cells = "; ".join(
                f"{_num(c)} [{c.params}; trials {', '.join(map(str, c.trials))}]"
                for c in o.cells
                if c is not None
            )
            details.append(f"- {head}{o.verdict}: {o.why}. {cells}".rstrip())
    return "\n".join(lines + details) + "\n"


BEGIN, END = "<!-- claims:begin -->", "<!-- claims:end -->"


def read_document(path: Path) -> str:
    """The text of a document to hold the claims table (QueryError naming `path` unless it is
    a readable file with one BEGIN line and one END line after it)."""
    try:
        doc = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise QueryError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    if doc.count(BEGIN) != 1 or doc.count(END) != 1 or doc.index(BEGIN) > doc.index(END):
        raise QueryError(f"{path}: needs one {BEGIN} line and one {END} line after it")
    return doc


def into_document(doc: str, table: str) -> str:
    """`doc` (read_document's) with the text between its BEGIN and END lines replaced by
    `table`."""
    head, rest = doc.split(BEGIN)
    return f"{head}{BEGIN}\n{table.strip(chr(10))}\n{END}{rest.split(END, 1)[1]}"
