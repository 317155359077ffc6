"""``--executor ray``: a small grid through a local Ray instance writes the same records as a local run."""
from __future__ import annotations

import pytest

from run_support import write_suite
from tokbench.cli import main
from tokbench.results import load_records

pytest.importorskip("ray", reason="Ray is not installed; `pip install 'tokbench[ray]'` to test --executor ray")


def test_ray_executor_writes_the_same_records_as_a_local_run(tmp_path, capsys):
    suite = write_suite(tmp_path)
    common = ["run", "--suite", str(suite), "--model", "attn-nope", "last-token", "-q"]
    assert main([*common, "--executor", "ray", "--out", str(tmp_path / "ray")]) == 0
    out = capsys.readouterr().out
    assert len([line for line in out.splitlines() if line.startswith("[")]) == 4
    assert main([*common, "--jobs", "1", "--out", str(tmp_path / "local")]) == 0

    ray_records, local = load_records(tmp_path / "ray"), load_records(tmp_path / "local")
    assert not ray_records.problems and set(ray_records.records) == set(local.records)
    assert len(ray_records.records) == 4
    for key, record in ray_records.records.items():
        assert record["status"] == "ok"
        assert record["metrics"]["accuracy"] == local.records[key]["metrics"]["accuracy"]
