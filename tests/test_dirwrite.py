"""specreg/dirwrite.py: a write into a user's directory never loses what the user had. Killed at every
step (not at random), DIR holds the whole previous draft or the whole new one plus only leftovers the
next run proves are its own; the plain rerun then succeeds. Planted journals, set-aside files and stage
folders are named and never acted on; swapping DIR for a link mid-write redirects nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import specreg
from specreg import dirwrite
from conftest import fixture_config, run_specreg
from hostile_helpers import run
from weights import write_draft


def snapshot(directory):
    """Every entry of DIR: a link's target, a file's bytes, a folder's own snapshot; a manifest less the
    folder it is bound to (a DIR made again has another inode) and so its signature."""
    out = {}
    for p in sorted(directory.iterdir()):
        if p.is_symlink():
            out[p.name] = ("link", os.readlink(p))
        elif p.is_dir():
            out[p.name] = ("dir", snapshot(p))
        elif p.name == "specreg.json" and b'"folder"' in (body := p.read_bytes()):
            doc = json.loads(body)
            out[p.name] = ("manifest", {k: v for k, v in doc.items() if k not in ("folder", "signature")})
        else:
            out[p.name] = ("file", p.read_bytes())
    return out


def without_own_leftovers(state):
    """The state less the work folders whose names dirwrite could prove (checked separately)."""
    return {k: v for k, v in state.items() if not dirwrite._WORK.match(k)}


def whole_or_unloadable(state, before, after) -> bool:
    """What a kill may leave: the previous draft or the new one whole (plus this writer's work folder);
    or, killed inside the commit, no config.json (so no engine loads a mix) while every entry of the
    previous draft is still in DIR or set aside in the work folder, and nothing else stands there."""
    plain = without_own_leftovers(state)
    if plain in (before, after):
        return True
    if "config.json" in plain:
        return False
    work = [entry for name, entry in state.items() if dirwrite._WORK.match(name)]
    old = work[0][1].get("old", ("dir", {}))[1] if work else {}
    return all(plain.get(name) == entry or old.get(name) == entry for name, entry in before.items()) and all(
        entry in (before.get(name), after.get(name)) for name, entry in plain.items()
    )


def in_child(action, hook) -> int:
    """Run `action` in a forked child whose every write step first calls `hook`; its wait status."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            dirwrite._step = hook
            action()
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


def kill_at(n: int):
    count = [0]

    def hook(_what: str) -> None:
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


def steps_of(action, monkeypatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(dirwrite, "_step", seen.append)
    action()
    monkeypatch.setattr(dirwrite, "_step", lambda _w: None)
    return seen


def make_drafts(tmp_path):
    """Draft A (two shards) and draft B (one file, another config): their files differ by name and bytes."""
    a = write_draft(tmp_path / "a", fixture_config("dflash"), shards=2)
    b = write_draft(tmp_path / "b", fixture_config("eagle3_generated"))
    return a, b


@pytest.fixture
def drafts(tmp_path):
    return make_drafts(tmp_path)


SCENARIOS = {
    # a first write into a DIR that does not exist yet
    "fresh": dict(before=None, weights="copy", force=False),
    # --copy --force over draft A (a signed manifest) with a file of the user's beside it
    "force over a draft": dict(before="a", weights="copy", force=True),
    # --force over files the user made (no manifest): config.json is the user's until the new one is whole
    "force over the user's files": dict(before="user", weights="link", force=True),
    # no --force over specreg's unchanged write of this same draft (config only): the content check passes
    # after every kill and every rollback, and still refuses once the user edits a file
    "again over this draft": dict(before="b", weights="copy", force=False),
}


def prepare(kind, out, drafts):
    if out.exists():
        shutil.rmtree(out)
    if kind is None:
        return
    if kind == "b":
        specreg.load(drafts[1]).materialize(out, weights="none")
        return
    if kind == "a":
        specreg.load(drafts[0]).materialize(out, weights="copy")
    else:
        out.mkdir()
        (out / "config.json").write_text('{"mine": true}')
    (out / "precious.txt").write_text("keep me")


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_kill_at_every_step_leaves_the_previous_or_the_new_draft_and_the_rerun_succeeds(scenario, tmp_path):
    # in a fresh interpreter: every kill point is a fork, and a fork costs what the forking process
    # holds (a pytest process that has run the verify tests holds ~0.5 GB; a fresh one a tenth)
    code = (
        f"import sys, pathlib; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_dirwrite; "
        f"test_dirwrite.kill_every_step({scenario!r}, pathlib.Path({str(tmp_path)!r}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]


def kill_every_step(scenario: str, tmp_path: Path) -> None:
    """The test above, in the process that forks: a kill at each step, and at each step of the recovery.
    A SIGKILL leaves what the process wrote in the kernel's page cache: what an fsync adds (the bytes on
    the disk across a power loss) is not what a kill can test, so this throwaway interpreter skips the
    ~700 fsyncs of its ~500 writes (a quarter of its time)."""
    os.fsync = lambda _fd: None
    how = SCENARIOS[scenario]
    out = tmp_path / "out"
    drafts = make_drafts(tmp_path)
    new = specreg.load(drafts[1])  # read once: the forked writes below are what is killed

    def write():
        new.materialize(out, weights=how["weights"], force=how["force"])

    prepare(how["before"], out, drafts)
    before = snapshot(out) if out.exists() else {}
    steps: list[str] = []
    dirwrite._step = steps.append
    write()
    dirwrite._step = lambda _w: None
    after = snapshot(out)
    assert before != after and len(steps) >= 8, steps
    for n in range(1, len(steps) + 1):
        prepare(how["before"], out, drafts)
        status = in_child(write, kill_at(n))
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (n, steps[n - 1])
        state = snapshot(out) if out.exists() else {}
        assert whole_or_unloadable(state, before, after), (n, steps[n - 1])
        leftovers = [k for k in state if dirwrite._WORK.match(k)]
        assert len(leftovers) <= 1, (n, leftovers)
        # the recovery itself is killed at each of its steps too: still the whole previous or new draft
        recovery = 1
        while True:
            status = in_child(write, kill_at(recovery))
            if not os.WIFSIGNALED(status):
                break
            state = snapshot(out)
            # the rerun's own write may be what was killed: over the previous draft, or over the new one
            assert whole_or_unloadable(state, before, after) or whole_or_unloadable(state, after, after), (
                n,
                steps[n - 1],
                recovery,
            )
            recovery += 1
        assert status == 0, (n, steps[n - 1], recovery)
        assert snapshot(out) == after, (n, steps[n - 1])  # the plain rerun: whole, no leftovers
    if not how["force"]:
        (out / "config.json").write_text('{"my": "edit"}')
        with pytest.raises(specreg.SpecregError, match=r"changed since specreg wrote it: config\.json \(changed\)"):
            write()
        assert (out / "config.json").read_text() == '{"my": "edit"}'


def test_a_write_that_raises_at_any_step_leaves_the_directory_as_it_was(drafts, tmp_path, monkeypatch):
    out = tmp_path / "out"

    def write():
        specreg.load(drafts[1]).materialize(out, weights="copy", force=True)

    prepare("a", out, drafts)
    before = snapshot(out)
    steps = steps_of(write, monkeypatch)
    commit = steps.index("commit")
    for n, what in enumerate(steps[: commit + 1], 1):
        prepare("a", out, drafts)
        seen = [0]

        def fail(_what, seen=seen, n=n):
            seen[0] += 1
            if seen[0] == n:
                raise OSError(28, "No space left on device")

        monkeypatch.setattr(dirwrite, "_step", fail)
        with pytest.raises(OSError, match="No space left"):
            write()
        monkeypatch.setattr(dirwrite, "_step", lambda _w: None)
        assert snapshot(out) == before, (n, what)


# -- what is planted is never acted on --------------------------------------------------------------------

PLANTED = {
    "journal": (".specreg-write.json", '{"tag":"00000000","state":"writing","names":["thesis.txt"]}'),
    "journal's temporary file": ("..specreg-write.json.specreg-tmp-1-2-0a0b0c0d", "{}"),
    "set-aside file": (".config.json.specreg-old-00000000", '{"planted": true}'),
}


@pytest.mark.parametrize("what", sorted(PLANTED))
@pytest.mark.parametrize("command", ["materialize", "serve --dir"])
def test_a_planted_leftover_is_named_and_never_acted_on(what, command, tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.txt").write_text("four years of work")
    (out / "config.json").write_text('{"mine": true}')
    name, body = PLANTED[what]
    (out / name).write_text(body)
    before = snapshot(out)
    args = ["materialize", str(src), str(out)] if command == "materialize" else ["serve", str(src), "--dir", str(out)]
    r = run_specreg(*args, "--config-only", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "is not empty" in r.stderr and name in r.stderr and "never touches it" in r.stderr
    assert snapshot(out) == before
    # --force writes specreg's own names and leaves the planted file, saying so
    r = run_specreg(*args, "--config-only", "--force", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 0, r.stderr
    assert name in r.stderr and "left as it is" in r.stderr
    assert (out / "thesis.txt").read_text() == "four years of work"
    assert (out / name).read_text() == body
    assert json.loads((out / "config.json").read_text()) != {"mine": True}


def test_a_stage_folder_without_a_valid_proof_is_never_acted_on(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text('{"mine": true}')
    forged = out / f".specreg-stage-{'0' * 16}-{'f' * 32}"
    (forged / "old").mkdir(parents=True)
    (forged / "old" / "config.json").write_text('{"planted": true}')
    (forged / "new").mkdir()
    (forged / "new" / "config.json").write_text("")
    before = snapshot(out)
    r = run_specreg("materialize", str(src), str(out), "--config-only", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and forged.name in r.stderr and snapshot(out) == before


def test_a_stage_folder_copied_from_another_directory_proves_nothing_there(drafts, tmp_path):
    """The proof binds the stage to its directory (device and inode): `cp -a` of an interrupted draft
    directory carries a folder whose name is valid only in the original."""
    first = tmp_path / "first"
    prepare("a", first, drafts)
    draft_a = snapshot(first)

    def write():
        specreg.load(drafts[1]).materialize(first, weights="copy", force=True)

    status = in_child(write, lambda what: os.kill(os.getpid(), signal.SIGKILL) if what.startswith("move") else None)
    assert os.WIFSIGNALED(status)
    second = tmp_path / "second"
    shutil.copytree(first, second, symlinks=True)
    mixed = snapshot(second)
    r = run_specreg("materialize", str(drafts[1]), str(second), "--copy")  # the Eagle-3 draft names its verifier
    assert r.returncode == 2 and ".specreg-stage-" in r.stderr and snapshot(second) == mixed
    # in the directory it belongs to, the same folder is proof: the write is rolled back there
    with dirwrite.opened(first) as d:
        assert dirwrite.recover(d) == ["rolled back an interrupted write"]
    assert snapshot(first) == draft_a


# -- DIR swapped for a link while it is written ------------------------------------------------------------


@pytest.mark.parametrize("fails", [False, True], ids=["completes", "fails"])
def test_dir_swapped_for_a_link_mid_write_redirects_nothing(fails, drafts, tmp_path, monkeypatch):
    out = tmp_path / "out"
    prepare("a", out, drafts)
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text('{"theirs": true}')
    (other / "model.safetensors").write_text("their weights")
    theirs = snapshot(other)
    moved = tmp_path / "out.real"

    def swap(what):
        if what == "build model.safetensors":
            out.rename(moved)
            out.symlink_to(other, target_is_directory=True)
        if fails and what.startswith("move specreg.json"):
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(dirwrite, "_step", swap)
    draft_a = snapshot(out)["config.json"]
    spec = specreg.load(drafts[1])
    if fails:
        with pytest.raises(OSError):
            spec.materialize(out, weights="copy", force=True)
    else:
        spec.materialize(out, weights="copy", force=True)
    assert snapshot(other) == theirs  # nothing landed in, or was removed from, the link's target
    state = snapshot(moved)
    assert (state["config.json"] == draft_a) == fails  # the new draft, or (failed) draft A as it was
    assert not [k for k in state if k.startswith(".specreg-")]


# -- concurrent writers of one directory --------------------------------------------------------------


def _sources(tmp_path, n):
    """n distinct local drafts (different block sizes, so each writes a different config)."""
    from weights import write_draft

    out = []
    for i in range(n):
        cfg = fixture_config("dflash")
        cfg["block_size"] = 16 + i
        cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 15 + i
        out.append(write_draft(tmp_path / f"src{i}", cfg))
    return out


def _one_whole_draft(directory):
    """DIR holds exactly one draft: config.json and specreg.json from the same source, no temp files."""
    import hashlib

    names = sorted(p.name for p in directory.iterdir())
    assert not [n for n in names if "specreg-tmp" in n or "specreg-old" in n], names
    manifest = json.loads((directory / "specreg.json").read_text())
    source_config = json.loads(open(manifest["source"]["path"]).read())
    written = json.loads((directory / "config.json").read_text())
    assert written["dflash_config"]["target_layer_ids"] == [1, 9, 17, 25, 33]
    # config.json and specreg.json from one writer: the config is the one the manifest's source plans
    from specreg.vllm.vllm_config import plain_path_config

    assert written == json.loads(json.dumps(plain_path_config(specreg.load(manifest["source"]["path"]))[0]))
    assert manifest["speculative_config"]["num_speculative_tokens"] == source_config["block_size"] - 1
    assert hashlib.sha256(open(manifest["source"]["path"], "rb").read()).hexdigest() == manifest["source"]["sha256"]
    assert sorted(manifest["files"]) == sorted(n for n in names)


#: trials per concurrency test: a quick count by default, the issue's 50 with `pytest -m stress`
TRIALS = [pytest.param(10, id="10"), pytest.param(50, id="50", marks=pytest.mark.stress)]


@pytest.mark.parametrize("trials", TRIALS)
def test_eight_threads_writing_one_dir_leave_one_whole_draft_every_time(tmp_path, trials):
    from concurrent.futures import ThreadPoolExecutor

    sources = _sources(tmp_path, 8)
    specs = [specreg.load(s) for s in sources]
    for trial in range(trials):
        target = tmp_path / f"out{trial}"
        with ThreadPoolExecutor(8) as pool:
            results = list(
                pool.map(
                    lambda s, target=target: _attempt(lambda: s.materialize(target, weights="none", force=True)), specs
                )
            )
        assert all(r is None for r in results), results  # with --force every writer succeeds, in turn
        _one_whole_draft(target)


def _attempt(call):
    try:
        call()
        return None
    except Exception as exc:  # noqa: BLE001 - reported by the assertion
        return repr(exc)


@pytest.mark.parametrize("trials", [pytest.param(5, id="5"), pytest.param(50, id="50", marks=pytest.mark.stress)])
def test_eight_processes_writing_one_empty_dir_leave_one_whole_draft(tmp_path, trials):
    import subprocess
    import sys

    sources = _sources(tmp_path, 8)
    for trial in range(trials):
        target = tmp_path / f"out{trial}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "specreg", "materialize", str(s), str(target), "--config-only"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for s in sources
        ]
        codes = [p.wait(timeout=120) for p in procs]
        assert codes.count(0) == 1 and codes.count(2) == 7, codes  # one writes; the rest find it not empty
        _one_whole_draft(target)


@pytest.mark.parametrize("trials", [pytest.param(3, id="3"), pytest.param(50, id="50", marks=pytest.mark.stress)])
def test_eight_processes_forcing_two_drafts_into_one_dir_leave_one_whole_draft(tmp_path, trials):
    import subprocess
    import sys

    sources = _sources(tmp_path, 2)
    for trial in range(trials):
        target = tmp_path / f"out{trial}"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "specreg",
                    "materialize",
                    str(sources[i % 2]),
                    str(target),
                    "--config-only",
                    "--force",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(8)
        ]
        codes = [p.wait(timeout=120) for p in procs]
        assert codes == [0] * 8, [p.stderr.read() for p in procs]  # every writer, in turn
        _one_whole_draft(target)


def test_materializing_a_draft_into_its_own_directory_is_refused(tmp_path):
    import subprocess
    import sys

    (src,) = _sources(tmp_path, 1)
    before = (src / "config.json").read_bytes()
    out = subprocess.run(
        [sys.executable, "-m", "specreg", "materialize", str(src), str(src), "--config-only", "--force"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "is the draft's own directory" in out.stderr
    assert (src / "config.json").read_bytes() == before


# -- the manifest key ------------------------------------------------------------------------------


def key_path(tmp_path):
    return tmp_path / "specreg-cache" / "manifest.key"  # SPECREG_CACHE (tests/conftest.py)


def planted(out, files, key: bytes) -> None:
    """A specreg.json listing `files`, signed the way specreg signs, with `key`."""
    doc = {"written_by": "specreg", "files": files}
    body = json.dumps(doc, sort_keys=True).encode()
    doc["signature"] = hmac.new(key, body, hashlib.sha256).hexdigest()
    (out / "specreg.json").write_text(json.dumps(doc))


@pytest.fixture
def victim(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    return src, out


def test_a_new_key_is_whole_and_private(victim, tmp_path):
    src, out = victim
    specreg.load(src).materialize(tmp_path / "fresh", weights="none")
    key = key_path(tmp_path)
    assert len(key.read_bytes()) == 32 and (key.stat().st_mode & 0o777) == 0o600
    assert [p.name for p in key.parent.iterdir() if p.name.startswith(".manifest.key")] == []


@pytest.mark.parametrize("shape", ["empty", "short", "world-readable", "symlink", "fifo", "directory"])
def test_an_unusable_key_trusts_nothing_and_deletes_nothing(victim, tmp_path, shape):
    """An empty key (a full disk, a crash) would let anyone sign with hmac.new(b"") ; a readable one
    can be copied; a link can point at anything; a FIFO hung --force; a directory was exit 3."""
    src, out = victim
    key = key_path(tmp_path)
    key.parent.mkdir(parents=True, exist_ok=True)
    known = b""
    if shape == "empty":
        key.write_bytes(b"")
    elif shape == "short":
        known = b"x" * 8
        key.write_bytes(known)
        key.chmod(0o600)
    elif shape == "world-readable":
        known = os.urandom(32)
        key.write_bytes(known)
        key.chmod(0o644)
    elif shape == "symlink":
        known = os.urandom(32)
        (tmp_path / "elsewhere.key").write_bytes(known)
        (tmp_path / "elsewhere.key").chmod(0o600)
        key.symlink_to(tmp_path / "elsewhere.key")
    elif shape == "fifo":
        os.mkfifo(key, 0o600)
    else:
        key.mkdir()
    planted(out, ["precious.txt", "config.json"], known)
    r = run("materialize", str(src), str(out), "--config-only", "--force", "--verifier", "Qwen/Qwen3-8B")
    assert (out / "precious.txt").read_text() == "keep me"
    assert r.returncode == 2, r.stderr
    assert "manifest key" in r.stderr and "Traceback" not in r.stderr


# -- every reader, every file-system shape ---------------------------------------------------------------------

TARGET_SHAPES = ["absent", "empty directory", "regular file", "link to a directory", "dangling link", "fifo"]


def make_target(path, shape: str) -> None:
    if shape == "empty directory":
        path.mkdir()
    elif shape == "regular file":
        path.write_text("mine")
    elif shape == "link to a directory":
        (path.parent / "linked").mkdir()
        path.symlink_to(path.parent / "linked", target_is_directory=True)
    elif shape == "dangling link":
        path.symlink_to(path.parent / "gone")
    elif shape == "fifo":
        os.mkfifo(path)


@pytest.mark.parametrize("writer", ["materialize", "report"])
@pytest.mark.parametrize("shape", TARGET_SHAPES)
def test_every_writer_meets_every_target_shape_without_touching_what_is_not_its_own(tmp_path, writer, shape):
    """A writer writes into an absent or real (empty) directory, and refuses anything else in one line,
    exit 2, leaving it, and whatever a link points to, as it was."""
    target = tmp_path / "target"
    make_target(target, shape)
    if writer == "materialize":
        src = write_draft(tmp_path / "src", fixture_config("dflash"))
        r = run("materialize", str(src), str(target), "--config-only", "--verifier", "Qwen/Qwen3-8B")
    else:
        (tmp_path / "results").mkdir()
        r = run("report", str(tmp_path / "results"), "--out", str(target))
    if shape in ("absent", "empty directory"):
        assert r.returncode == 0, r.stderr
        assert target.is_dir() and not target.is_symlink()
        return
    assert r.returncode == 2 and "internal error" not in r.stderr and r.stderr.count("\n") <= 3, r.stderr
    if shape == "regular file":
        assert target.read_text() == "mine"
    elif shape == "link to a directory":
        assert target.is_symlink() and list((tmp_path / "linked").iterdir()) == []
    elif shape == "dangling link":
        assert target.is_symlink() and not (tmp_path / "gone").exists()
    else:
        import stat

        assert stat.S_ISFIFO(os.lstat(target).st_mode)


# -- what specreg wrote is recognised by its content -----------------------------------------------------------


def _edit_config(out):
    (out / "config.json").write_text('{"my": "edit"}')


def _change_a_copied_weight(out):
    (out / "model.safetensors").write_bytes((out / "model.safetensors").read_bytes()[:-4] + b"mine")


def _replace_a_linked_weight(out):
    (out / "model.safetensors").unlink()
    (out / "model.safetensors").write_bytes(b"my own fine-tuned weights")


def _add_a_file(out):
    (out / "notes.txt").write_text("mine")


#: what a user does to a directory specreg wrote, the weights it was written with, and the name the refusal gives
USER_EDITS = {
    "config.json edited": (_edit_config, "link", "config.json (changed)"),
    "a copied weight changed": (_change_a_copied_weight, "copy", "model.safetensors (changed)"),
    "a weight link replaced by a file": (
        _replace_a_linked_weight,
        "link",
        "model.safetensors (replaced: specreg wrote a link)",
    ),
    "a file added": (_add_a_file, "link", "notes.txt (added)"),
}


def _write_args(command, src, out, weights):
    flags = {"link": [], "copy": ["--copy"], "none": ["--config-only"]}[weights]
    if command == "materialize":
        return ["materialize", str(src), str(out), *flags]
    if command == "serve --dir":
        return ["serve", str(src), "--dir", str(out), "--vllm", "0.33", *flags]
    return ["serve", str(src), "--engine", "sglang", "--dir", str(out), *flags]


@pytest.mark.parametrize("command", ["materialize", "serve --dir", "serve --engine sglang --dir"])
@pytest.mark.parametrize("edit", sorted(USER_EDITS))
def test_a_rerun_without_force_refuses_what_the_user_changed_and_names_it(edit, command, tmp_path):
    """docs/reliability.md: only a directory holding exactly what the same write wrote is rewritten
    without --force. The names alone were compared: an edited config.json was written back, exit 0."""
    from conftest import run_in_process
    from tiny import write_pair

    change, weights, named = USER_EDITS[edit]
    if command != "materialize" and weights == "copy":
        pytest.skip("serve writes no copies")
    if command == "serve --engine sglang --dir":
        src, _verifier = write_pair(tmp_path, "dspark")
    else:
        src = write_draft(tmp_path / "src", fixture_config("dflash"))
    out = tmp_path / "out"
    r = run_in_process(*_write_args(command, src, out, weights))
    assert r.returncode == 0, r.stderr
    change(out)
    before = snapshot(out)
    r = run_in_process(*_write_args(command, src, out, weights))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (error,) = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert error == f"error: {out}: changed since specreg wrote it: {named}; " + (
        "specreg rewrites only a directory holding exactly what it wrote; move your files out, or pass --force "
        "to replace specreg's own names (a file not named here is kept)"
    )
    assert snapshot(out) == before


@pytest.mark.parametrize("command", ["materialize", "serve --dir", "serve --engine sglang --dir"])
def test_a_rerun_over_an_unchanged_directory_succeeds_without_force(command, tmp_path):
    from conftest import run_in_process
    from tiny import write_pair

    if command == "serve --engine sglang --dir":
        src, _verifier = write_pair(tmp_path, "dspark")
    else:
        src = write_draft(tmp_path / "src", fixture_config("dflash"))
    out = tmp_path / "out"
    for _ in range(2):
        r = run_in_process(*_write_args(command, src, out, "link"))
        assert r.returncode == 0, r.stderr


def test_the_manifest_records_each_file_by_content_and_is_bound_to_its_folder(drafts, tmp_path):
    out = tmp_path / "out"
    specreg.load(drafts[0]).materialize(out, weights="copy")
    specreg.load(drafts[0]).materialize(tmp_path / "linked", weights="link")
    doc = json.loads((out / "specreg.json").read_text())
    assert doc["folder"] == {"inode": out.stat().st_ino}
    for name in doc["files"]:
        if name != "specreg.json":
            body = (out / name).read_bytes()
            assert doc["written"][name] == {"size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    linked = json.loads((tmp_path / "linked" / "specreg.json").read_text())["written"]
    shard = next(n for n in linked if n.endswith(".safetensors"))
    assert linked[shard] == {"link": os.path.realpath(drafts[0] / shard)}
    assert "specreg.json" not in doc["written"]


def test_force_replaces_the_users_edit_of_specregs_names_and_keeps_a_changed_file_it_would_remove(drafts, tmp_path):
    """--force replaces the names it writes; a previous draft's file it would set aside is removed only
    while it is still what specreg wrote."""
    out = tmp_path / "out"
    specreg.load(drafts[0]).materialize(out, weights="copy")  # draft A: two shards and an index
    shard = next(p for p in out.iterdir() if p.name.endswith("1-of-00002.safetensors"))
    shard.write_bytes(b"my edit of a shard")
    said: list[str] = []
    specreg.load(drafts[1]).materialize(out, weights="copy", force=True, progress=said.append)
    assert shard.read_bytes() == b"my edit of a shard"
    assert any(shard.name in line and "changed since specreg wrote it" in line for line in said), said


def test_a_copy_of_a_written_directory_is_not_specregs(drafts, tmp_path):
    """The manifest is bound to its folder: `cp -a` of it proves nothing, so a rerun into the copy is
    refused as a directory of the user's."""
    out = tmp_path / "out"
    specreg.load(drafts[0]).materialize(out, weights="link")
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, symlinks=True)
    r = run("materialize", str(drafts[0]), str(copy))
    assert r.returncode == 2 and "written into another folder (a copy)" in r.stderr, r.stderr
