// Package schema defines edgeset's manifest types (a Kubernetes-shaped
// DaemonSet; apps/v1 manifests are accepted unchanged), the node model, the
// MQTT wire messages and topics, and their validation. It imports only the
// standard library and a YAML decoder; every other package imports it.
//
// Manifests go through Decode (or DecodeFile, DecodePath): YAML is parsed
// into node trees that keep line numbers, walked against the Go types'
// JSON tags (so the accepted field set cannot drift from the types), with
// Kubernetes fields that a device cannot honour dropped as Warnings (see
// ignored.go; each says what the daemon loses and has a WarningClass) and
// any other unknown field an error; the result is decoded with
// encoding/json, defaulted and validated: DaemonSets by SetDefaults and
// ValidateDaemonSet, ConfigMaps and Secrets (v1) by their own Set*Defaults
// and Validate*, a Secret's stringData merged into its data. Every problem
// comes back at once in a *ValidationError whose FieldErrors carry the
// field path, file and line. docs/compatibility.md lists what every
// Kubernetes field means on a device.
//
// Node files go through DecodeNodes; MQTT payloads through the Decode*
// wire decoders (wire_decode.go), which are strict and bounded by
// MaxMessageSize.
package schema
