#!/bin/bash
# Interleaved rounds: sparsesync local vs cp --sparse=always + sync -f on the 1.1M-extent file.
# usage: run.sh BIN ROUNDS OUTDIR
set -u
BIN=$1; R=$2; OUT=$3; M=${SCALE_MNT:-/var/tmp/scale/mnt}
mkdir -p $OUT
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
one() { # name cmd...
  local name=$1; shift
  drop
  local l0=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -f "%e %U %S %M" -o $OUT/$name.time "$@" > $OUT/$name.out 2>&1
  echo "$name rc=$? $(cat $OUT/$name.time | tail -1) load=$l0-$(cut -d' ' -f1 /proc/loadavg)" | tee -a $OUT/summary.txt
}
for r in $(seq 1 $R); do
  rm -f $M/local.img $M/cp.img; sync
  if [ $((r % 2)) = 1 ]; then
    one local-$r $BIN local $M/src.img $M/local.img
    one cp-$r sh -c "cp --sparse=always $M/src.img $M/cp.img && sync -f $M/cp.img"
  else
    one cp-$r sh -c "cp --sparse=always $M/src.img $M/cp.img && sync -f $M/cp.img"
    one local-$r $BIN local $M/src.img $M/local.img
  fi
  one local-unchanged-$r $BIN local $M/src.img $M/local.img
done
