package selfupdate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// DefaultCheckTimeout bounds `NEW version --json`.
const DefaultCheckTimeout = 30 * time.Second

// maxCheckOutput bounds what the check reads of the new binary's output.
const maxCheckOutput = 64 << 10

// checkBinary runs `path version --json` and checks that it is an agent
// that can roll itself back, of version, built for platform: a binary
// for another architecture, a corrupt file or another program fails
// here, before anything is swapped.
func checkBinary(ctx context.Context, path, version, platform string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version", "--json")
	var out, errOut boundedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("`version --json` did not answer within %s", timeout)
		}
		return fmt.Errorf("`version --json` failed: %w%s", err, quoted(errOut.String()))
	}
	var info VersionInfo
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return fmt.Errorf("`version --json` printed no version: %v%s", err, quoted(out.String()))
	}
	switch {
	case info.SelfUpgrade < RecordFormat:
		return fmt.Errorf("agent %s cannot upgrade itself nor roll itself back (self-upgrade format %d, want %d)", info.Version, info.SelfUpgrade, RecordFormat)
	case info.Version != version:
		return fmt.Errorf("it is agent %s, the revision names %s", info.Version, version)
	case info.Platform != platform:
		return fmt.Errorf("it is built for %s, this node is %s", info.Platform, platform)
	}
	return nil
}

func quoted(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return fmt.Sprintf(": %q", s)
}

// boundedBuffer keeps the first maxCheckOutput bytes written to it.
type boundedBuffer struct{ bytes.Buffer }

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := maxCheckOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
