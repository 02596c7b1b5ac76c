// Package schema defines edgeset's manifest types (a Kubernetes-shaped
// DaemonSet; apps/v1 manifests are accepted unchanged), the node model, the
// MQTT wire messages and topics, and their validation. It imports only the
// standard library and a YAML decoder; every other package imports it.
package schema
