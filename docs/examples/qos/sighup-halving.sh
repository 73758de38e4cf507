#!/bin/bash
# Measures a SIGHUP that changes serve's node budget while N pushes run.
#   sighup-halving.sh SPARSESYNC_BINARY [N=2] [RATE_BEFORE=100M] [RATE_AFTER=50M]
# Starts `serve --bwlimit-file` on 127.0.0.1:7399 (a temporary root under $TMPDIR), N pushes of 1 GiB of random
# data each, writes RATE_AFTER into the file and sends SIGHUP as the 7th second begins, and prints per-second rates:
# what serve reads from its sockets (rchar of /proc/PID/io) and what each client writes into its socket (wchar).
# The first window includes the socket buffers filling.
set -eu
BIN=$1; N=${2:-2}; RATE1=${3:-100M}; RATE2=${4:-50M}
D=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
mkdir -p "$D/root" "$D/src"
for i in $(seq 1 "$N"); do head -c 1G /dev/urandom > "$D/src/img$i"; done
echo "$RATE1" > "$D/rate"
"$BIN" serve --no-auth --root "$D/root" --listen 127.0.0.1:7399 --bwlimit-file "$D/rate" 2> "$D/serve.log" &
SP=$!
for _ in $(seq 50); do grep -q serving "$D/serve.log" 2>/dev/null && break; sleep 0.1; done
PIDS=()
for i in $(seq 1 "$N"); do
	"$BIN" push --no-auth --retries 0 --progress never "$D/src/img$i" 127.0.0.1:7399 "img$i" > "$D/push$i.log" 2>&1 &
	PIDS+=($!)
done
io() { awk -v k="$2" '$1==k":"{print $2}' "/proc/$1/io" 2>/dev/null || echo 0; }
declare -A last
last[s]=$(io "$SP" rchar)
for p in "${PIDS[@]}"; do last[$p]=$(io "$p" wchar); done
tp=$(date +%s.%N); lim=$RATE1
printf 't_s limit serve_MiB_s'; for i in $(seq 1 "$N"); do printf ' push%d_MiB_s' "$i"; done; echo
for t in $(seq 1 14); do
	if [ "$t" = 7 ]; then echo "$RATE2" > "$D/rate"; kill -HUP "$SP"; lim=$RATE2; fi
	sleep 1
	tn=$(date +%s.%N); dt=$(echo "$tn - $tp" | bc -l); tp=$tn
	cur=$(io "$SP" rchar)
	line=$(printf '%d %s %.1f' "$t" "$lim" "$(echo "($cur - ${last[s]}) / 1048576 / $dt" | bc -l)")
	last[s]=$cur
	for p in "${PIDS[@]}"; do
		c=$(io "$p" wchar); [ "$c" = 0 ] && c=${last[$p]}
		line+=$(printf ' %.1f' "$(echo "($c - ${last[$p]}) / 1048576 / $dt" | bc -l)")
		last[$p]=$c
	done
	echo "$line"
done
grep SIGHUP "$D/serve.log" || true
