"""`stream-core synthesize --out DIR` and `Synthesized.write` never write through a symbolic
link (issue point: a link planted in DIR was followed and its target overwritten)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stream_core.testing import faux_text, vendor_bytes

pytestmark = pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")


def _plant(folder: Path, name: str) -> Path:
    folder.mkdir(exist_ok=True)
    victim = folder.parent / f"victim-{name}"
    victim.write_text("precious\n", "utf-8")
    (folder / name).symlink_to(victim)
    return victim


@pytest.mark.parametrize("name", ["1.body", "1.json"])
def test_synthesize_refuses_a_planted_link(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from stream_core._cli import main

    script = tmp_path / "turns.jsonl"
    script.write_text(json.dumps("Hello.") + "\n", "utf-8")
    out = tmp_path / "rec"
    victim = _plant(out, name)

    code = main(["synthesize", str(script), "--api", "openai-completions", "--out", str(out)])

    assert code != 0
    assert victim.read_text("utf-8") == "precious\n"
    assert (out / name).is_symlink()
    err = capsys.readouterr().err
    assert "symbolic link" in err and name in err


def test_write_refuses_a_link_and_writes_plain_files(tmp_path: Path) -> None:
    made = vendor_bytes(faux_text("Hi."), "anthropic-messages")
    victim = _plant(tmp_path / "rec", "a.json")
    with pytest.raises(OSError, match="symbolic link"):
        made.write(tmp_path / "rec" / "a")
    assert victim.read_text("utf-8") == "precious\n"

    body = made.write(tmp_path / "rec" / "b")
    assert body.read_bytes() == made.body and not body.is_symlink()
    assert json.loads(body.with_suffix(".json").read_text("utf-8")) == made.meta
    body = made.write(tmp_path / "rec" / "b")  # an existing plain file is replaced
    assert body.read_bytes() == made.body
    assert sorted(p.name for p in (tmp_path / "rec").iterdir()) == ["a.json", "b.body", "b.json"]
