#!/usr/bin/env bash
# footprint.sh measures the idle footprint of the real agent binary running
# five daemons on the local Docker engine: resident memory (VmRSS, RssAnon
# from /proc/PID/status) and CPU time (utime+stime from /proc/PID/stat).
#
# It builds edgeset-agent exactly as shipped (static, stripped), plus
# edgeset-controller and edgesetctl; starts the controller with its embedded
# broker on 127.0.0.1; mints a node token; runs the agent with --runtime
# docker; imports the test image (test/testimage, the "sleep" mode idles in a
# blocking read); applies five daemonsets running it with imagePullPolicy
# Never; waits until the node's five containers run and the agent has
# settled; then samples the agent every EDGESET_FOOTPRINT_INTERVAL seconds
# over EDGESET_FOOTPRINT_WINDOW seconds and prints the figures.
#
# Usage (from the repository root, with a Docker engine):
#   test/footprint.sh                  # or: make bench-footprint
# Environment:
#   EDGESET_FOOTPRINT_WINDOW    idle window in seconds (default 120)
#   EDGESET_FOOTPRINT_INTERVAL  sampling period in seconds (default 10)
#   EDGESET_FOOTPRINT_SETTLE    wait after the containers run (default 20)
#   EDGESET_FOOTPRINT_PORT      first of two free TCP ports (default 18930)
#
# Bounded: every wait has a deadline, and the whole run is killed after
# window + 240 s. On exit (success, failure or signal) it stops the agent and
# the controller and removes the node's containers and its temporary dir.
set -euo pipefail

window=${EDGESET_FOOTPRINT_WINDOW:-120}
interval=${EDGESET_FOOTPRINT_INTERVAL:-10}
settle=${EDGESET_FOOTPRINT_SETTLE:-20}
port=${EDGESET_FOOTPRINT_PORT:-18930}
mqtt_addr=127.0.0.1:$port
api_addr=127.0.0.1:$((port + 1))
node=footprint-$$
daemons=5

cd "$(dirname "$0")/.."
work=$(mktemp -d "${TMPDIR:-/tmp}/edgeset-footprint.XXXXXX")
controller_pid=
agent_pid=
watchdog_pid=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$watchdog_pid" ]; then
		pkill -P "$watchdog_pid" 2>/dev/null || true # its sleep
		kill "$watchdog_pid" 2>/dev/null || true
	fi
	for pid in $agent_pid $controller_pid; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in $agent_pid $controller_pid; do
		wait "$pid" 2>/dev/null || true
	done
	local ids
	ids=$(docker ps -aq --filter "label=io.edgeset.node=$node" 2>/dev/null || true)
	if [ -n "$ids" ]; then
		# shellcheck disable=SC2086 # one id per word
		docker rm -f $ids >/dev/null 2>&1 || true
	fi
	if [ "$rc" -ne 0 ]; then
		echo "footprint: failed (exit $rc); logs:" >&2
		tail -n 20 "$work"/controller.log "$work"/agent.log >&2 2>/dev/null || true
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The whole run is bounded: the watchdog ends it if a step hangs.
( sleep $((window + 240)); echo "footprint: timed out" >&2; kill -TERM $$ ) 2>/dev/null &
watchdog_pid=$!

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND until it succeeds.
wait_for() {
	local deadline=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "footprint: timed out waiting for $what" >&2
			return 1
		fi
		sleep 0.5
	done
}

docker info >/dev/null 2>&1 || { echo "footprint: no Docker engine answers" >&2; exit 1; }

echo "== build"
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/edgeset-agent" ./cmd/edgeset-agent
go build -o "$work/edgeset-controller" ./cmd/edgeset-controller
go build -o "$work/edgesetctl" ./cmd/edgesetctl
echo "agent binary: $(stat -c %s "$work/edgeset-agent") B"

# The test image's tag is the hash of its app binary (see test/testimage);
# running the package's tests imports it when the engine lacks it.
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags='-s -w' -o "$work/app" ./test/testimage/app
image=edgeset-test:$(sha256sum "$work/app" | cut -c1-12)
if ! docker image inspect "$image" >/dev/null 2>&1; then
	EDGESET_REQUIRE_DOCKER=1 go test -count=1 -run 'TestAppModes' ./test/testimage/ >/dev/null
fi
docker image inspect "$image" >/dev/null
echo "image: $image"

echo "== controller on $mqtt_addr (API $api_addr)"
"$work/edgeset-controller" --data-dir "$work/controller" --mqtt-addr "$mqtt_addr" \
	--api-addr "$api_addr" >"$work/controller.log" 2>&1 &
controller_pid=$!
wait_for 30 "the controller's API token" test -s "$work/controller/admin.token"
ctl() { "$work/edgesetctl" --server "http://$api_addr" --token-file "$work/controller/admin.token" "$@"; }
wait_for 30 "the controller's API" ctl get nodes
token=$("$work/edgesetctl" token create "$node" --data-dir "$work/controller" | tail -1)

echo "== agent $node, --runtime docker"
"$work/edgeset-agent" --runtime docker --node-name "$node" --broker-url "tcp://$mqtt_addr" \
	--token "$token" --data-dir "$work/agent" >"$work/agent.log" 2>&1 &
agent_pid=$!
registered() { ctl get nodes | grep -q "$node"; }
wait_for 30 "node $node to register" registered

echo "== $daemons daemonsets running $image sleep"
for i in $(seq 1 "$daemons"); do
	cat <<EOF
---
apiVersion: edgeset.io/v1
kind: DaemonSet
metadata:
  name: footprint-$i
spec:
  selector:
    matchLabels: {app: footprint-$i}
  template:
    metadata:
      labels: {app: footprint-$i}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: $image
        imagePullPolicy: Never
        args: [sleep]
EOF
done >"$work/daemonsets.yaml"
ctl apply -f "$work/daemonsets.yaml"
running() {
	[ "$(docker ps -q --filter "label=io.edgeset.node=$node" --filter status=running | wc -l)" -eq "$daemons" ]
}
wait_for 90 "$daemons running containers" running
echo "containers running; settling ${settle}s"
sleep "$settle"
kill -0 "$agent_pid"

# cpu_ticks PID: utime+stime in clock ticks (fields 14 and 15 of stat,
# counted after the parenthesised command name).
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

echo "== sampling for ${window}s every ${interval}s"
hz=$(getconf CLK_TCK)
t0=$(date +%s.%N)
c0=$(cpu_ticks "$agent_pid")
max_rss=0
printf '%8s %12s %14s %10s\n' t_s VmRSS_KiB RssAnon_KiB cpu_ticks
for ((t = 0; t <= window; t += interval)); do
	[ "$t" -gt 0 ] && sleep "$interval"
	kill -0 "$agent_pid"
	rss=$(status_kib "$agent_pid" VmRSS)
	anon=$(status_kib "$agent_pid" RssAnon)
	[ "$rss" -gt "$max_rss" ] && max_rss=$rss
	printf '%8d %12d %14d %10d\n' "$t" "$rss" "$anon" "$(cpu_ticks "$agent_pid")"
done
t1=$(date +%s.%N)
c1=$(cpu_ticks "$agent_pid")
running || { echo "footprint: a container stopped during the window" >&2; exit 1; }

awk -v c="$((c1 - c0))" -v hz="$hz" -v t0="$t0" -v t1="$t1" -v rss="$rss" -v anon="$anon" -v max="$max_rss" -v n="$daemons" 'BEGIN {
	wall = t1 - t0; cpu = c / hz
	printf "agent with %d daemons, idle %.0f s: VmRSS %d KiB (max %d KiB), RssAnon %d KiB, CPU %.2f s = %.3f%% of one core\n", n, wall, rss, max, anon, cpu, 100 * cpu / wall
}'
