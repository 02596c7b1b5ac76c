# edgeset build, test and benchmark targets. `make help` lists them.
SHELL        := /bin/bash
GO           ?= go
BIN          := bin
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS      := -s -w -X github.com/edgeset/edgeset/schema.Version=$(VERSION)
GOBUILD      := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.7.0
BINARIES     := edgeset-controller edgeset-agent edgesetctl edgeset-sim
FUZZTIME     ?= 3s
DATA_DIR     ?= ./data

.PHONY: help build test test-unit fuzz lint bench run cross clean screenshots

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build every binary (static) into bin/
	@mkdir -p $(BIN)
	@for b in $(BINARIES); do echo "build $(BIN)/$$b"; $(GOBUILD) -o $(BIN)/$$b ./cmd/$$b || exit 1; done

test: test-unit fuzz ## unit and integration tests with -race, then a short fuzz of every decoder

test-unit:
	$(GO) test -race -count=1 -timeout 9m ./...

fuzz: ## run each fuzz target for FUZZTIME (default 3s)
	@# A crash saves its input under testdata/fuzz and fails at once. A run
	@# that fails without saving one (the fuzzing engine itself, e.g. a
	@# worker stalled on a loaded machine) is shown and retried once.
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    log=$$(mktemp); \
	    if ! $(GO) test -run='^$$' -fuzz="^$$f\$$" -fuzztime=$(FUZZTIME) $$pkg >$$log 2>&1; then \
	      cat $$log; \
	      if [ -d $$dir/testdata/fuzz/$$f ] && [ -n "$$(git -C $$dir status --porcelain -- testdata/fuzz/$$f)" ]; then \
	        echo "fuzz $$f found a crash: the input is in $$dir/testdata/fuzz/$$f"; exit 1; \
	      fi; \
	      echo "fuzz $$f failed without a crashing input; retrying once"; \
	      $(GO) test -run='^$$' -fuzz="^$$f\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	    fi; \
	    rm -f $$log; \
	  done; \
	done

lint: ## gofmt check, go vet, staticcheck (pinned)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

bench: ## micro-benchmarks (placement, codecs) with memory figures
	$(GO) test -run='^$$' -bench=. -benchmem ./...

.PHONY: bench-idle
bench-idle: ## idle agent MQTT traffic through a counting proxy (3 min; EDGESET_BENCH_IDLE_WINDOW, _KEEPALIVE)
	EDGESET_BENCH_IDLE=1 $(GO) test -count=1 -timeout 30m -run '^TestIdleTraffic$$' -v ./cmd/edgeset-agent/

.PHONY: bench-image-resume
bench-image-resume: ## image fetched from the controller through a link cut at 50%: bytes sent vs image size (real Docker engine)
	EDGESET_REQUIRE_DOCKER=1 $(GO) test -count=1 -run '^TestImagesWithoutRegistry$$/^ResumesAfterCut$$' -v ./test/e2e/ | grep -E 'controller sent|^(ok|FAIL|---)'

.PHONY: bench-prefetch
bench-prefetch: ## per-node downtime of a rollout without and with spec.rollout.prefetch: simulated devices pulling over a 200 KB/s link (EDGESET_PREFETCH_NODES, _IMAGE_BYTES, _LINK_BPS)
	EDGESET_PREFETCH_NODES=$${EDGESET_PREFETCH_NODES:-20} EDGESET_PREFETCH_IMAGE_BYTES=$${EDGESET_PREFETCH_IMAGE_BYTES:-2000000} \
		$(GO) test -count=1 -timeout 30m -run '^TestPrefetchDowntime$$' -v ./sim/ | grep -E 'nodes, image|downtime per node|^(ok|FAIL|---)'

.PHONY: bench-broker-memory
bench-broker-memory: ## broker RSS per idle device: embedded broker and Mosquitto (EDGESET_BENCH_CLIENTS, default 5000)
	EDGESET_BENCH_SCALE=1 $(GO) test -count=1 -run='^$$' -bench='^BenchmarkIdleClients$$' -benchtime=1x ./broker/
	EDGESET_BENCH_SCALE=1 $(GO) test -count=1 -run='^$$' -bench='^BenchmarkIdleClientsMosquitto$$' -benchtime=1x ./broker/

run: build ## controller (store in DATA_DIR), simulated fleet (configs/sim/fleet.yaml), local Docker agent, example daemonsets; Ctrl-C stops all
	@# On a terminal the demo runs as a job of its own (bash -m), so Ctrl-C
	@# reaches the demo's processes, which stop cleanly, and not make, which
	@# would report the interrupt and exit 2 however cleanly they stopped.
	@if [ -t 0 ]; then exec bash -m -c 'BIN=$(BIN) DATA_DIR=$(DATA_DIR) configs/run-demo.sh'; \
	else BIN=$(BIN) DATA_DIR=$(DATA_DIR) exec configs/run-demo.sh; fi

screenshots: ## a 1280x800 PNG of each dashboard view into bin/screenshots/ (headless chromium against an in-process controller and simulated fleet)
	@mkdir -p $(BIN)/screenshots
	EDGESET_SCREENSHOTS=$(abspath $(BIN))/screenshots $(GO) test -count=1 -run '^TestBrowser$$' ./controller/ui/
	@ls $(BIN)/screenshots/*.png

cross: ## static agents for linux/amd64, linux/arm64, linux/arm/v7
	@mkdir -p $(BIN)
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/edgeset-agent-linux-amd64 ./cmd/edgeset-agent
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/edgeset-agent-linux-arm64 ./cmd/edgeset-agent
	CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/edgeset-agent-linux-armv7 ./cmd/edgeset-agent

clean:
	rm -rf $(BIN)

.PHONY: bench-scale
SCALE_RAMP   ?= 2000
SCALE_RUNS   ?= 3
SCALE_CPUPROFILE ?=
SCALE_DEVICE_PROCESSES ?= 1
SCALE_SIGNING ?=
SCALE_VERIFY_EACH ?=

bench-scale: ## fleet scale benchmark: controller subprocess + simulated devices (EDGESET_SCALE_NODES, default "1000 10000"; SCALE_RUNS runs of each, default 3, then min/median/max; SCALE_CPUPROFILE=1 profiles the controller per phase; SCALE_DEVICE_PROCESSES=K runs the devices in K processes; SCALE_SIGNING=1 signs, every device verifying, sharing the signatures verified in its process unless SCALE_VERIFY_EACH=1)
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/edgeset-sim ./cmd/edgeset-sim
	@for n in $${EDGESET_SCALE_NODES:-1000 10000}; do \
	  echo "== $$n nodes"; \
	  reports=""; \
	  for i in $$(seq 1 $(SCALE_RUNS)); do \
	    echo "-- run $$i of $(SCALE_RUNS)"; \
	    profile=""; \
	    if [ -n "$(SCALE_CPUPROFILE)" ]; then profile="--cpuprofile $(BIN)/bench-scale-$$n-$$i.pprof"; fi; \
	    $(BIN)/edgeset-sim --bench --nodes $$n --ramp $(SCALE_RAMP) --device-processes $(SCALE_DEVICE_PROCESSES) $(if $(SCALE_SIGNING),--signing) $(if $(SCALE_VERIFY_EACH),--verify-each) --report $(BIN)/bench-scale-$$n-$$i.json $$profile || exit 1; \
	    reports="$$reports $(BIN)/bench-scale-$$n-$$i.json"; \
	  done; \
	  $(BIN)/edgeset-sim --summary $$reports || exit 1; \
	done

.PHONY: bench-controller
bench-controller: ## controller in process, no broker, 10,000 and 100,000 nodes x 20 daemonsets: one node's event (p50/p99 CPU), apply to all, rolling update per batch, heap per node (~15 min; EDGESET_BENCH_PROFILE=prefix writes profiles)
	@for n in $${EDGESET_BENCH_NODES_LIST:-10000 100000}; do \
	  echo "== $$n nodes"; \
	  EDGESET_BENCH_NODES=$$n $(GO) test -count=1 -timeout 30m -run '^$$' -bench '^Benchmark(NodeEvent|ApplyAll|RollingUpdate)$$' -benchtime=1x ./controller/ || exit 1; \
	done
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkDecideNodeEvent$$' -benchtime=200x -benchmem ./controller/decider/
	$(GO) test -count=1 -run '^$$' -bench '^Benchmark(DecideApplyAll|DecideFull)$$' -benchtime=2x -benchmem ./controller/decider/
	$(GO) test -count=1 -run '^$$' -bench '^Benchmark(Tracker|StepFull|PlaceAssemble)' -benchmem ./controller/rollout/ ./controller/reconcile/

.PHONY: bench-footprint
bench-footprint: ## agent RSS and idle CPU with 5 daemons on the local Docker engine (~3 min; EDGESET_FOOTPRINT_WINDOW)
	test/footprint.sh

.PHONY: test-fault
FAULT_NODES  ?= 200

test-fault: ## fault-injection scenarios (test/fault) at FAULT_NODES agents (default 200)
	EDGESET_FAULT_NODES=$(FAULT_NODES) $(GO) test -count=1 -timeout 30m -v ./test/fault/

.PHONY: test-cluster
CLUSTER_NODES ?= 1000
test-cluster: ## three nats-server processes (built from the module), the controller serving their auth callout, CLUSTER_NODES agents at QoS 0 both ways (default 1000, about 1 min): a member and then the controller SIGKILLed mid-rollout, invariants hold, the fleet converges; and a late will of an unseen session
	EDGESET_TEST_CLUSTER=1 EDGESET_FAULT_NODES=$(CLUSTER_NODES) $(GO) test -count=1 -timeout 30m -run '^(TestNATSLateWillOfUnseenSession|TestNATSServerKilledDuringRollout)$$' -v ./test/fault/

.PHONY: test-cluster-ha
CLUSTER_HA_NODES ?= 200
test-cluster-ha: ## the same cluster with two HA controllers on etcd (the leader serving the callout): a member, then the leader SIGKILLed mid-rollout; the standby leads within 10 s, invariants hold, the fleet converges (CLUSTER_HA_NODES agents, default 200)
	EDGESET_TEST_CLUSTER=1 EDGESET_FAULT_NODES=$(CLUSTER_HA_NODES) $(GO) test -count=1 -timeout 30m -run '^TestHAControllersOnNATSCluster$$' -v ./test/fault/

.PHONY: bench-scale-cluster
SCALE_CLUSTER_NODES ?= 50000
SCALE_CLUSTER_RAMP ?=
SCALE_CLUSTER_PHASE_TIMEOUT ?=
SCALE_CLUSTER_SIM_FLAGS ?=
bench-scale-cluster: ## fleet scale benchmark on three nats-server processes (built from the module): controller serving their auth callout, SCALE_CLUSTER_NODES devices (default 50000, QoS 0 both ways) in processes of 15,000 spread over the members, SCALE_CLUSTER_RAMP devices started per second (default 250), SCALE_CLUSTER_PHASE_TIMEOUT seconds per phase (default 600); logs the members' CPU, peak RSS and JetStream writes per device
	EDGESET_SCALE_CLUSTER=1 EDGESET_SCALE_CLUSTER_NODES=$(SCALE_CLUSTER_NODES) EDGESET_SCALE_CLUSTER_RAMP=$(SCALE_CLUSTER_RAMP) EDGESET_SCALE_CLUSTER_PHASE_TIMEOUT_SECONDS=$(SCALE_CLUSTER_PHASE_TIMEOUT) EDGESET_SCALE_CLUSTER_SIM_FLAGS="$(SCALE_CLUSTER_SIM_FLAGS)" $(GO) test -count=1 -timeout 180m -run '^TestScaleCluster$$' -v ./sim/scale/

.PHONY: test-ha
HA_NODES ?= 150
test-ha: ## two edgeset-controller processes with --store etcd (etcd embedded in the test), HA_NODES agents (default 150): the leader SIGKILLed mid-rollout (standby leads within 10 s), etcd cut for 20 s, the leader paused past its lease; invariants hold, the fleet converges
	EDGESET_TEST_HA=1 EDGESET_FAULT_NODES=$(HA_NODES) $(GO) test -count=1 -timeout 30m -run '^TestHAControllerKilledDuringRollout$$' -v ./test/fault/

.PHONY: bench-scale-mosquitto
bench-scale-mosquitto: ## fleet scale benchmark with Mosquitto as the broker (EDGESET_SCALE_MOSQUITTO_NODES, default 10000)
	EDGESET_SCALE_MOSQUITTO=1 $(GO) test -count=1 -timeout 30m -run '^TestScaleMosquitto$$' -v ./sim/scale/

.PHONY: fault-fds
fault-fds: ## 20,000 idle MQTT connections, then 20,000 slow API bodies, against a controller limited to 20,000 files: genuine clients still served, /readyz follows (EDGESET_FAULT_FDS_CONNS)
	EDGESET_FAULT_FDS=1 $(GO) test -count=1 -timeout 30m -run '^TestFaultFDs$$' -v ./test/fds/
