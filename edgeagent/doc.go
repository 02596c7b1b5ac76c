// Package edgeagent is the agent that runs on each device: it announces the
// node, receives and persists its desired state, and reconciles the container
// runtime to it, with or without a broker connection.
package edgeagent
