// Package placement decides, as a pure function, whether a daemonset should
// run on a node. It follows the Kubernetes DaemonSet controller
// (pkg/controller/daemon NodeShouldRunDaemonPod and the predicates it calls)
// and the taint eviction controller:
//
//   - the nodeSelector and the required node affinity must both match;
//     nodeSelectorTerms are ORed, the expressions and fields of a term ANDed;
//     a mismatch means: do not start an instance and stop a running one;
//   - an untolerated NoSchedule taint keeps new instances off the node but
//     leaves a running instance alone;
//   - an untolerated NoExecute taint stops a running instance too, and so
//     does a NoExecute taint whose toleration has tolerationSeconds that have
//     run out;
//   - PreferNoSchedule never blocks;
//   - every daemon tolerates the taints the DaemonSet controller tolerates
//     for every daemon pod (not-ready and unreachable NoExecute; disk, memory
//     and PID pressure and unschedulable NoSchedule; network-unavailable
//     NoSchedule with hostNetwork), so a cordoned node or a node under
//     pressure keeps its daemons.
//
// A daemonset revision is compiled once into a Policy; Policy.Decide then
// answers for one node without allocating and without reading a clock: the
// caller passes now. Reasons for a "no" are rendered only when asked for.
package placement
