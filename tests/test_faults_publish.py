"""Issue #32, item 3: publishing touches only its own files. A published folder's manifest (``SHA256SUMS``) comes
with a download or a clone, so every path in it must stay inside the folder; anything else is one line and exit 2,
and nothing is deleted."""
from __future__ import annotations

import hashlib

import pytest

from leaderboard_synth import publish, record, seeds, write
from tokbench.cli import main


@pytest.fixture
def published(tmp_path):
    """A records folder and the folder published from it."""
    source, out = write(tmp_path / "runs", seeds(3, [0.5, 0.6, 0.7])), tmp_path / "board" / "leaderboard"
    assert publish("--records", str(source), "--out", str(out)) == 0
    return source, out


def _listed(out, name: str, content: bytes) -> None:
    """Add ``name`` to the folder's manifest, as a hostile download could."""
    with (out / "SHA256SUMS").open("a") as manifest:
        manifest.write(f"{hashlib.sha256(content).hexdigest()}  {name}\n")


@pytest.mark.parametrize("name", ["plots/../../outside.txt", "../outside.txt", "/ABSOLUTE"])
def test_prune_never_deletes_a_file_the_manifest_names_outside_the_folder(tmp_path, capsys, published, name):
    source, out = published
    victim = tmp_path / "board" / "outside.txt"
    victim.write_bytes(b"precious")
    _listed(out, name.replace("/ABSOLUTE", str(victim)), b"precious")
    capsys.readouterr()
    assert publish("--records", str(source), "--out", str(out), "--prune") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SHA256SUMS, line" in err and "outside" in err, err
    assert victim.read_bytes() == b"precious"


def test_a_link_out_of_the_folder_is_outside_too(tmp_path, capsys, published):
    source, out = published
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.png").write_bytes(b"precious")
    (out / "escape").symlink_to(elsewhere, target_is_directory=True)
    _listed(out, "escape/precious.png", b"precious")
    assert publish("--records", str(source), "--out", str(out), "--prune") == 2
    assert (elsewhere / "precious.png").read_bytes() == b"precious"
    assert main(["verify", str(out), "--integrity"]) == 2
    assert capsys.readouterr().err.count("tokbench: error:") == 2


@pytest.mark.parametrize("content", [bytes(range(256)) * 4, b"not a manifest line\n"])
def test_a_manifest_that_is_not_one_is_a_one_line_error(capsys, published, content):
    """A binary SHA256SUMS raised UnicodeDecodeError with a traceback."""
    source, out = published
    (out / "SHA256SUMS").write_bytes(content)
    for argv in (["verify", str(out / "records"), "--integrity"], ["leaderboard", "--records", str(source),
                                                                     "--format", "all", "--out", str(out)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "SHA256SUMS" in err, err


def test_verify_integrity_of_the_published_folder_itself_checks_its_records(capsys, published):
    """The docs say `tokbench verify DIR --integrity` works on a published folder; it stopped with exit 2 at the
    folder's own leaderboard.json ("not a tokbench run record")."""
    _, out = published
    capsys.readouterr()
    assert main(["verify", str(out), "--integrity"]) == 0
    assert "3 records valid" in capsys.readouterr().out


def test_one_pairing_ok_in_two_folders_with_different_metrics_is_an_error_naming_both(tmp_path, capsys):
    """Before, the later `started_at` won silently: a forged 0.99 dated 2099 replaced the genuine 0.51."""
    genuine = write(tmp_path / "a", [record(accuracy=0.51)])
    forged = record(accuracy=0.99)
    forged["provenance"]["started_at"] = "2099-01-01T00:00:00Z"
    forged = write(tmp_path / "b", [forged])
    assert main(["leaderboard", "--records", str(genuine), "--records", str(forged)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(next(genuine.glob("*.json"))) in err and str(next(forged.glob("*.json"))) in err
    copy = write(tmp_path / "c", [record(accuracy=0.51)])  # the same record in two shards merges as before
    assert main(["leaderboard", "--records", str(genuine), "--records", str(copy)]) == 0
