# Sourced by cluster.sh, bench.sh and compare.sh. start_local_cluster DIR [N]
# starts an N-node (default 3) coordd cluster on 127.0.0.1 (clients on
# 2281-228N, peers on 2981-298N, data and logs in DIR) from $bin, and waits
# up to 30s for a leader with every member reachable. It sets servers (the client
# addresses) and appends the servers' pids to pids; stop_local_cluster
# kills them. Uses LOG_LEVEL and GOMAXPROCS (scripts/procs.sh), and TLS_DIR:
# when set, both ports speak TLS with the files of coordctl certs init there
# (client certificates required), and COORD_CACERT, COORD_CERT and COORD_KEY
# are exported for the coordctl calls that follow.
# tls_server_flags DIR sets tls_flags to coordd's TLS flags for DIR's files.
# cleanup_on_exit DIR makes the script, when it exits or is interrupted
# (INT, TERM, HUP), kill every process in pids and remove DIR.
start_local_cluster() {
  local dir=$1 n=${2:-3} peers="" i mine=()
  servers=""
  for i in $(seq 1 "$n"); do
    peers+="${peers:+,}$i=127.0.0.1:$((2980 + i))"
    servers+="${servers:+,}127.0.0.1:$((2280 + i))"
  done
  # Servers sharing this machine split its cores (scripts/procs.sh).
  . "$(dirname "${BASH_SOURCE[0]}")/procs.sh"
  procs=$(server_procs "$n")
  tls_flags=()
  if [ -n "${TLS_DIR:-}" ]; then
    tls_server_flags "$TLS_DIR"
    export COORD_CACERT=$TLS_DIR/ca.crt COORD_CERT=$TLS_DIR/client.crt COORD_KEY=$TLS_DIR/client.key
  fi
  for i in $(seq 1 "$n"); do
    mkdir -p "$dir/$i"
    GOMAXPROCS=$procs "$bin/coordd" --id "$i" --data-dir "$dir/$i" \
      --client-addr "127.0.0.1:$((2280 + i))" --peer-addr "127.0.0.1:$((2980 + i))" \
      --peers "$peers" --log-level "${LOG_LEVEL:-warn}" ${tls_flags[@]+"${tls_flags[@]}"} >"$dir/$i.log" 2>&1 &
    pids+=($!)
    mine+=($!)
  done
  local pid
  for _ in $(seq 1 150); do
    for pid in "${mine[@]}"; do
      if ! kill -0 "$pid" 2>/dev/null; then
        echo "a coordd server exited; its log:" >&2
        tail -n 20 "$dir"/*.log >&2
        return 1
      fi
    done
    # status exits 0 once there is a leader and every member is reachable.
    if "$bin/coordctl" --servers "$servers" --timeout 2s status >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  echo "coordd: no leader after 30s" >&2
  tail -n 20 "$dir"/*.log >&2
  return 1
}

stop_local_cluster() {
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}

# stop_on_exit [CMD] makes the script, when it exits or receives INT, TERM
# or HUP, kill every process in pids, wait for them, then run CMD. Each
# signal ends the script with 128 + its number (bash runs a trap only
# between commands, so a long foreground command delays it: run those in
# the background and wait for them).
stop_on_exit() {
  stop_cmd=${1:-:}
  trap 'trap - INT TERM HUP EXIT; stop_local_cluster; eval "$stop_cmd"' EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

cleanup_on_exit() {
  cleanup_dir=$1
  pids=()
  stop_on_exit 'rm -rf "$cleanup_dir"'
}

tls_server_flags() {
  local d=$1
  if [ ! -f "$d/ca.crt" ]; then
    echo "no certificates in $d: run make certs (or coordctl certs init $d)" >&2
    return 1
  fi
  tls_flags=(--cert-file "$d/server.crt" --key-file "$d/server.key" --trusted-ca-file "$d/ca.crt" --client-cert-auth
    --peer-cert-file "$d/peer.crt" --peer-key-file "$d/peer.key" --peer-trusted-ca-file "$d/ca.crt")
}
