// Package edgeagent is the agent that runs on each device: it receives and
// persists its desired state, and reconciles the container runtime to it,
// with or without a broker connection.
//
// Data flow:
//
//	MQTT owner --HandleMessage--> inbox (latest per topic) --+
//	runtime Events ------------------------- poke ----------+--> loop: one pass
//	probe workers (readiness, liveness) ---- poke ----------+    (also every
//	                                                             ResyncInterval)
//	pass: accept desired (verify, persist in agent.db, subscribe missing
//	revisions) -> cache verified revisions -> List containers -> remove
//	leftovers -> per desired instance: policy, BuildSpecs, pull, create,
//	start, restart under backoff -> publish ObservedState if it changed ->
//	kubelet-style log links (KubeletLogs, if Config.KubeletLogDir is set).
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
