package edgeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeset/edgeset/schema"
)

// Bounds of termination messages, as in Kubernetes.
const (
	// maxTerminationMessage is what is read of a termination-log file.
	maxTerminationMessage = 4096
	// fallbackLogLines and fallbackLogBytes bound the log tail used by
	// FallbackToLogsOnError.
	fallbackLogLines = 80
	fallbackLogBytes = 2048
	// maxStatusMessage bounds the termination message carried in an
	// instance's status, which shares one observed-state message with every
	// other instance of the node; events carry up to
	// maxTerminationMessage.
	maxStatusMessage = 1024
	// runStartSlack is how much before a run's StartedAt its log tail
	// starts: the engine records StartedAt once the process runs, so a
	// process that fails at once may log its reason just before it. Runs
	// of a crashing container are further apart (the back-off is 10s or
	// more), so this keeps the lines of earlier runs out.
	runStartSlack = time.Second
)

// terminationMessage returns the message c left when it exited: the host
// file bind-mounted at its terminationMessagePath (terminationLogPath of
// its LabelPodUID), at most 4096 bytes; with policy FallbackToLogsOnError
// and a failed exit, the tail of its log when the file is empty. Nothing
// when the label, the data directory or the file is absent.
func (a *Agent) terminationMessage(ctx context.Context, c ContainerState, tc schema.Container) string {
	msg := a.readTerminationLog(c)
	if msg == "" && c.ExitCode != 0 && tc.TerminationMessagePolicy == schema.TerminationMessageFallbackToLogsOnError {
		msg = a.logTail(ctx, c)
	}
	return strings.TrimSpace(strings.ToValidUTF8(msg, "\uFFFD"))
}

func (a *Agent) terminationLogFile(c ContainerState) (string, bool) {
	uid, name := c.Labels[LabelPodUID], c.Labels[LabelContainer]
	if a.cfg.DataDir == "" || uid == "" || name == "" {
		return "", false
	}
	return terminationLogPath(a.cfg.DataDir, uid, name), true
}

func (a *Agent) readTerminationLog(c ContainerState) string {
	path, ok := a.terminationLogFile(c)
	if !ok {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("cannot read termination message", "container", c.Name, "err", err)
		}
		return ""
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTerminationMessage))
	if err != nil {
		a.log.Warn("cannot read termination message", "container", c.Name, "err", err)
	}
	return string(b)
}

// clearTerminationLog empties the termination-log file before a restart,
// so that each run's message is its own (Kubernetes gives each run a new
// file).
func (a *Agent) clearTerminationLog(c ContainerState) {
	path, ok := a.terminationLogFile(c)
	if !ok {
		return
	}
	if err := os.Truncate(path, 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		a.log.Warn("cannot clear termination message", "container", c.Name, "err", err)
	}
}

// logTail returns the last fallbackLogLines lines of the run of c that
// just ended, at most fallbackLogBytes (the last ones). Docker restarts a
// container in place, with one log for every run: the kubelet reads the
// ended container's own log, so the lines of earlier runs are left out.
func (a *Agent) logTail(ctx context.Context, c ContainerState) string {
	opts := LogOptions{Tail: fallbackLogLines}
	if !c.StartedAt.IsZero() {
		opts.Since = a.runs.lastRunSince(c.ID, c.StartedAt)
	}
	rc, err := a.rt.Logs(ctx, c.ID, opts)
	if err != nil {
		a.log.Warn("cannot read log for termination message", "container", c.Name, "err", err)
		return ""
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		a.log.Warn("cannot read log for termination message", "container", c.Name, "err", err)
	}
	return lastBytes(string(b), fallbackLogBytes)
}

// lastBytes returns at most n trailing bytes of s, starting at a rune.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// firstBytes returns at most n leading bytes of s, ending at a rune, with
// "..." when cut.
func firstBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// containerWho names a container in messages; sidecars are named as the
// containers they run beside.
func containerWho(regularInit bool, name string) string {
	if regularInit {
		return fmt.Sprintf("init container %q", name)
	}
	return "container " + name
}

// describeExit says how a container's run ended, for the instance status
// (summary) and the event (event): exit code, OOMKilled and termination
// message. A main container's or sidecar's summary is short ("exit code 1: <message>",
// "OOMKilled: exit code 137"), as it follows the phase
// (CrashLoopBackOff); an init container's names it (`init container
// "setup" exited with code 1: <message>`).
func describeExit(regularInit bool, name string, c ContainerState, term string) (summary, event string) {
	var ended string
	if c.OOMKilled {
		ended = fmt.Sprintf("was OOMKilled (exit code %d)", c.ExitCode)
		summary = fmt.Sprintf("OOMKilled: exit code %d", c.ExitCode)
	} else {
		ended = fmt.Sprintf("exited with code %d", c.ExitCode)
		summary = fmt.Sprintf("exit code %d", c.ExitCode)
	}
	event = containerWho(regularInit, name) + " " + ended
	if regularInit {
		summary = event
	}
	if term != "" {
		summary += ": " + firstBytes(term, maxStatusMessage)
		event += ": " + term
	}
	return summary, event
}
