// Command edgesetctl is the operator's command line for edgeset.
//
//	edgesetctl validate -f FILE|DIR|- [-f ...]
//
// validate checks DaemonSet manifests offline, exactly as the controller
// would decode them: every problem is printed as "file:line: field:
// message", fields that have no meaning on an edge device as warnings, and
// each valid object as a one-line summary.
//
// Exit codes: 0 success, 1 invalid input or an I/O error, 2 a usage error.
package main
