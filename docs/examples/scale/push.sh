#!/bin/bash
# Full and unchanged push of the 1.1M-extent file to serve on 127.0.0.1, with RSS of both sides.
set -u
BIN=$1; OUT=$2; M=${SCALE_MNT:-/var/tmp/scale/mnt}
mkdir -p $OUT $M/srv; rm -f $M/srv/wide.img $M/srv/.wide.img*; sync
/usr/bin/time -f "%e %U %S %M" -o $OUT/serve.time $BIN serve --root $M/srv --listen 127.0.0.1:17926 --no-auth > $OUT/serve.out 2>&1 &
SP=$!
sleep 1
for run in full unchanged; do
  sync; echo 3 > /proc/sys/vm/drop_caches
  l0=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f "%e %U %S %M" -o $OUT/push-$run.time $BIN push --no-auth --json $M/src.img 127.0.0.1:17926 wide.img > $OUT/push-$run.json 2> $OUT/push-$run.err
  echo "push-$run rc=$? $(tail -1 $OUT/push-$run.time) load=$l0-$(cut -d' ' -f1 /proc/loadavg)" | tee -a $OUT/summary.txt
done
kill -INT $(pgrep -P $SP) $SP 2>/dev/null; wait $SP; sleep 1
echo "serve $(tail -1 $OUT/serve.time)" | tee -a $OUT/summary.txt
