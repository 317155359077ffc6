#!/usr/bin/env bash
# One call on a lent GPU machine (benchmark/gpu/README.md): install, the GPU benchmark, then as many runs of the
# pending work as fit before DEADLINE seconds, in this order: the stopping check (protocol, then to the cap where
# the target stopped a run), the tokbench architecture block, the cap check of its cells still learning at the cap,
# tokbench-scale. Every run resumes (finished records
# are skipped; a training in progress checkpoints every minute), `timeout` stops it with SIGTERM, which loses
# nothing finished. The records come back as $OUT/records.tar.gz, rewritten after every run; the checkpoints as
# $OUT/checkpoints.tar.gz only where it fits what a call brings back (16 MiB a file), else they are dropped.
#   run(command="bash benchmark/gpu/session.sh", carry=[".whl"], timeout_s=600)
set -uo pipefail
DEADLINE=${DEADLINE:-560}
JOBS=${JOBS:-12}
started=$(date +%s)
left() { echo $(( DEADLINE - ($(date +%s) - started) )); }
out=${OUT:-/tmp/out}
mkdir -p "$out" work/stopping work/tokbench work/cap work/tokbench-scale
# what is committed is done: seed the run folders with it, so every run resumes where the last call left off
for pair in benchmark/budget/stopping-records:stopping benchmark/republish/records:tokbench \
            benchmark/budget/cap-records:cap benchmark/republish/scale-records:tokbench-scale; do
  [ -d "${pair%%:*}" ] && cp -rn "${pair%%:*}/." "work/${pair##*:}/"
done
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site || exit 3
python3 -m pip install -q -e . --no-deps --no-build-isolation || exit 3
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/device.txt"
export PYTHONUNBUFFERED=1
timeout 180 python3 benchmark/bench/gpu.py --deadline 150 --json "$out/gpu-bench.json" 2>&1 | tee "$out/gpu-bench.txt"
archive() {  # the records only: a cell's checkpoint is tens of MB, more than a call brings back
  tar czf "$out/records.tar.gz" --exclude=.checkpoints --exclude=.locks work
}
run() {  # run SUITE OUT [ARGS...] until the deadline leaves 40 s for the archives; under 2 minutes, start nothing
  local budget=$(( $(left) - 40 ))
  (( budget > 120 )) || { echo "$1 ${*:3}: not started, $budget s left" | tee -a "$out/runs.log"; return 0; }
  timeout -k 15 "$budget" python3 -m tokbench.cli run --suite "$1" --out "$2" --jobs "$JOBS" --checkpoint-every 60 \
    -q "${@:3}" >> "$out/runs.log" 2>&1
  echo "$1 ${*:3}: exit $? with $(( $(left) )) s left" | tee -a "$out/runs.log"
  archive
}
run benchmark/budget/stopping.toml work/stopping
# runs to the cap only where the target stopped a protocol run (one that reached the cap is its own cap run)
# (of protocol runs trained on a GPU: a cap run pairs only with a run on its own kind of device)
python3 benchmark/budget/stopping.py work/stopping --pending --device cuda > "$out/pending.txt" 2>> "$out/runs.log" \
  || echo "stopping.py --pending: exit $?, no runs to the cap" | tee -a "$out/runs.log"
while read -r pending <&3; do  # fd 3: the runs inside must not read the list from stdin
  run benchmark/budget/stopping.toml work/stopping --set train.target=0 $pending  # word-split: --model M --task T..
done 3< "$out/pending.txt"
run tokbench work/tokbench --model transformer transformer-2l transformer-4l linear-attention gla h3 gru lstm mlp mamba
# the cap check of what the block has so far (benchmark/budget/cap_plan.py): each cell the page names still learning
# at the cap, trained here, that no run retrains yet, at twice its cap (exit 1: none; the suite goes back in work/)
if python3 benchmark/budget/cap_plan.py work/tokbench --device cuda --skip-retrained work/cap \
    > work/cap-next.toml 2>> "$out/runs.log"; then
  run work/cap-next.toml work/cap
fi
run tokbench-scale work/tokbench-scale
# what the fair-comparison issue asks of the two sections, on everything they hold now (exit 1 while any fails)
python3 benchmark/republish/acceptance.py work/tokbench --scale work/tokbench-scale > "$out/acceptance.txt" 2>&1
archive
tar czf "$out/checkpoints.tar.gz" work/*/.checkpoints 2>/dev/null
if [ "$(stat -c %s "$out/checkpoints.tar.gz" 2>/dev/null || echo 0)" -gt $(( 15 * 1024 * 1024 )) ]; then
  rm -f "$out/checkpoints.tar.gz"
  echo "checkpoints dropped: over 15 MiB, more than a call brings back" | tee -a "$out/runs.log"
fi
tail -n 20 "$out/runs.log"
ls -la "$out"
