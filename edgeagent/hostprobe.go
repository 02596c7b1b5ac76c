package edgeagent

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// hostProbe measures the device for the Announcer. procHost reads /proc and
// the network interfaces; tests use a fake. Every method is safe for
// concurrent use.
type hostProbe interface {
	// memory returns MemTotal and MemAvailable in bytes.
	memory() (total, available int64, err error)
	// disk returns the size and the space available to unprivileged users
	// of the filesystem holding path, in bytes.
	disk(path string) (size, available int64, err error)
	// pids returns the scheduling entities (processes and threads, which
	// each hold a PID) and the kernel's PID limit.
	pids() (used, limit int64, err error)
	// addresses returns the unicast addresses of every non-loopback
	// interface that is up, skipping link-local ones and container bridges.
	addresses() ([]netip.Addr, error)
	// kernelVersion returns the kernel release ("6.8.0-45-generic"), or ""
	// when unknown.
	kernelVersion() string
}

// procHost is the hostProbe of a Linux device, reading files under root
// ("/" in production).
type procHost struct{ root string }

var _ hostProbe = procHost{}

func (h procHost) path(p string) string { return filepath.Join(h.root, p) }

func (h procHost) memory() (total, available int64, err error) {
	b, err := os.ReadFile(h.path("proc/meminfo"))
	if err != nil {
		return 0, 0, err
	}
	return parseMeminfo(b)
}

// parseMeminfo extracts MemTotal and MemAvailable (kB in the file) as bytes.
func parseMeminfo(b []byte) (total, available int64, err error) {
	found := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "MemTotal" && key != "MemAvailable") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, 0, fmt.Errorf("meminfo %s: no value", key)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("meminfo %s: %w", key, err)
		}
		found[key] = kb * 1024
	}
	for _, key := range []string{"MemTotal", "MemAvailable"} {
		if _, ok := found[key]; !ok {
			return 0, 0, fmt.Errorf("meminfo: no %s", key)
		}
	}
	return found["MemTotal"], found["MemAvailable"], nil
}

func (h procHost) disk(path string) (size, available int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := int64(st.Bsize)
	return int64(st.Blocks) * bsize, int64(st.Bavail) * bsize, nil
}

func (h procHost) pids() (used, limit int64, err error) {
	b, err := os.ReadFile(h.path("proc/loadavg"))
	if err != nil {
		return 0, 0, err
	}
	if used, err = parseLoadavgEntities(string(b)); err != nil {
		return 0, 0, err
	}
	b, err = os.ReadFile(h.path("proc/sys/kernel/pid_max"))
	if err != nil {
		return 0, 0, err
	}
	if limit, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("pid_max: %w", err)
	}
	return used, limit, nil
}

// parseLoadavgEntities returns the total of "running/total", the fourth
// field of /proc/loadavg.
func parseLoadavgEntities(s string) (int64, error) {
	fields := strings.Fields(s)
	if len(fields) < 4 {
		return 0, fmt.Errorf("loadavg %q: want at least 4 fields", strings.TrimSpace(s))
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, fmt.Errorf("loadavg field %q: want running/total", fields[3])
	}
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("loadavg field %q: %w", fields[3], err)
	}
	return n, nil
}

// bridgePrefixes name interfaces that container engines create; their
// addresses are not the device's.
var bridgePrefixes = []string{"docker", "br-", "veth", "cni", "flannel", "cali", "podman"}

func (procHost) addresses() ([]netip.Addr, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []netip.Addr
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 || isBridge(ifc.Name) {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		out = append(out, usableAddrs(addrs)...)
	}
	return out, nil
}

func isBridge(name string) bool {
	for _, p := range bridgePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// usableAddrs keeps the global and private unicast addresses of addrs.
func usableAddrs(addrs []net.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
			continue
		}
		out = append(out, ip)
	}
	return out
}

func (h procHost) kernelVersion() string {
	b, err := os.ReadFile(h.path("proc/sys/kernel/osrelease"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
