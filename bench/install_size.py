"""Size of the default install (``pip install llmdiag``, no torch, no extras) in a fresh venv.

Builds the wheel of this checkout (``python -m pip wheel --no-deps``; from a snapshot of the
tracked and untracked-but-not-ignored files in a temp dir, so nothing is written into the
working tree, or with ``--in-place`` straight from the checkout), creates a fresh venv with
the running interpreter, ``pip install``s the wheel with its default dependencies, and prints:

- the size of the venv's site-packages (MB and MiB), in all and without the installer's own
  pip/setuptools (which every venv has, whatever it installs),
- the ten largest distributions (the files their RECORD lists, as installed, ``.pyc`` included),
- whether torch, pandas and matplotlib are absent (goal: the default install < 100 MB).

``--extras parquet,plots`` measures a second fresh venv with those extras too.
``--keep-venv PATH`` builds the default venv at PATH and keeps it (bench/log_throughput.py
``--engines --default-venv PATH`` reuses it); otherwise everything lives in a temp dir that is
deleted at the end. Exit status 0, or 1 with one line on stderr.

    python bench/install_size.py [--extras parquet,plots] [--keep-venv PATH] [--in-place]

Stdlib only: any interpreter with pip can run it, e.g. one of the pyenv Pythons, and the venv
is built with that interpreter.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: what a venv brings along whatever is installed into it (not llmdiag's weight)
INSTALLER = {"pip", "setuptools", "wheel"}
#: must not come with the default install
HEAVY = ("torch", "pandas", "matplotlib")
GOAL_MB = 100


class BenchError(Exception):
    """A step failed; the message is one line."""


def _run(argv: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, **kw)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        raise BenchError(f"{what} failed ({proc.returncode}): {lines[-1] if lines else 'no output'}")
    return proc


def snapshot(repo: Path, dest: Path) -> Path:
    """Copy the files git would see (tracked, plus untracked but not ignored) to ``dest``."""
    out = _run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
               "git ls-files").stdout
    for rel in sorted(set(filter(None, out.split("\0")))):
        src = repo / rel
        if src.is_file():  # skips files deleted in the working tree but still in the index
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def build_wheel(outdir: Path, repo: Path = REPO, in_place: bool = False) -> Path:
    """``python -m pip wheel --no-deps -w outdir`` of the checkout; returns the wheel's path."""
    outdir.mkdir(parents=True, exist_ok=True)
    src = repo if in_place else snapshot(repo, Path(tempfile.mkdtemp(prefix="src-", dir=outdir.parent)))
    try:
        _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(outdir), str(src)],
             "pip wheel")
    finally:
        if not in_place:
            shutil.rmtree(src, ignore_errors=True)
    wheels = sorted(outdir.glob("llmdiag-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise BenchError(f"pip wheel wrote no llmdiag wheel to {outdir}")
    return wheels[-1]


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def make_venv(venv: Path, wheel: Path, extras: tuple[str, ...] = ()) -> Path:
    """A fresh venv (the running interpreter) with ``wheel`` and its dependencies; returns its python."""
    _run([sys.executable, "-m", "venv", "--clear", str(venv)], "python -m venv")
    py = venv_python(venv)
    req = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", req], "pip install")
    return py


def build_default_venv(venv: Path, extras: tuple[str, ...] = (), repo: Path = REPO,
                       in_place: bool = False) -> Path:
    """Build this checkout's wheel and install it into a fresh venv at ``venv``; returns its python.

    The wheel is built in a temp dir of its own, deleted afterwards.
    """
    tmp = Path(tempfile.mkdtemp(prefix="llmdiag-wheel-"))
    try:
        return make_venv(venv, build_wheel(tmp / "dist", repo, in_place), extras)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def site_packages(py: Path) -> Path:
    out = _run([str(py), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               "locating site-packages").stdout
    return Path(out.strip())


def _walk(root: Path) -> dict[Path, tuple[int, int]]:
    """Every regular file under ``root``: (apparent size, bytes on disk)."""
    files = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath, n)
            st = p.lstat()
            if not p.is_symlink():
                files[p.resolve()] = (st.st_size, st.st_blocks * 512)
    return files


def measure(site: Path) -> dict:
    """Total size of ``site`` and per distribution (files from its RECORD, each counted once)."""
    files = _walk(site)
    owned: set[Path] = set()
    dists = []
    for dist in metadata.distributions(path=[str(site)]):
        name = dist.metadata["Name"] or "?"
        size = pyc = 0
        for f in dist.files or ():
            p = Path(dist.locate_file(f)).resolve()
            if p in files and p not in owned:
                owned.add(p)
                size += files[p][0]
                pyc += files[p][0] if p.parent.name == "__pycache__" else 0
        dists.append((name, dist.version, size, pyc))
    unowned = sum(v[0] for p, v in files.items() if p not in owned)
    if unowned:
        dists.append(("(files no RECORD lists)", "", unowned, 0))
    dists.sort(key=lambda d: -d[2])
    total = sum(v[0] for v in files.values())
    installer = sum(d[2] for d in dists if d[0].lower() in INSTALLER)
    own_pyc = sum(d[3] for d in dists if d[0].lower() not in INSTALLER)
    return {"total": total, "disk": sum(v[1] for v in files.values()), "installer": installer, "dists": dists,
            "own_pyc": own_pyc,
            "names": {d[0].lower().replace("_", "-") for d in dists}}


def absent(py: Path, names: tuple[str, ...] = HEAVY) -> dict[str, bool]:
    """Whether each of ``names`` can NOT be imported in the venv (isolated mode: no cwd, no PYTHONPATH)."""
    code = ("import importlib.util, sys\n"
            "print(' '.join('1' if importlib.util.find_spec(n) is None else '0' for n in sys.argv[1:]))")
    out = _run([str(py), "-I", "-c", code, *names], "import check").stdout.split()
    return {n: flag == "1" for n, flag in zip(names, out)}


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB ({n / 2**20:.1f} MiB)"


def report(title: str, py: Path, top: int = 10) -> dict:
    site = site_packages(py)
    m = measure(site)
    own = m["total"] - m["installer"]
    print(f"== {title}")
    print(f"venv          : {py.parent.parent}  ({sys.version.split()[0]})")
    print(f"site-packages : {mb(m['total'])} in all, {m['disk'] / 2**20:.1f} MiB on disk")
    print(f"without pip   : {mb(own)}  (llmdiag and its dependencies; pip/setuptools {mb(m['installer'])})")
    print(f"  of which    : {mb(m['own_pyc'])} .pyc that pip compiles at install (none with --no-compile)")
    print(f"top {top} by size (MB; .pyc included, then the .pyc alone):")
    for name, version, size, pyc in m["dists"][:top]:
        print(f"  {name:28s} {version:14s} {size / 1e6:8.1f} MB  {100 * size / m['total']:5.1f} %"
              f"  (.pyc {pyc / 1e6:.1f})")
    flags = absent(py)
    print("absent        : " + ", ".join(f"{n} {'yes' if ok else 'NO (installed)'}" for n, ok in flags.items()))
    m["own"] = own
    m["absent"] = flags
    return m


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--extras", default="", help="comma-separated extras to measure too, e.g. parquet,plots")
    ap.add_argument("--keep-venv", type=Path, metavar="PATH",
                    help="build the default venv at PATH and keep it (for log_throughput.py --default-venv)")
    ap.add_argument("--in-place", action="store_true",
                    help="build the wheel straight from the checkout (setuptools writes build/ and *.egg-info there)")
    args = ap.parse_args(argv)
    extras = tuple(e.strip() for e in args.extras.split(",") if e.strip())
    tmp = Path(tempfile.mkdtemp(prefix="llmdiag-size-"))
    try:
        wheel = build_wheel(tmp / "dist", REPO, args.in_place)
        print(f"wheel         : {wheel.name}  {mb(wheel.stat().st_size)}")
        venv = args.keep_venv.resolve() if args.keep_venv else tmp / "venv"
        m = report("default install (no extras)", make_venv(venv, wheel))
        verdict = "ok" if m["own"] < GOAL_MB * 1e6 else "OVER"
        heavy = [n for n, ok in m["absent"].items() if not ok]
        print(f"goal          : < {GOAL_MB} MB without torch -> {m['own'] / 1e6:.1f} MB, {verdict}"
              + (f"; heavy packages present: {', '.join(heavy)}" if heavy else ""))
        if args.keep_venv:
            print(f"kept          : {venv}")
        if extras:
            e = report(f"with extras [{','.join(extras)}]", make_venv(tmp / "venv-extras", wheel, extras))
            added = sorted(e["names"] - m["names"])
            print(f"extras add    : {mb(e['own'] - m['own'])}: {', '.join(added)}")
    except (BenchError, OSError) as exc:
        print(f"install_size: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
