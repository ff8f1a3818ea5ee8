"""specreg/atomic.py: one file replaced whole; a killed write's temporary file is proven specreg's and
removed by the next write of that file; a look-alike is never touched."""

from __future__ import annotations

import os
import signal

from specreg import atomic


def test_a_write_killed_mid_file_leaves_the_old_file_and_a_temporary_file_the_next_write_removes(tmp_path):
    tmp_path = tmp_path / "site"
    tmp_path.mkdir()
    target = tmp_path / "index.html"
    target.write_text("old page")
    lookalike = tmp_path / f".index.html.specreg-tmp-{'0' * 16}-{'f' * 32}"
    lookalike.write_text("not specreg's")

    def killed(tmp):
        tmp.write_text("half a pa")
        os.kill(os.getpid(), signal.SIGKILL)

    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            atomic.replace(target, killed)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    assert target.read_text() == "old page"
    temps = sorted(p.name for p in tmp_path.iterdir() if p.name != "index.html")
    assert len(temps) == 2 and lookalike.name in temps
    atomic.write_bytes(target, b"new page")
    assert target.read_text() == "new page"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["index.html", lookalike.name])


def test_a_link_at_the_target_is_replaced_not_followed(tmp_path):
    outside = tmp_path / "outside"
    outside.write_text("theirs")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").symlink_to(outside)
    atomic.write_bytes(tmp_path / "site" / "index.html", b"page")
    assert outside.read_text() == "theirs" and not (tmp_path / "site" / "index.html").is_symlink()
