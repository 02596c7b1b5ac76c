// Package edgeagent is the agent that runs on each device: it receives and
// persists its desired state, and reconciles the container runtime to it,
// with or without a broker connection.
//
// Data flow:
//
//	MQTT owner --HandleMessage--> inbox (latest per topic) --+
//	runtime Events ------------------------- poke ----------+--> loop: one pass
//	probe workers (startup, readiness,                       |    (also every
//	  liveness) ---------------------------- poke ----------+    ResyncInterval)
//	postStart hooks ------------------------ poke ----------+
//	pass: accept desired (verify, persist in agent.db, subscribe missing
//	revisions, ConfigMaps and Secrets) -> cache verified objects -> List
//	containers -> remove leftovers (preStop, stop, remove) -> per desired
//	instance: policy, BuildInstance (env, volumes written under
//	DataDir/pods/{uid}), init containers one at a time to completion
//	(sidecars started), pull, create, start, restart under backoff
//	(reading the termination message of each exit) -> remove the files of
//	instances gone -> publish ObservedState if it changed -> kubelet-style
//	log links (KubeletLogs, if Config.KubeletLogDir is set).
//
// Beside the loop, the prefetcher (prefetch.go, its own goroutine) pulls
// the images of the revisions the desired state asks to prefetch, one
// image at a time, while the instances keep running; each pass tells it
// what is asked, and it publishes its progress in the observed state (at
// most every PrefetchReportInterval for bytes).
//
// Kubernetes pod semantics kept: init containers in order, each to exit 0,
// re-run only when the instance is recreated (never on adoption while its
// main containers exist); sidecars (restartPolicy Always) started in order
// and stopped after the main containers; startupProbe gating the other
// probes; postStart failure and startup/liveness failure restart the
// container under the backoff; preStop before every stop, within the grace
// period. Without a pause container the network namespace belongs to the
// first sidecar, else to the first main container (see network.go).
//
// Runtime is implemented by edgeagent/docker and, in memory, by
// edgeagent/fake. Conn is the MQTT connection as the agent needs it; the
// caller calls OnConnect after every (re)connection and OnConnectionLost when
// it drops.
//
// Guarantees: a desired state is persisted before it is applied, and the
// persisted state is applied at start without any broker; one instance runs
// per desired (daemonset, revision); an old revision keeps running until the
// template of its replacement has arrived and been verified; containers
// without io.edgeset.managed=true, or of another node, are never touched; an
// agent that has never accepted a desired state removes nothing.
package edgeagent
