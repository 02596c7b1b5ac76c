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
//	revisions, ConfigMaps and Secrets) -> cache verified objects -> List
//	containers -> remove leftovers -> per desired instance: policy,
//	BuildInstance (env, volumes written under DataDir/pods/{uid}), pull,
//	create, start, restart under backoff -> remove the files of instances
//	gone -> publish ObservedState if it changed.
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
