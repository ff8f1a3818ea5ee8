"""What the refresh commands of the other upstreams (`python -m specreg.transformers refresh`,
`python -m specreg.speculators refresh`) share: the wheel from PyPI, the package's own code run in a child
interpreter with the wheel first on its path, its answer read as untrusted input, and the one file
written into `--out`. Each command adds only its child's code and the checks of its own answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from specreg.errors import SpecregError

#: the most a child's answer may hold (the committed facts files are tens of KiB)
MAX_FOUND_BYTES = 16 * 1024 * 1024


class RefreshError(SpecregError):
    """The facts could not be computed: the wheel, the download or the child interpreter failed."""


def run_child(package: str, code: str, python: str, wheel: Path | None, *args: str) -> dict:
    """What `code` writes (as JSON, into the file named by its first argument) when run by `python`
    with `wheel` unpacked first on its path (else the `package` installed there), checked: an object
    whose `package` key is a version in its canonical spelling (it names the file written, so "../x"
    would place it elsewhere) and, for a wheel, that wheel's version."""
    with tempfile.TemporaryDirectory(prefix=f"specreg-{package}-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["TRANSFORMERS_VERBOSITY"] = "error"
        if wheel is not None:
            try:
                with zipfile.ZipFile(wheel) as zf:
                    zf.extractall(Path(tmp) / "wheel")
            except (OSError, zipfile.BadZipFile) as exc:
                raise RefreshError(f"not a readable wheel ({exc})", source=str(wheel)) from None
            env["PYTHONPATH"] = str(Path(tmp) / "wheel")
        out = Path(tmp) / "facts.json"
        try:
            run = subprocess.run(
                [python, "-c", code, str(out), *args], capture_output=True, text=True, env=env, timeout=900, cwd=tmp
            )
        except OSError as exc:
            raise RefreshError(f"cannot run it ({exc.strerror or exc})", source=python) from None
        if run.returncode != 0:
            last = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RefreshError(f"could not read {package}'s facts: {last}", source=python)
        found = read_answer(package, out, python)
    if wheel is not None and not Path(wheel).name.startswith(f"{package}-{found[package]}-"):
        raise RefreshError(
            f"gave {package} {found[package]}: is a {package} package installed in a way that wins over the wheel's?",
            source=str(wheel),
        )
    return found


def read_answer(package: str, out: Path, python: str) -> dict:
    """The child's answer file, bounded and strict: one error naming the interpreter, the JSON path and
    the value for anything but an object with a canonical `package` version."""
    from packaging.version import InvalidVersion, Version

    from specreg.errors import printable
    from specreg.sources.files import read_regular

    try:
        data = json.loads(read_regular(out, MAX_FOUND_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise RefreshError(f"exited 0 but wrote no facts (is it a Python with {package}?)", source=python) from None
    except (OSError, ValueError) as exc:  # invalid JSON, not UTF-8, too large, not a file
        raise RefreshError(f"wrote no facts file that reads as JSON ({exc})", source=python) from None
    if not isinstance(data, dict):
        raise RefreshError(f"reported $ = {printable(repr(data))[:80]}: not an object", source=python)
    version = data.get(package)
    try:
        canonical = isinstance(version, str) and str(Version(version)) == version
    except InvalidVersion:
        canonical = False
    if not canonical:
        raise RefreshError(
            f"reported $.{package} = {printable(repr(version))[:80]}: not a {package} version", source=python
        )
    return data


def download(package: str, version: str, into: Path) -> Path:
    """package==version's wheel, downloaded by pip (no dependencies)."""
    run = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", f"{package}=={version}",
         "-d", str(into)],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    wheels = sorted(into.glob(f"{package}-{version}-*.whl"))
    if run.returncode != 0 or not wheels:
        last = (run.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise RefreshError(f"pip could not download {package} {version}: {last}", source=version)
    return wheels[0]


def check_out(out: Path) -> None:
    """--out must be a directory or not exist yet (a link, even to a directory, or a file is refused,
    as every writer of specreg refuses them); checked before the wheel is downloaded."""
    from specreg.errors import printable

    if out.is_symlink():
        raise RefreshError(
            f"is a link to {printable(os.path.realpath(out))}: give the directory itself", source=str(out)
        )
    if out.exists() and not out.is_dir():
        raise RefreshError("is not a directory: --out names the folder <version>.json is written into", source=str(out))


def text(found: dict) -> str:
    """The committed file's text: one value per line, so that two releases diff line by line."""
    return json.dumps(found, indent=1, sort_keys=True) + "\n"


def write(out: Path, version: str, found: dict) -> Path:
    """`found` as `out`/<version>.json, replaced atomically; an OS failure is one line."""
    from specreg import atomic

    target = out / f"{version}.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(target, text(found).encode("utf-8"))
    except OSError as exc:
        raise RefreshError(f"cannot write {target}: {exc.strerror or exc}", source=str(out)) from None
    return target


def acquire(package: str, version: str | None, wheel: Path | None, out: Path, compute) -> dict:
    """`compute(wheel)` on `wheel`, or on the wheel of `package==version` downloaded for it, after
    checking `out`; the facts must be of `version` when one was asked for."""
    check_out(out)
    with tempfile.TemporaryDirectory(prefix=f"specreg-{package}-wheel-") as tmp:
        if version is not None and wheel is None:
            wheel = download(package, version, Path(tmp))
        found = compute(wheel)
    if version is not None and found[package] != version:
        raise RefreshError(f"asked for {package} {version}, read {found[package]}", source=version)
    return found


def add_refresh_parser(commands, package: str, folder: Path, example: str, needs: str):  # noqa: ANN001, ANN201
    """The `refresh` command both refresh CLIs take: a version, or --wheel, --python and --out."""
    r = commands.add_parser("refresh", help=f"compute one {package} release's facts from its wheel and write them")
    r.add_argument("version", nargs="?", help=f"the release to download (pip) and read, e.g. {example}")
    r.add_argument("--wheel", type=Path, help=f"a downloaded {package} wheel to read instead")
    r.add_argument(
        "--python",
        default=sys.executable,
        help=f"the interpreter that runs {package} (it needs {needs}; default: this one)",
    )
    r.add_argument("--out", type=Path, default=folder, help=f"where to write <version>.json (default {folder})")
    return r


def run_refresh(refresh, args) -> int:  # noqa: ANN001
    """Run a refresh command's `refresh(version, wheel, python, out)`: the file written on stdout, or one
    error line (exit 2; 130 when interrupted, nothing written), never a traceback."""
    try:
        written = refresh(args.version, args.wheel, args.python, args.out)
    except SpecregError as exc:
        print(f"error: {exc.line()}", file=sys.stderr)
        return 2
    except OSError as exc:  # the machine said no (a temporary folder, a full disk): one line, not a traceback
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: nothing was written", file=sys.stderr)
        return 130
    print(written)
    return 0
