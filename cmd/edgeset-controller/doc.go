// Command edgeset-controller runs the edgeset controller: the embedded MQTT
// broker (or a client of an external one), the store, the reconcile loop and
// the HTTP API. With no configuration at all it listens on loopback and keeps
// its data in ./data. See configs/controller.yaml for every key.
package main
