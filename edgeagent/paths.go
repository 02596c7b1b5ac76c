package edgeagent

import "path/filepath"

// Layout of an instance's files under the agent's data directory, as the
// kubelet keeps them under /var/lib/kubelet/pods:
//
//	DataDir/pods/{podUID}/volumes/{kind}/{volume}      volume contents
//	DataDir/pods/{podUID}/containers/{container}/termination-log
//
// The instance's uid is carried on each of its containers as LabelPodUID.

// podDir is the directory of one instance's files.
func podDir(dataDir, podUID string) string {
	return filepath.Join(dataDir, "pods", podUID)
}

// terminationLogPath is the host file bind-mounted at a container's
// terminationMessagePath; the agent reads it after the container exits.
func terminationLogPath(dataDir, podUID, container string) string {
	return filepath.Join(podDir(dataDir, podUID), "containers", container, "termination-log")
}
