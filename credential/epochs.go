package credential

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// EpochsFile, in the data directory, lists the nodes whose credential
// has been rotated or re-admitted: "NODE EPOCH" a line, EPOCH a positive
// integer; blank lines and '#' comments are ignored. A node not listed
// is at epoch 0. The controller writes it (from its store) whenever an
// epoch changes; the embedded broker and the NATS auth callout read it
// with the revocation list.
const EpochsFile = "node-epochs"

// NodeTokenAt returns node's MQTT password at credential epoch epoch:
// NodeToken for epoch 0 (the tokens of before epochs), else
// base64url(HMAC-SHA256(secret, "edgeset-node:"+node+"@"+epoch)). A
// node name holds no '@', so no node's token at one epoch is another
// node's at another.
func NodeTokenAt(secret []byte, node string, epoch uint64) string {
	if epoch == 0 {
		return NodeToken(secret, node)
	}
	return mac(secret, nodeTokenPrefix+node+"@"+strconv.FormatUint(epoch, 10))
}

// parseEpochs reads an epochs file; malformed lines are returned in bad,
// not applied. A node listed twice takes its highest epoch.
func parseEpochs(data []byte) (epochs map[string]uint64, bad []string) {
	epochs = make(map[string]uint64)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 || !schema.ValidNodeName(fields[0]) {
			bad = append(bad, line)
			continue
		}
		n, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil || n == 0 {
			bad = append(bad, line)
			continue
		}
		epochs[fields[0]] = max(epochs[fields[0]], n)
	}
	return epochs, bad
}

// ReadEpochs returns the epochs of dataDir's epochs file; a missing file
// is none.
func ReadEpochs(dataDir string) (map[string]uint64, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, EpochsFile))
	if os.IsNotExist(err) {
		return map[string]uint64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read node epochs: %w", err)
	}
	epochs, _ := parseEpochs(data)
	return epochs, nil
}

// WriteEpochs replaces dataDir's epochs file with epochs (mode 0600,
// through a synced temporary file and a rename, so a reader sees the old
// list or the new one).
func WriteEpochs(dataDir string, epochs map[string]uint64) error {
	nodes := make([]string, 0, len(epochs))
	for n, e := range epochs {
		if e > 0 {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	var b strings.Builder
	b.WriteString("# Node credential epochs, written by edgeset-controller from its store: do not edit.\n")
	for _, n := range nodes {
		fmt.Fprintf(&b, "%s %d\n", n, epochs[n])
	}
	return writeAtomic(filepath.Join(dataDir, EpochsFile), []byte(b.String()))
}

// Readmit removes node (by name) from dataDir's revocation list. A
// fingerprint line stays: it names a token of an epoch the node has left.
func Readmit(dataDir, node string) (removed bool, err error) {
	path := filepath.Join(dataDir, RevokedFile)
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read revocation list %s: %w", path, err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == node {
			removed = true
			continue
		}
		out.WriteString(sc.Text() + "\n")
	}
	if !removed {
		return false, nil
	}
	return true, writeAtomic(path, out.Bytes())
}

// writeAtomic replaces path with data through a synced temporary file in
// the same directory, mode 0600.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
