package testimage_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/test/testimage"
)

// TestAppModes runs each one-shot mode of the test image and checks its exit
// status, which is what container tests build their assertions on.
func TestAppModes(t *testing.T) {
	cli := testimage.RequireDocker(t)
	image := testimage.Build(t)
	node := testimage.Node(t, cli)

	cases := []struct {
		name string
		cmd  []string
		want int
	}{
		{"exit code", []string{"exit", "7"}, 7},
		{"exit after delay", []string{"exit", "0", "100ms"}, 0},
		{"check existing file", []string{"check", "/app"}, 0},
		{"check missing file", []string{"check", "/missing"}, 1},
		{"write to tmp", []string{"write", "/tmp/x"}, 0},
		{"write to missing dir", []string{"write", "/missing/x"}, 1},
		{"unknown mode", []string{"fly"}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := runToExit(t, cli, image, node, tc.cmd); got != tc.want {
				t.Errorf("app %v exited with %d, want %d", tc.cmd, got, tc.want)
			}
		})
	}
}

// TestSleepStopsOnTerm checks that the default command (sleep) ends with
// status 0 on SIGTERM well before the stop timeout: tests of graceful stop
// depend on it.
func TestSleepStopsOnTerm(t *testing.T) {
	cli := testimage.RequireDocker(t)
	image := testimage.Build(t)
	node := testimage.Node(t, cli)
	ctx := t.Context()

	id := create(t, cli, image, node, nil)
	if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	waitForOutput(t, cli, id, "app: sleeping")
	timeout := 20
	start := time.Now()
	if _, err := cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	inspect, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if code := inspect.Container.State.ExitCode; code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
	if elapsed := time.Since(start); elapsed >= time.Duration(timeout)*time.Second {
		t.Errorf("stop took %v: SIGTERM was not honoured", elapsed)
	}
}

// waitForOutput polls the container's logs until they contain want: a
// SIGTERM sent before the app has installed its handler is lost (PID 1).
func waitForOutput(t *testing.T, cli *client.Client, id, want string) {
	t.Helper()
	checkfor.Eventually(t, 20*time.Second, 20*time.Millisecond, func() error {
		rc, err := cli.ContainerLogs(t.Context(), id, client.ContainerLogsOptions{ShowStdout: true})
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		// The stream is multiplexed, but a short line is one frame: its
		// text appears verbatim.
		out, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Contains(out, []byte(want)) {
			return fmt.Errorf("logs of %s = %q, %v; want %q", id, out, err, want)
		}
		return nil
	})
}

// runToExit runs the image with cmd and returns its exit status.
func runToExit(t *testing.T, cli *client.Client, image, node string, cmd []string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	id := create(t, cli, image, node, cmd)
	wait := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start: %v", err)
	}
	select {
	case res := <-wait.Result:
		return int(res.StatusCode)
	case err := <-wait.Error:
		t.Fatalf("wait: %v", err)
	}
	return -1
}

// create creates an unmanaged container labelled for node's cleanup.
func create(t *testing.T, cli *client.Client, image, node string, cmd []string) string {
	t.Helper()
	res, err := cli.ContainerCreate(t.Context(), client.ContainerCreateOptions{
		Config: &container.Config{
			Image:  image,
			Cmd:    cmd,
			Labels: map[string]string{testimage.LabelTest: node},
		},
	})
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	return res.ID
}

// TestLoadFindsBuild checks that Load, on the engine Build imports into,
// returns Build's tag.
func TestLoadFindsBuild(t *testing.T) {
	cli := testimage.RequireDocker(t)
	want := testimage.Build(t)
	if got := testimage.Load(t, cli); got != want {
		t.Errorf("Load = %s, want Build's %s", got, want)
	}
}
