#!/bin/bash
# benchmarks/cpu_replay/run.sh CONFIG.json DTYPE CHUNK CALL OUT.json  (from the repository root; needs gdb)
set -e
PY=${PYTHON:-python}
REPLAY_PYTHON=$PY REPLAY_OUT=$5 gdb -q -batch -x benchmarks/cpu_replay/gdb_record.py \
  --args $PY benchmarks/cpu_replay/run_call.py "$1" --dtype "$2" --chunk "$3" --call "$4" > "$5.gdb.log" 2>&1
python3 benchmarks/cpu_replay/replay.py "$5"
