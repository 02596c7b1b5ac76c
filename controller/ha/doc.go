// Package ha runs a highly available controller: two or three
// edgeset-controller processes of one fleet share their state in etcd
// and one of them, the leader, runs the controller (issue 15).
//
// A Supervisor is one such process. It campaigns with a leader.Elector
// under Prefix+"/leader". For each term it wins it readies the term's
// controller configuration (Options.Prepare: restore the store's local
// cache from etcd and fence every store write with the term), opens a
// controller.Controller and runs it until the term's context ends; the
// reconcile loop, publishing, manifest watching and the NATS auth
// callout therefore run in the leader only, and stop the moment its term
// does. The controller is then shut down completely (every goroutine
// joined, the store closed) and the supervisor campaigns again, still
// serving its API: going back to campaigning keeps the process useful as
// a standby at once, where exiting would leave that to a process
// supervisor's restart delay, and nothing of the old term survives it.
//
// The process serves one API listener for its whole life:
//
//	leading  -> the controller's API (controller.Controller.Handler)
//	standby  -> authenticated with the shared API token, then forwarded
//	            to the leader's advertised URL (httputil.ReverseProxy,
//	            flushed at once so log follows stream through it)
//	no leader-> 503, Retry-After, "no leader is elected"
//
// /healthz is answered locally, /readyz with the role. Answers carry
// HeaderServedBy (the controller whose API answered) and, when
// forwarded, HeaderForwardedBy (the standby).
//
// Every controller of a fleet needs the same API token and fleet secret.
// They live in etcd under Prefix+"/secrets/": the first controller
// creates them with one create-if-absent transaction (from its data
// directory's files when it has them, so a single-node controller moving
// to etcd keeps its devices' tokens), the others read them, and each
// writes them to its data directory, where the controller reads them.
// They are never logged.
package ha
