// Command edgeset-agent runs on each edge device: it connects to the fleet's
// MQTT broker with the node's token (or a client certificate), announces the
// node (labels, taints, capacity, addresses and measured conditions, sent
// only when they change; presence through the connection and its will), and
// reconciles the container runtime (Docker, or an in-memory fake for trials)
// to the node's desired state, which it keeps in its data directory so the
// daemons keep running while the broker is away.
//
// Every flag is also a config file key and an EDGESET_ environment variable
// (--node-name, node-name, EDGESET_NODE_NAME), except the node token's:
// EDGESET_NODE_TOKEN and EDGESET_NODE_TOKEN_FILE, since EDGESET_TOKEN is
// edgesetctl's API token. Precedence is flag, environment, file, default. Unknown file keys are an error. See
// configs/agent.yaml for every key and configs/edgeset-agent.service for a
// systemd unit.
//
// The node name defaults to the hostname, lowercased, and must be a
// DNS-1123 subdomain. The data directory defaults to ./agent-data, like the
// controller's ./data, so a trial run needs no privileges; the systemd unit
// sets /var/lib/edgeset-agent.
//
// Labels set by the agent itself (kubernetes.io/hostname, kubernetes.io/os,
// kubernetes.io/arch, edgeset.io/agent-version, edgeset.io/runtime) cannot
// be configured: daemonsets select on them, so they must tell the truth.
package main
