#!/bin/bash
# usage: WORK=/tmp/compmem trial.sh NAME PRISTINE 'OPTIONS_JSON' [AFTER_KWARGS_JSON|none] [--keep]
# What a big fragment's rewrite costs the vector store's upkeep (docs/scale.md, "Rewriting a big
# fragment since IVF_RQ"). PRISTINE: a dataset under $WORK made by build.py, e.g.
#   python scripts/bench_compaction/build.py $WORK/pristine_600k 600000 --index rq
# Copies PRISTINE, deletes 2 % of rows (chunk_id % 50 == 0), compacts in a fresh process
# (compact.py under /usr/bin/time -v), verifies; with AFTER_KWARGS_JSON, then runs
# optimize_indices(**kwargs) in another fresh process (after.py) and verifies again.
set -u
NAME=$1; SRC=$2; OPTS=$3; AFTER=${4:-none}; KEEP=${5:-}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-$HERE/../../.venv/bin/python}
D=${WORK:?set WORK to a scratch folder}
while pgrep -f bench_scale.py >/dev/null; do sleep 30; done
mkdir -p $D/work $D/logs
W=$D/work/$NAME
rm -rf $W; cp -a $D/$SRC $W
L=$D/logs/$NAME.log
{
echo "== $NAME src=$SRC opts=$OPTS after=$AFTER env LANCE_CPU_THREADS=${LANCE_CPU_THREADS:-} $(date +%T) load=$(cut -d' ' -f1 /proc/loadavg)"
$PY $HERE/delete.py $W 50
$PY $HERE/verify.py $W | sed 's/^VERIFY/VERIFY_BEFORE/'
/usr/bin/time -v $PY $HERE/compact.py $W "$OPTS" --trace $D/logs/$NAME.trace 2> $D/logs/$NAME.time
grep -E "Maximum resident|Elapsed|Exit status" $D/logs/$NAME.time
grep -v "^\s" $D/logs/$NAME.time | tail -5
$PY $HERE/verify.py $W
if [ "$AFTER" != "none" ]; then
  /usr/bin/time -v $PY $HERE/after.py $W "$AFTER" 2> $D/logs/$NAME.after.time
  grep -E "Maximum resident|Elapsed|Exit status" $D/logs/$NAME.after.time
  grep -v "^\s" $D/logs/$NAME.after.time | tail -5
  $PY $HERE/verify.py $W | sed 's/^VERIFY/VERIFY_AFTER/'
fi
echo "== end $(date +%T)"
} > $L 2>&1
[ "$KEEP" = "--keep" ] || rm -rf $W
grep -E "RESULT|VERIFY|AFTER|Maximum|Elapsed|rror" $L | cut -c1-2500
