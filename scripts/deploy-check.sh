#!/usr/bin/env bash
# Checks the deployment files (make deploy-check), without systemd running
# and without a Kubernetes cluster:
#  - deploy/systemd: systemd-sysusers creates the user, systemd-analyze
#    verify finds nothing to say about the unit (in a scratch root holding
#    the unit, its env file, the user and a real coordd, so that the check
#    does not depend on this machine's /etc), systemd-analyze security rates
#    its exposure at most 2.0, and coordd parses the flags ExecStart gives
#    it with the example env file;
#  - deploy/kubernetes: deploy/kubecheck (a module of its own) decodes every
#    manifest strictly into the k8s.io/api types and checks them as a
#    cluster, and has coordd parse each pod's arguments;
#  - deploy/prometheus: promtool checks the example configuration and the
#    alert rules, and runs the rules' unit tests (alerts_test.yml);
#  - deploy/grafana: promtool parses every query of the dashboard (its
#    variables filled in), and rpc/metrics' tests check every metric and
#    label the dashboard and the rules use against the server's registry,
#    whose names and types testdata/metrics.golden pins.
# Installs Debian's systemd package if systemd-analyze is missing, and its
# prometheus package (for promtool) if promtool is; the Go module proxy
# must be reachable the first time (k8s.io/api).
set -euo pipefail
GO=${GO:-go}
cd "$(dirname "$0")/.."

if ! command -v systemd-analyze >/dev/null || ! command -v systemd-sysusers >/dev/null; then
  echo "deploy-check: installing systemd (for systemd-analyze and systemd-sysusers)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi
units=""
for d in /usr/lib/systemd/system /lib/systemd/system; do
  if [ -f "$d/sysinit.target" ]; then units=$d; break; fi
done
if [ -z "$units" ]; then
  echo "deploy-check: systemd's own units (sysinit.target) not found" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/coordd" ./cmd/coordd

# A scratch root: systemd's units, ours, and coordd where ExecStart wants it.
root=$tmp/root
mkdir -p "$root/usr/lib/systemd" "$root/etc/systemd/system" "$root/etc/coordd" \
  "$root/etc/sysusers.d" "$root/usr/local/bin"
cp -a "$units" "$root/usr/lib/systemd/system"
cp deploy/systemd/coordd.service "$root/etc/systemd/system/"
cp deploy/systemd/coordd.env "$root/etc/coordd/"
cp deploy/systemd/coordd.sysusers "$root/etc/sysusers.d/coordd.conf"
cp "$tmp/coordd" "$root/usr/local/bin/coordd"

echo "deploy-check: systemd-sysusers deploy/systemd/coordd.sysusers"
systemd-sysusers --root="$root" >/dev/null 2>&1
grep -q '^coordd:' "$root/etc/passwd" || { echo "deploy-check: coordd.sysusers created no coordd user" >&2; exit 1; }

echo "deploy-check: systemd-analyze verify deploy/systemd/coordd.service"
# verify exits 0 on a misspelt key or a bad value and only says so: any
# output at all fails the check.
if ! out=$(systemd-analyze --man=no --root="$root" verify coordd.service 2>&1) || [ -n "$out" ]; then
  echo "$out" >&2
  echo "deploy-check: systemd-analyze verify objects to coordd.service" >&2
  exit 1
fi

echo "deploy-check: systemd-analyze security deploy/systemd/coordd.service"
if ! out=$(systemd-analyze security --offline=yes --root="$root" --threshold=20 coordd.service 2>&1); then
  echo "$out" | grep -E '✗|Overall' >&2
  echo "deploy-check: coordd.service's exposure is above 2.0" >&2
  exit 1
fi
echo "$out" | grep -o 'Overall exposure level.*' | sed 's/^/  /'

echo "deploy-check: coordd parses ExecStart's flags with coordd.env"
# ExecStart= with its continuation lines, expanded as systemd does for
# these forms (${VAR}: one word, $VAR: split at spaces) with coordd.env
# read as systemd reads an EnvironmentFile, then --version appended:
# coordd parses every flag (its name and the form of its value) before it
# acts on --version.
execstart=$(sed -n '/^ExecStart=/,/[^\\]$/p' deploy/systemd/coordd.service | sed 's/\\$//' | tr '\n' ' ')
execstart=${execstart#ExecStart=}
(
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line#"${line%%[![:space:]]*}"}
    case $line in ''|'#'*|';'*) continue ;; esac
    key=${line%%=*} val=${line#*=}
    val=${val%"${val##*[![:space:]]}"}
    case $val in \"*\"|\'*\') val=${val:1:${#val}-2} ;; esac
    export "$key=$val"
  done < deploy/systemd/coordd.env
  eval "set -- $execstart"
  [ "$1" = /usr/local/bin/coordd ] || { echo "deploy-check: ExecStart runs $1, not /usr/local/bin/coordd" >&2; exit 1; }
  shift
  if ! out=$("$tmp/coordd" "$@" --version 2>&1) || [[ $out != "coordd "* ]]; then
    echo "deploy-check: coordd $* --version: ${out%%$'\n'*}" >&2
    exit 1
  fi
)

echo "deploy-check: deploy/kubecheck deploy/kubernetes"
(
  cd deploy/kubecheck
  "$GO" vet .
  "$GO" test -count=1 .
  "$GO" run . -coordd "$tmp/coordd" ../kubernetes
)
if ! command -v promtool >/dev/null || ! command -v jq >/dev/null; then
  echo "deploy-check: installing promtool (Debian's prometheus package) and jq"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus jq >/dev/null
fi
echo "deploy-check: promtool deploy/prometheus"
(
  cd deploy/prometheus
  promtool check config prometheus.yml
  promtool check rules alerts.yml
  promtool test rules alerts_test.yml
)

echo "deploy-check: promtool parses deploy/grafana/coordd.json's queries"
# Each query, its dashboard variables given a value, becomes a recording
# rule, which promtool parses.
{
  echo "groups:"
  echo "  - name: dashboard"
  echo "    rules:"
  i=0
  jq -r '.. | objects | select(has("expr")) | .expr' deploy/grafana/coordd.json |
    sed -e 's/\$job/coordd/g' -e 's/\$instance/.*/g' -e 's/\$__rate_interval/1m/g' -e "s/'/''/g" |
    while IFS= read -r expr; do
      i=$((i + 1))
      echo "      - record: dashboard:query_$i"
      echo "        expr: '$expr'"
    done
} > "$tmp/dashboard-rules.yml"
promtool check rules "$tmp/dashboard-rules.yml" | sed 's/^/  /'

echo "deploy-check: metric names in deploy/ against the registry (rpc/metrics)"
"$GO" test -count=1 -run 'TestNamesArePinned|TestDashboardUsesKnownMetrics|TestAlertsUseKnownMetrics' ./rpc/metrics/
echo "deploy-check: ok"
