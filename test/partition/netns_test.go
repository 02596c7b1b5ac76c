package partition

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// netns is a network namespace of the test's own, linked to the host by a
// veth pair addressed from a /30 nothing else on the host uses: the host end
// is hostIP, the end inside the namespace nsIP. Traffic between the two
// never leaves the machine.
type netns struct {
	name   string // the namespace
	host   string // veth end on the host
	inside string // veth end in the namespace
	hostIP string
	nsIP   string
}

// newNetns creates the namespace and the veth pair, brings the links (and
// the namespace's loopback) up, and deletes both at cleanup, even when the
// test fails half-way. It skips the test if the namespace cannot be created
// (no root, no iproute2).
func newNetns(t *testing.T) *netns {
	t.Helper()
	id := fmt.Sprintf("%d%02x", os.Getpid(), rand.IntN(256))
	n := &netns{name: "es-part-" + id, host: "esp" + id + "h", inside: "esp" + id + "n"}
	n.hostIP, n.nsIP = freeSubnet(t)

	if out, err := ipCmd("netns", "add", n.name); err != nil {
		t.Skipf("cannot create a network namespace: ip netns add %s: %v: %s", n.name, err, out)
	}
	t.Cleanup(func() {
		// Deleting the host end deletes its peer; the namespace goes last.
		if out, err := ipCmd("link", "show", n.host); err == nil {
			if out, err := ipCmd("link", "del", n.host); err != nil {
				t.Errorf("ip link del %s: %v: %s", n.host, err, out)
			}
		} else if !strings.Contains(out, "does not exist") {
			t.Errorf("ip link show %s: %v: %s", n.host, err, out)
		}
		if out, err := ipCmd("netns", "del", n.name); err != nil {
			t.Errorf("ip netns del %s: %v: %s", n.name, err, out)
		}
	})
	steps := [][]string{
		{"link", "add", n.host, "type", "veth", "peer", "name", n.inside},
		{"link", "set", n.inside, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.host},
		{"link", "set", n.host, "up"},
		{"-n", n.name, "addr", "add", n.nsIP + "/30", "dev", n.inside},
		{"-n", n.name, "link", "set", "lo", "up"},
		{"-n", n.name, "link", "set", n.inside, "up"},
	}
	for _, args := range steps {
		if out, err := ipCmd(args...); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return n
}

// freeSubnet picks a /30 in 10.254.0.0/16 from a /24 that has no address
// on the host, and returns its two usable addresses.
func freeSubnet(t *testing.T) (hostIP, nsIP string) {
	t.Helper()
	out, err := ipCmd("-4", "-o", "addr", "show")
	if err != nil {
		t.Skipf("cannot list host addresses: ip -4 -o addr show: %v: %s", err, out)
	}
	for range 32 {
		prefix := fmt.Sprintf("10.254.%d.", rand.IntN(256))
		if strings.Contains(out, " "+prefix) {
			continue
		}
		base := 4 * rand.IntN(64)
		return fmt.Sprintf("%s%d", prefix, base+1), fmt.Sprintf("%s%d", prefix, base+2)
	}
	t.Fatal("no free /24 in 10.254.0.0/16 for the test's veth pair")
	return "", ""
}

// setLink brings the veth end inside the namespace up or down: down cuts
// the agent off from the broker, the host side stays as it is.
func (n *netns) setLink(t *testing.T, state string) {
	t.Helper()
	if out, err := ipCmd("-n", n.name, "link", "set", n.inside, state); err != nil {
		t.Fatalf("ip -n %s link set %s %s: %v: %s", n.name, n.inside, state, err, out)
	}
}

// ipCmd runs ip with args and returns its combined output.
func ipCmd(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
