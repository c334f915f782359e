#!/usr/bin/env bash
# Measures what scraping /metrics costs the write throughput: a 3-server
# cluster on 127.0.0.1 (GOMAXPROCS split as make cluster does), then
# coordctl bench write --clients 64, ROUNDS times without and with a loop
# that scrapes every server's /metrics once a second, interleaved (off, on,
# off, on...) so that the machine's other load falls on both alike. Prints
# each run's ops/s and the median of each.
#
# Usage: scripts/metrics-overhead.sh [ROUNDS] (default 5); BIN (default
# bin), DURATION of each run (default 20s). Ports: clients 2381-2383, peers
# 3081-3083, metrics 9381-9383.
set -euo pipefail
rounds=${1:-5}
bin=${BIN:-bin}
duration=${DURATION:-20s}
cd "$(dirname "$0")/.."
. scripts/procs.sh
procs=$(server_procs 3)
dir=$(mktemp -d)
pids=()
scraper=""
cleanup() {
  [ -n "$scraper" ] && kill "$scraper" 2>/dev/null || true
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

peers="" servers="" metrics=()
for i in 1 2 3; do
  peers+="${peers:+,}$i=127.0.0.1:$((3080 + i))"
  servers+="${servers:+,}127.0.0.1:$((2380 + i))"
  metrics+=("127.0.0.1:$((9380 + i))")
done
for i in 1 2 3; do
  GOMAXPROCS=$procs "$bin/coordd" --id "$i" --data-dir "$dir/$i" --client-addr "127.0.0.1:$((2380 + i))" \
    --peer-addr "127.0.0.1:$((3080 + i))" --peers "$peers" --metrics-addr "${metrics[i - 1]}" >"$dir/$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1 150); do
  ready=0
  for m in "${metrics[@]}"; do
    curl -sf "http://$m/readyz" >/dev/null 2>&1 && ready=$((ready + 1))
  done
  [ "$ready" = 3 ] && break
  sleep 0.2
done
[ "$ready" = 3 ] || { echo "metrics-overhead: the cluster is not ready" >&2; tail "$dir"/*.log >&2; exit 1; }

scrape_loop() {
  while :; do
    for m in "${metrics[@]}"; do curl -sf -o /dev/null "http://$m/metrics" || true; done
    sleep 1
  done
}

run() {
  "$bin/coordctl" --servers "$servers" bench write --clients 64 --duration "$duration" -o json |
    sed -n 's/.*"ops_per_s": *\([0-9.]*\).*/\1/p' | head -n 1
}

off=() on=()
for r in $(seq 1 "$rounds"); do
  v=$(run); off+=("$v"); echo "round $r: no scraping:              $v ops/s"
  scrape_loop & scraper=$!
  v=$(run); on+=("$v"); echo "round $r: scraping every 1 s, 3 servers: $v ops/s"
  kill "$scraper"; wait "$scraper" 2>/dev/null || true; scraper=""
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "median without scraping: $(median "${off[@]}") ops/s"
echo "median with scraping:    $(median "${on[@]}") ops/s"
