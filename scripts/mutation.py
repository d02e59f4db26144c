#!/usr/bin/env python3
"""Mutation testing of the modules that decide results, with cosmic-ray.

Each module of tests/mutation/modules.yaml is mutated (flipped comparisons, changed constants, swapped
and/or, removed not, emptied loops, ...) in a copy of the repository, and only that module's own tests
run against each mutant. A mutant the tests let pass "survives". The score of a module is

    killed / (killed + survived - equivalent)

where an equivalent mutant is a survivor listed in tests/mutation/equivalent.yaml with the reason it
cannot change any result. A module below the minimum score fails the run.

    python scripts/mutation.py                      # every module
    python scripts/mutation.py --module check       # one
    python scripts/mutation.py --changed            # those changed since their recorded score
    python scripts/mutation.py --changed --base REF # those changed since the merge base with REF
    python scripts/mutation.py --record             # and write the scores to tests/mutation/scores.json

The copy is made from the working tree (tracked and untracked, not ignored files), so the files in
the checkout are never mutated, even when a run is interrupted.
"""

from __future__ import annotations

import argparse
import ast
import datetime as _dt
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = ROOT / "tests" / "mutation"
PACKAGE = "kernelseek_suite"  # the import name of suite/
ANNOTATION = "in an annotation, never evaluated"


@dataclass
class Module:
    name: str
    path: str
    tests: list[str]


@dataclass
class Equivalent:
    module: str
    original: str
    mutant: str
    reason: str


@dataclass
class Survivor:
    operator: str
    line: int
    original: str
    mutant: str
    equivalent: str | None = None  # the reason, when listed as equivalent


@dataclass
class ModuleScore:
    module: str
    path: str
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    incompetent: int = 0
    annotations: int = 0  # mutants inside annotations, not run (see annotation_spans)
    seconds: float = 0.0
    survivors: list[Survivor] = field(default_factory=list)

    @property
    def score(self) -> float:
        scored = self.killed + self.survived - self.equivalent
        return self.killed / scored if scored else 1.0


def load_modules() -> tuple[dict[str, Module], float]:
    cfg = yaml.safe_load((CONFIG_DIR / "modules.yaml").read_text())
    mods = {name: Module(name, m["path"], list(m["tests"])) for name, m in cfg["modules"].items()}
    return mods, float(cfg["min_score"])


def load_equivalents() -> list[Equivalent]:
    entries = yaml.safe_load((CONFIG_DIR / "equivalent.yaml").read_text()) or []
    out = []
    for e in entries:
        missing = {"module", "original", "mutant", "reason"} - set(e)
        if missing or not str(e["reason"]).strip():
            raise SystemExit(f"equivalent.yaml: an entry lacks {', '.join(sorted(missing)) or 'a reason'}: {e}")
        out.append(Equivalent(e["module"], _norm(e["original"]), _norm(e["mutant"]), e["reason"].strip()))
    return out


def _norm(line: str) -> str:
    return " ".join(str(line).split())


def fingerprint(mod: Module, root: Path | None = None) -> str:
    """What a module's score depends on: its source and its tests."""
    root = root or ROOT
    h = hashlib.sha256()
    for rel in [mod.path, *mod.tests]:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()


def load_scores() -> dict:
    p = CONFIG_DIR / "scores.json"
    return json.loads(p.read_text()) if p.exists() else {"schema_version": 1, "modules": {}}


def changed_modules(mods: dict[str, Module], base: str | None) -> list[str]:
    """Modules whose source or tests differ from the merge base with `base`; without a base, from
    what they were when their score was recorded (scores.json)."""
    if base:
        mb = subprocess.run(
            ["git", "merge-base", "HEAD", base], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        names = subprocess.run(
            ["git", "diff", "--name-only", mb], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        untracked = subprocess.run(
            ["git", "ls-files", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        touched = set(names) | set(untracked)
        return [n for n, m in mods.items() if touched & {m.path, *m.tests}]
    recorded = load_scores()["modules"]
    return [n for n, m in mods.items() if recorded.get(n, {}).get("fingerprint") != fingerprint(m)]


def copy_tree(dest: Path) -> None:
    """The working tree's files (tracked, and untracked ones git does not ignore) and an import path
    on which `kernelseek_suite` is this copy's suite/."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / ".import").mkdir()
    (dest / ".import" / PACKAGE).symlink_to(dest / "suite")


def _env(copy: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(copy / ".import"), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _cosmic(copy: Path, env: dict, *args: str, out=None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "cosmic_ray.cli", *args]
    r = subprocess.run(cmd, cwd=copy, env=env, text=True, stdout=out or subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise SystemExit(f"cosmic-ray {args[0]} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r


def _diff_lines(diff: str) -> tuple[int, str, str]:
    """The line number, original and mutated line of a one-line mutation's unified diff."""
    line, old, new = 0, "", ""
    for d in (diff or "").splitlines():
        if d.startswith("@@"):
            line = int(d.split()[1].lstrip("-").split(",")[0])
        elif d.startswith("-") and not d.startswith("---"):
            old = old or d[1:]
        elif d.startswith("+") and not d.startswith("+++"):
            new = new or d[1:]
    return line, _norm(old), _norm(new)


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where the annotations of a module are, when `from __future__ import annotations` keeps them
    unevaluated (a mutant there cannot change what the module does); else none."""
    tree = ast.parse(source)
    if not any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    ):
        return []
    notes = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.returns is not None:
            notes.append(node.returns)
        elif isinstance(node, ast.arg) and node.annotation is not None:
            notes.append(node.annotation)
        elif isinstance(node, ast.AnnAssign):
            notes.append(node.annotation)
    return [((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in notes]


def skip_annotation_mutants(db: str, source: str) -> None:
    """Mark the mutants inside annotations as skipped before the run (see annotation_spans)."""
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans = annotation_spans(source)
    with use_db(db) as work_db:
        for item in list(work_db.pending_work_items):
            pos = tuple(item.mutations[0].start_pos)
            if any(a <= pos < b for a, b in spans):
                work_db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED, output=ANNOTATION))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"a cosmic-ray worker exited at start ({proc.returncode})")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"a cosmic-ray worker did not listen on port {port} within {seconds:.0f} s")


def run_module(mod: Module, equivalents: list[Equivalent], jobs: int = 1) -> ModuleScore:
    """Mutate one module in copies of the tree; with jobs > 1, that many cosmic-ray http workers, each
    in its own copy, run the mutants."""
    t0 = time.monotonic()
    result = ModuleScore(mod.name, mod.path)
    workers: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory(prefix=f"mutation-{mod.name}-") as tmp:
        copies = [Path(tmp) / f"repo{i}" for i in range(max(1, jobs))]
        for copy in copies:
            copy.mkdir()
            copy_tree(copy)
        copy, env = copies[0], _env(copies[0])
        where = subprocess.run(
            [sys.executable, "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not Path(where).resolve().is_relative_to(copy.resolve()):
            raise SystemExit(f"{PACKAGE} imports from {where}, not from the copy being mutated")
        tests = " ".join(shlex.quote(t) for t in mod.tests)
        command = (
            f"{shlex.quote(sys.executable)} -m pytest -x -q -p no:cacheprovider -p no:hypothesispytest -p no:anyio "
            f"-p no:benchmark -o addopts='' --timeout=60 {tests}"
        )
        t1 = time.monotonic()
        base = subprocess.run(command, shell=True, cwd=copy, env=env, capture_output=True, text=True)
        if base.returncode != 0:
            raise SystemExit(f"{mod.name}: the tests fail unmutated:\n{base.stdout[-3000:]}{base.stderr[-2000:]}")
        timeout = max(30.0, 10 * (time.monotonic() - t1))
        if jobs > 1:
            urls = []
            for c in copies:
                port = _free_port()
                workers.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "cosmic_ray.cli", "http-worker", "--port", str(port)],
                        cwd=c,
                        env=_env(c),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
                _wait_for_port(port, workers[-1])
                urls.append(f"http://127.0.0.1:{port}")
            distributor = (
                f'[cosmic-ray.distributor]\nname = "http"\n[cosmic-ray.distributor.http]\n'
                f"worker-urls = {json.dumps(urls)}\n"
            )
        else:
            distributor = '[cosmic-ray.distributor]\nname = "local"\n'
        cfg = Path(tmp) / "mutation.toml"
        cfg.write_text(
            "[cosmic-ray]\n"
            f"module-path = {json.dumps(mod.path)}\n"
            f"timeout = {timeout:.1f}\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(command)}\n" + distributor
        )
        db = str(Path(tmp) / "session.sqlite")
        try:
            _cosmic(copy, env, "init", str(cfg), db)
            skip_annotation_mutants(db, (copy / mod.path).read_text())
            _cosmic(copy, env, "exec", str(cfg), db)
            dump = _cosmic(copy, env, "dump", db, out=subprocess.PIPE).stdout
        finally:
            for w in workers:
                w.terminate()
                w.wait(timeout=30)
    for line in dump.splitlines():
        item, res = json.loads(line)
        result.mutants += 1
        if res and res.get("worker_outcome") == "skipped" and res.get("output") == ANNOTATION:
            result.annotations += 1
            continue
        if res is None or res.get("test_outcome") is None or res["test_outcome"] == "incompetent":
            result.incompetent += 1
            continue
        if res["test_outcome"] == "killed":
            result.killed += 1
            continue
        result.survived += 1
        m = item["mutations"][0]
        no, old, new = _diff_lines(res.get("diff") or "")
        s = Survivor(m["operator_name"], no or m["start_pos"][0], old, new)
        eq = next((e for e in equivalents if e.module == mod.name and e.original == old and e.mutant == new), None)
        if eq:
            s.equivalent = eq.reason
            result.equivalent += 1
        result.survivors.append(s)
    result.seconds = time.monotonic() - t0
    return result


def stale_equivalents(equivalents: list[Equivalent], results: list[ModuleScore]) -> list[Equivalent]:
    """Entries for a module that was run that matched no surviving mutant (fixed, or the code moved)."""
    ran = {r.module: r for r in results}
    return [
        e
        for e in equivalents
        if e.module in ran
        and not any(s.equivalent and s.original == e.original and s.mutant == e.mutant for s in ran[e.module].survivors)
    ]


def _commit() -> str:
    sha = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return sha + ("+changes" if dirty else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", help="a module of tests/mutation/modules.yaml (repeatable)")
    ap.add_argument("--changed", action="store_true", help="only the modules changed (see --base)")
    ap.add_argument("--base", help="with --changed: a git ref; changed since the merge base with it")
    ap.add_argument("--record", action="store_true", help="write the scores to tests/mutation/scores.json")
    ap.add_argument("--json", help="write the full results (every survivor) to this file")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run at once (one copy of the tree each)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the workers and remove the copies
    mods, min_score = load_modules()
    names = args.module or list(mods)
    unknown = [n for n in names if n not in mods]
    if unknown:
        ap.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(mods)}")
    if args.changed:
        changed = changed_modules(mods, args.base)
        names = [n for n in names if n in changed]
        if not names:
            print(
                "mutation: no module changed"
                + (f" since the merge base with {args.base}" if args.base else " since its recorded score")
                + "; nothing to run"
            )
            return 0
    equivalents = load_equivalents()
    results = []
    for n in names:
        print(f"mutation: {n} ({mods[n].path}) against {' '.join(mods[n].tests)}", flush=True)
        r = run_module(mods[n], equivalents, args.jobs)
        results.append(r)
        for s in r.survivors:
            tag = f"equivalent: {s.equivalent}" if s.equivalent else "SURVIVED"
            print(f"  {r.path}:{s.line} {s.operator}\n      - {s.original}\n      + {s.mutant}\n      {tag}")
        print(
            f"  {n}: {r.killed} killed, {r.survived} survived ({r.equivalent} equivalent), "
            f"{r.incompetent} incompetent, {r.annotations} in annotations (not run), of {r.mutants}: "
            f"score {r.score:.1%} in {r.seconds:.0f} s",
            flush=True,
        )
    stale = stale_equivalents(equivalents, results)
    for e in stale:
        print(f"mutation: equivalent.yaml entry matched no survivor of {e.module}: {e.original!r} -> {e.mutant!r}")
    print("\n| module | mutants | killed | survived | equivalent | score |\n|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r.path} | {r.mutants} | {r.killed} | {r.survived} | {r.equivalent} | {r.score:.1%} |")
    if args.json:
        Path(args.json).write_text(json.dumps([{**asdict(r), "score": r.score} for r in results], indent=1))
    if args.record:
        scores = load_scores()
        when, commit = _dt.date.today().isoformat(), _commit()
        for r in results:
            scores["modules"][r.module] = {
                "path": r.path,
                "fingerprint": fingerprint(mods[r.module]),
                "date": when,
                "commit": commit,
                "mutants": r.mutants,
                "killed": r.killed,
                "survived": r.survived,
                "equivalent": r.equivalent,
                "incompetent": r.incompetent,
                "annotations": r.annotations,
                "score": round(r.score, 4),
                "seconds": round(r.seconds),
            }
        (CONFIG_DIR / "scores.json").write_text(json.dumps(scores, indent=1, sort_keys=True) + "\n")
    low = [r for r in results if r.score < min_score]
    for r in low:
        print(f"mutation: {r.module} scores {r.score:.1%}, below {min_score:.0%}")
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
