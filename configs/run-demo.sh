#!/usr/bin/env bash
# run-demo.sh is `make run`: a controller (embedded broker, store in
# DATA_DIR), a simulated fleet (configs/sim/fleet.yaml), a real agent on
# the local Docker engine when `docker info` works, and the example
# manifests (configs/examples/manifests/). Ctrl-C stops everything and waits
# for every process to exit.
#
# Environment: BIN (bin), DATA_DIR (./data), EDGESET_DEMO_NODES (12; 0 for
# no simulated fleet), EDGESET_DEMO_DOCKER (auto; 0 for no local agent),
# EDGESET_DEMO_APPLY (1; 0 to apply nothing), EDGESET_DEMO_API_ADDR
# (127.0.0.1:8080), EDGESET_DEMO_MQTT_ADDR (127.0.0.1:1883).
#
# Ctrl-C (SIGINT) or SIGTERM is the normal way to stop: the script then
# exits 0 once every child has stopped. It exits 1 only when a child dies
# on its own.
set -euo pipefail

BIN=${BIN:-bin}
DATA_DIR=${DATA_DIR:-./data}
NODES=${EDGESET_DEMO_NODES:-12}
DOCKER=${EDGESET_DEMO_DOCKER:-auto}
APPLY=${EDGESET_DEMO_APPLY:-1}
API_ADDR=${EDGESET_DEMO_API_ADDR:-127.0.0.1:8080}
MQTT_ADDR=${EDGESET_DEMO_MQTT_ADDR:-127.0.0.1:1883}
CONFIGS=$(cd "$(dirname "$0")" && pwd)
EXAMPLES=$CONFIGS/examples
LOGS=$DATA_DIR/logs
CTL=("$BIN/edgesetctl" --server "http://$API_ADDR" --token-file "$DATA_DIR/admin.token")

pids=()   # children, in start order
names=()  # their names, for messages

log() { printf 'run: %s\n' "$*"; }

# start NAME CMD... runs CMD in the background, output in LOGS/NAME.log.
# Ctrl-C reaches the children too (one process group): each stops on its own
# SIGINT, and the trap below waits for them.
start() {
	local name=$1
	shift
	"$@" >"$LOGS/$name.log" 2>&1 &
	pids+=("$!")
	names+=("$name")
	log "started $name (pid $!, log $LOGS/$name.log)"
}

# stop ends the children, newest first (SIGTERM, SIGKILL after 15s), and
# waits for each.
stop() {
	trap - EXIT INT TERM
	local i pid n
	echo
	log "stopping..."
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[i]}" 2>/dev/null || true
	done
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid=${pids[i]}
		for ((n = 0; n < 150; n++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "${names[i]} did not stop in 15s: killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
	log "stopped; state stays in $DATA_DIR (rm -rf $DATA_DIR for a fresh start)"
}
trap stop EXIT
# An interruption is how the demo ends: stop (the EXIT trap) and exit 0.
interrupted=0
trap 'interrupted=1; exit 0' INT TERM

# died prints the name of a child that has exited, if any.
died() {
	local i
	for ((i = 0; i < ${#pids[@]}; i++)); do
		if ! kill -0 "${pids[i]}" 2>/dev/null; then
			echo "${names[i]}"
			return 0
		fi
	done
	return 1
}

# fail reports a child that died, with the end of its log, and exits. It
# first gives a pending Ctrl-C a second to run its trap: the children see
# the same SIGINT and may exit before this script handles it. A child that
# exited 0 was stopped (a signal to the process group: started as a
# background job of a non-interactive shell, this script has SIGINT
# ignored and cannot trap it), so that ends the demo as Ctrl-C does.
fail() {
	sleep 1
	if ((interrupted)); then exit 0; fi
	local i
	for ((i = 0; i < ${#pids[@]}; i++)); do
		if [[ ${names[i]} == "$1" ]] && wait "${pids[i]}" 2>/dev/null; then
			log "$1 stopped (exit 0); stopping the rest"
			exit 0
		fi
	done
	log "$1 exited unexpectedly; the end of $LOGS/$1.log:"
	tail -n 20 "$LOGS/$1.log" | sed 's/^/    /'
	exit 1
}

# waitfor DESC SECONDS CMD... polls CMD every 0.2s until it succeeds.
waitfor() {
	local desc=$1 tries=$(($2 * 5)) name
	shift 2
	until "$@" >/dev/null 2>&1; do
		if name=$(died); then fail "$name"; fi
		tries=$((tries - 1))
		if ((tries <= 0)); then
			log "timed out waiting for $desc"
			exit 1
		fi
		sleep 0.2
	done
}

nodes_at_least() { (($("${CTL[@]}" get nodes -o name | grep -c .) >= $1)); }

mkdir -p "$LOGS"
# Every simulated device and the local agent dial from loopback, one source
# address: exempt it from the broker's per-source cap (100) and failed-login
# back-off, or more than 100 devices, or one agent with a wrong token,
# would lock the rest of the demo fleet out.
start controller "$BIN/edgeset-controller" --data-dir "$DATA_DIR" --api-addr "$API_ADDR" --mqtt-addr "$MQTT_ADDR" \
	--mqtt-exempt-sources 127.0.0.0/8,::1
waitfor "the controller's API" 30 "${CTL[@]}" version
want=0

if ((NODES > 0)); then
	start fleet "$BIN/edgeset-sim" --broker-url "tcp://$MQTT_ADDR" --nodes "$NODES" \
		--fleet-secret-file "$DATA_DIR/fleet.secret" --fleet "$CONFIGS/sim/fleet.yaml" \
		--source-range "" --interval 10s
	want=$NODES
fi

if [[ $DOCKER != 0 ]] && command -v docker >/dev/null && docker info >/dev/null 2>&1; then
	token=$DATA_DIR/local-docker.token
	(umask 077 && "${CTL[@]}" token create local-docker | tail -1 >"$token")
	# The taint keeps fluentd (which does not tolerate it) off this machine;
	# node-exporter tolerates every taint and lands here too.
	start agent-local-docker "$BIN/edgeset-agent" --node-name local-docker --token-file "$token" \
		--broker-url "tcp://$MQTT_ADDR" \
		--runtime docker --data-dir "$DATA_DIR/agent-local-docker" --labels site=local,role=worker \
		--taints edgeset.io/local-docker=true:NoSchedule
	want=$((want + 1))
	docker_agent=1
else
	docker_agent=0
	log "no Docker engine (docker info failed): no local agent; the simulated fleet runs everything"
fi

if ((want > 0)); then
	waitfor "$want nodes to announce themselves" 60 nodes_at_least "$want"
	log "$want nodes online"
fi
if [[ $APPLY != 0 ]]; then
	"${CTL[@]}" apply -f "$EXAMPLES/manifests/"
fi

cat <<HINTS

edgeset is running: controller API http://$API_ADDR (token $DATA_DIR/admin.token),
dashboard http://$API_ADDR/ui/ (sign in with that token),
embedded MQTT broker tcp://$MQTT_ADDR, logs in $LOGS. In another terminal:

  bin/edgesetctl get nodes -o wide
  bin/edgesetctl get daemonsets -A                     # add -w to follow changes
  bin/edgesetctl rollout status ds fluentd-elasticsearch -n kube-system
  bin/edgesetctl explain daemonset fluentd-elasticsearch -n kube-system   # why (not) on each node
  bin/edgesetctl label node sim-00000 edgeset.io/camera=true   # video-analytics appears there
  bin/edgesetctl events --watch
  bin/edgesetctl describe node sim-00002                  # the tainted one
HINTS
if ((docker_agent)); then
	cat <<HINTS

  local-docker is this machine's Docker engine. Without a reachable image
  registry, node-exporter there stays in ImagePullBackOff (so its rollout
  status waits on that node); the simulated nodes run everything:
  bin/edgesetctl explain ds node-exporter -n monitoring --node local-docker
HINTS
fi
printf '\nCtrl-C stops everything.\n'

while true; do
	if name=$(died); then fail "$name"; fi
	sleep 1
done
