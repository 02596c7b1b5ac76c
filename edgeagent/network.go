package edgeagent

import "github.com/edgeset/edgeset/schema"

// An instance has no pause container: the container owning its network
// namespace is its first sidecar (an init container with restartPolicy
// Always) if it has one, else its first main container. The containers
// started after the owner join its namespace; init containers started
// before it exists get the pod's hostNetwork setting or a namespace of
// their own. With hostNetwork every container uses the host's.

// isSidecar reports whether sl is an init container with restartPolicy
// Always.
func isSidecar(p schema.PodSpec, sl slot) bool {
	if !sl.init || sl.index >= len(p.InitContainers) {
		return false
	}
	rp := p.InitContainers[sl.index].RestartPolicy
	return rp != nil && *rp == schema.RestartPolicyAlways
}

// firstSidecar returns the index of the first sidecar, or -1.
func firstSidecar(p schema.PodSpec) int {
	for i := range p.InitContainers {
		if isSidecar(p, initSlot(i)) {
			return i
		}
	}
	return -1
}

// networkOwner returns the slot owning the instance's network namespace;
// false with hostNetwork, when there is no namespace to share.
func networkOwner(p schema.PodSpec) (slot, bool) {
	if p.HostNetwork {
		return slot{}, false
	}
	if i := firstSidecar(p); i >= 0 {
		return initSlot(i), true
	}
	return mainSlot(0), true
}

// joinsNetwork reports whether the container in sl joins the network
// owner's namespace: every container started after the owner.
func joinsNetwork(p schema.PodSpec, sl slot) bool {
	owner, ok := networkOwner(p)
	if !ok || sl == owner {
		return false
	}
	if !owner.init {
		return !sl.init
	}
	return !sl.init || sl.index > owner.index
}

// hookHost is the address probes and httpGet hooks of c reach: 127.0.0.1
// with host networking, else the network owner's address for a container
// that joined it, else c's own.
func hookHost(p schema.PodSpec, g containerGroup, sl slot, c ContainerState) string {
	if p.HostNetwork {
		return "127.0.0.1"
	}
	if owner, ok := networkOwner(p); ok && joinsNetwork(p, sl) {
		if o, found := g[owner]; found && o.IPAddress != "" {
			return o.IPAddress
		}
	}
	if c.IPAddress != "" {
		return c.IPAddress
	}
	return "127.0.0.1"
}
