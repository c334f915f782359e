# Sourced by cluster.sh and bench.sh. server_procs N prints the GOMAXPROCS
# for each of N servers sharing this machine: $GOMAXPROCS if set, else
# cores / N, at least 1. With Go's default every server runs as many
# threads as there are cores, and three servers on two cores spend their
# time handing the CPU to each other (see README).
server_procs() {
  local procs=${GOMAXPROCS:-$(( $(getconf _NPROCESSORS_ONLN) / $1 ))}
  [ "$procs" -ge 1 ] || procs=1
  echo "$procs"
}
