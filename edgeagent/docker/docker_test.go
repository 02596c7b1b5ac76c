package docker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/test/testimage"
)

// env is what every engine test needs: the runtime under test, a raw client
// to check it against, the test image and a node of its own.
type env struct {
	rt    *docker.Runtime
	cli   *client.Client
	image string
	node  string
}

// setup connects to the engine (skipping without one), builds the test
// image and reserves a node whose containers are removed at cleanup.
func setup(t testing.TB) env {
	t.Helper()
	cli := testimage.RequireDocker(t)
	image := testimage.Build(t)
	rt, err := docker.New(context.Background(), docker.Options{})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return env{rt: rt, cli: cli, image: image, node: testimage.Node(t, cli)}
}

// spec returns a managed container spec of e's node running the test app
// with args.
func (e env) spec(name string, args ...string) edgeagent.ContainerSpec {
	return edgeagent.ContainerSpec{
		Name:   e.node + "-" + name,
		Image:  e.image,
		Labels: testimage.ManagedLabels(e.node),
		Cmd:    args,
	}
}

// create creates spec and fails the test on error.
func (e env) create(t testing.TB, spec edgeagent.ContainerSpec) string {
	t.Helper()
	id, err := e.rt.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create(%s): %v", spec.Name, err)
	}
	return id
}

// run creates and starts spec.
func (e env) run(t testing.TB, spec edgeagent.ContainerSpec) string {
	t.Helper()
	id := e.create(t, spec)
	if err := e.rt.Start(t.Context(), id); err != nil {
		t.Fatalf("Start(%s): %v", spec.Name, err)
	}
	return id
}

// waitLog polls the container's logs until they contain want. Tests that
// signal the app wait for its start line: a SIGTERM that reaches PID 1
// before the Go runtime has installed its handler is lost.
func (e env) waitLog(t testing.TB, id, want string) {
	t.Helper()
	checkfor.Eventually(t, 20*time.Second, 20*time.Millisecond, func() error {
		rc, err := e.rt.Logs(t.Context(), id, edgeagent.LogOptions{Tail: 0, Follow: false})
		if err != nil {
			return err
		}
		defer rc.Close()
		got, err := io.ReadAll(rc)
		if err != nil {
			return err
		}
		if !strings.Contains(string(got), want) {
			return fmt.Errorf("logs of %s = %q, want %q", id, got, want)
		}
		return nil
	})
}

// inspect returns the engine's own view of a container.
func (e env) inspect(t testing.TB, id string) container.InspectResponse {
	t.Helper()
	res, err := e.cli.ContainerInspect(t.Context(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return res.Container
}

// waitExit polls until the container has exited and returns its state.
func (e env) waitExit(t testing.TB, id string) edgeagent.ContainerState {
	t.Helper()
	var st edgeagent.ContainerState
	checkfor.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		var err error
		if st, err = e.rt.Inspect(t.Context(), id); err != nil {
			return err
		}
		if st.Running || st.FinishedAt.IsZero() {
			return errors.New("still running")
		}
		return nil
	})
	return st
}

func TestInfo(t *testing.T) {
	t.Parallel()
	e := setup(t)
	info, err := e.rt.Info(t.Context())
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.Name != "docker" || info.Version == "" {
		t.Errorf("Info = %+v, want name docker and a version", info)
	}
	t.Logf("engine %s, API %s", info.Version, e.rt.APIVersion())
}

func TestNewUnreachableEngine(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "absent.sock")
	_, err := docker.New(t.Context(), docker.Options{Host: "unix://" + sock})
	if err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("New on %s: error %v, want one naming the socket", sock, err)
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	spec := e.spec("life", "sleep")

	id := e.create(t, spec)
	st, err := e.rt.Inspect(ctx, id)
	if err != nil {
		t.Fatalf("Inspect created: %v", err)
	}
	if st.ID != id || st.Name != spec.Name || st.Image != e.image || st.Running || st.Created.IsZero() || !st.StartedAt.IsZero() {
		t.Errorf("created container state = %+v", st)
	}
	if st.Labels[edgeagent.LabelManaged] != "true" || st.Labels[edgeagent.LabelNode] != e.node {
		t.Errorf("labels = %v, want managed on node %s", st.Labels, e.node)
	}

	if err := e.rt.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	st, err = e.rt.Inspect(ctx, id)
	if err != nil {
		t.Fatalf("Inspect started: %v", err)
	}
	if !st.Running || st.StartedAt.IsZero() || st.IPAddress == "" {
		t.Errorf("started container state = %+v, want running with start time and IP", st)
	}
	e.waitLog(t, id, "app: sleeping")

	if err := e.rt.Stop(ctx, id, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	st, err = e.rt.Inspect(ctx, id)
	if err != nil {
		t.Fatalf("Inspect stopped: %v", err)
	}
	if st.Running || st.ExitCode != 0 || st.FinishedAt.Before(st.StartedAt) {
		t.Errorf("stopped container state = %+v, want exit 0 after start", st)
	}
	if err := e.rt.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("Stop of a stopped container: %v", err)
	}

	if err := e.rt.Remove(ctx, id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := e.rt.Inspect(ctx, id); !errors.Is(err, edgeagent.ErrNotFound) {
		t.Errorf("Inspect removed: %v, want ErrNotFound", err)
	}
	if err := e.rt.Remove(ctx, id); err != nil {
		t.Errorf("Remove of a removed container: %v, want nil", err)
	}
	if err := e.rt.Start(ctx, id); !errors.Is(err, edgeagent.ErrNotFound) {
		t.Errorf("Start removed: %v, want ErrNotFound", err)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.run(t, e.spec("stubborn", "ignore-term"))
	e.waitLog(t, id, "app: ignoring SIGTERM")
	if err := e.rt.Stop(t.Context(), id, time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st := e.waitExit(t, id); st.ExitCode != 137 {
		t.Errorf("exit code = %d, want 137 (SIGKILL after grace)", st.ExitCode)
	}
}

func TestListFiltersByNodeAndManagedLabel(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	other := testimage.Node(t, e.cli)

	mine := map[string]bool{
		e.create(t, e.spec("a", "sleep")):  true,
		e.run(t, e.spec("b", "exit", "0")): true,
	}
	otherSpec := e.spec("other", "sleep")
	otherSpec.Labels = testimage.ManagedLabels(other)
	otherID := e.create(t, otherSpec)
	// A container of someone else on the same engine, even one that carries
	// the node label, is never listed nor removed.
	foreign, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: e.node + "-foreign",
		Config: &container.Config{Image: e.image, Labels: map[string]string{
			testimage.LabelTest: e.node,
			edgeagent.LabelNode: e.node,
		}},
	})
	if err != nil {
		t.Fatalf("create foreign container: %v", err)
	}

	got, err := e.rt.List(ctx, e.node)
	if err != nil {
		t.Fatalf("List(%s): %v", e.node, err)
	}
	if len(got) != len(mine) {
		t.Errorf("List(%s) returned %d containers, want %d", e.node, len(got), len(mine))
	}
	for _, st := range got {
		if !mine[st.ID] {
			t.Errorf("List(%s) returned %s (%s), not one of the node's", e.node, st.ID, st.Name)
		}
		if err := e.rt.Remove(ctx, st.ID); err != nil {
			t.Errorf("Remove(%s): %v", st.ID, err)
		}
	}

	if got, err := e.rt.List(ctx, other); err != nil || len(got) != 1 || got[0].ID != otherID {
		t.Errorf("List(%s) = %v, %v; want only %s", other, got, err, otherID)
	}
	if got, err := e.rt.List(ctx, e.node); err != nil || len(got) != 0 {
		t.Errorf("List(%s) after removal = %v, %v; want none", e.node, got, err)
	}
	if _, err := e.cli.ContainerInspect(ctx, foreign.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("foreign container after removing the node's: %v", err)
	}
}

func TestCreateNameConflict(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spec := e.spec("twice", "sleep")
	e.create(t, spec)
	_, err := e.rt.Create(t.Context(), spec)
	if !errors.Is(err, edgeagent.ErrNameConflict) {
		t.Fatalf("second Create(%s): %v, want ErrNameConflict", spec.Name, err)
	}
}

func TestCreateRejectsBadSpec(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name   string
		modify func(*edgeagent.ContainerSpec)
		want   string
	}{
		{"missing image", func(s *edgeagent.ContainerSpec) { s.Image = "edgeset-test:absent" }, "edgeset-test:absent"},
		{"missing mount source", func(s *edgeagent.ContainerSpec) {
			s.Mounts = []edgeagent.Mount{{Source: "/nonexistent/edgeset", Target: "/data"}}
		}, "/nonexistent/edgeset"},
		{"ports with NetworkOf", func(s *edgeagent.ContainerSpec) {
			s.NetworkOf = "owner"
			s.Ports = []edgeagent.PortBinding{{ContainerPort: 80}}
		}, "publish them on owner"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := e.spec(strings.ReplaceAll(tc.name, " ", "-"))
			tc.modify(&spec)
			_, err := e.rt.Create(t.Context(), spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), spec.Name) {
				t.Errorf("Create: %v, want an error naming %s and %q", err, spec.Name, tc.want)
			}
		})
	}
}

func TestPullImage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// No registry listens on 127.0.0.1:1: the engine fails fast and says so.
	const unreachable = "127.0.0.1:1/edgeset/absent:1"
	auth := &edgeagent.RegistryAuth{Username: "u", Password: "p", Server: "127.0.0.1:1"}
	broken := brokenRegistry(t) + "/edgeset/broken:1"
	cases := []struct {
		name     string
		image    string
		policy   string
		auth     *edgeagent.RegistryAuth
		wantIs   error  // errors.Is target, if any
		wantText string // substring of the error, if any
	}{
		{"never, absent", "edgeset-test:absent", schema.PullNever, nil, edgeagent.ErrImageNotPresent, "edgeset-test:absent"},
		{"never, present", e.image, schema.PullNever, nil, nil, ""},
		{"if not present, present", e.image, schema.PullIfNotPresent, nil, nil, ""},
		{"default policy, present", e.image, "", nil, nil, ""},
		{"always, unreachable registry", unreachable, schema.PullAlways, nil, nil, "127.0.0.1:1"},
		{"always with auth, unreachable registry", unreachable, schema.PullAlways, auth, nil, "127.0.0.1:1"},
		{"if not present, unreachable registry", unreachable, schema.PullIfNotPresent, nil, nil, "127.0.0.1:1"},
		// The engine reports this failure inside the progress stream.
		{"always, stream error", broken, schema.PullAlways, nil, nil, "unknown blob"},
		{"unknown policy", e.image, "Sometimes", nil, nil, `"Sometimes"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := e.rt.PullImage(t.Context(), tc.image, tc.policy, tc.auth)
			wantErr := tc.wantIs != nil || tc.wantText != ""
			switch {
			case !wantErr && err != nil:
				t.Fatalf("PullImage(%s, %q): %v", tc.image, tc.policy, err)
			case wantErr && err == nil:
				t.Fatalf("PullImage(%s, %q) succeeded, want an error", tc.image, tc.policy)
			case tc.wantIs != nil && !errors.Is(err, tc.wantIs):
				t.Errorf("PullImage error %v, want %v", err, tc.wantIs)
			case tc.wantIs == nil && errors.Is(err, edgeagent.ErrImageNotPresent):
				t.Errorf("PullImage error %v must not be ErrImageNotPresent", err)
			case !strings.Contains(errString(err), tc.wantText):
				t.Errorf("PullImage error %q, want it to contain %q", err, tc.wantText)
			}
			if err != nil {
				t.Logf("error: %v", err)
			}
		})
	}
}

// brokenRegistry serves a registry on 127.0.0.1 (an insecure registry to
// the engine by default, reachable when the engine runs on this host) whose
// manifests name blobs it does not have. The engine starts a pull, then
// reports the failure in the progress stream rather than as an HTTP error.
func brokenRegistry(t *testing.T) string {
	t.Helper()
	manifest := `{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",` +
		`"config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":2,"digest":"sha256:` + strings.Repeat("a", 64) + `"},` +
		`"layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","size":2,"digest":"sha256:` + strings.Repeat("b", 64) + `"}]}`
	sum := sha256.Sum256([]byte(manifest))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v2/":
			w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
			fmt.Fprint(w, "{}")
		case strings.Contains(r.URL.Path, "/manifests/"):
			w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
			w.Header().Set("Docker-Content-Digest", "sha256:"+hex.EncodeToString(sum[:]))
			fmt.Fprint(w, manifest)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown to registry"}]}`)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestBindMountReadOnly(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name     string
		readOnly bool
		wantExit int
	}{
		{"read-write", false, 0},
		{"read-only", true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			spec := e.spec(tc.name, "write", "/data/file")
			spec.Mounts = []edgeagent.Mount{{Source: dir, Target: "/data", ReadOnly: tc.readOnly}}
			id := e.run(t, spec)
			if st := e.waitExit(t, id); st.ExitCode != tc.wantExit {
				t.Errorf("write to /data exited %d, want %d", st.ExitCode, tc.wantExit)
			}
			_, err := os.Stat(filepath.Join(dir, "file"))
			if written := err == nil; written == tc.readOnly {
				t.Errorf("file on host written = %v with ReadOnly = %v", written, tc.readOnly)
			}
		})
	}
}

func TestHostConfigMapping(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spec := e.spec("limits", "serve", "8080")
	spec.NanoCPUs = 500_000_000
	spec.Memory = 64 << 20
	spec.StopTimeout = 7 * time.Second
	spec.HostPID = true
	spec.Env = []string{"READY=1"}
	spec.Entrypoint = []string{"/app"}
	spec.Ports = []edgeagent.PortBinding{{ContainerPort: 8080, HostIP: "127.0.0.1"}, {ContainerPort: 9090, Protocol: "UDP"}}
	id := e.run(t, spec)
	c := e.inspect(t, id)

	hc, cfg := c.HostConfig, c.Config
	checks := []struct {
		name      string
		got, want any
	}{
		{"NanoCPUs", hc.NanoCPUs, spec.NanoCPUs},
		{"Memory", hc.Memory, spec.Memory},
		{"RestartPolicy", hc.RestartPolicy.Name, container.RestartPolicyDisabled},
		{"PidMode", hc.PidMode, container.PidMode("host")},
		{"Privileged", hc.Privileged, false},
		{"StopTimeout", *cfg.StopTimeout, 7},
		{"Entrypoint", strings.Join(cfg.Entrypoint, " "), "/app"},
		{"Cmd", strings.Join(cfg.Cmd, " "), "serve 8080"},
		{"Env has READY", strings.Contains(strings.Join(cfg.Env, " "), "READY=1"), true},
		{"bindings", len(hc.PortBindings), 2},
		{"exposed", len(cfg.ExposedPorts), 2},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	for port, b := range hc.PortBindings {
		switch port.String() {
		case "8080/tcp":
			if len(b) != 1 || b[0].HostIP.String() != "127.0.0.1" {
				t.Errorf("8080/tcp bound to %v, want 127.0.0.1", b)
			}
		case "9090/udp":
		default:
			t.Errorf("unexpected port binding %s", port)
		}
	}
}

func TestNetworkModes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	owner := e.run(t, e.spec("owner", "sleep"))
	cases := []struct {
		name     string
		modify   func(*edgeagent.ContainerSpec)
		wantMode string
	}{
		{"joins owner", func(s *edgeagent.ContainerSpec) { s.NetworkOf = owner }, "container:" + owner},
		{"host network", func(s *edgeagent.ContainerSpec) {
			s.HostNetwork = true
			s.Ports = []edgeagent.PortBinding{{ContainerPort: 8080, HostPort: 8080}} // the host's already
		}, "host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := e.spec(strings.ReplaceAll(tc.name, " ", "-"), "sleep")
			tc.modify(&spec)
			id := e.run(t, spec)
			if mode := string(e.inspect(t, id).HostConfig.NetworkMode); mode != tc.wantMode {
				t.Errorf("NetworkMode = %q, want %q", mode, tc.wantMode)
			}
			st, err := e.rt.Inspect(t.Context(), id)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if !st.Running || st.IPAddress != "" {
				t.Errorf("state = %+v, want running without an IP of its own", st)
			}
		})
	}
}

func TestExec(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.run(t, e.spec("exec", "sleep"))
	cases := []struct {
		name     string
		cmd      []string
		wantCode int
		wantOut  string
	}{
		{"succeeds", []string{"/app", "check", "/app"}, 0, "/app: ok"},
		{"fails", []string{"/app", "check", "/absent"}, 1, "no such file"},
		{"stdout", []string{"/app", "exit", "5"}, 5, "app: exiting with 5\n"},
		{"stderr", []string{"/app", "exit", "5"}, 5, "app: stderr exiting with 5\n"},
		{"touch then check", []string{"/app", "touch", "/tmp/ready"}, 0, "/tmp/ready: ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, err := e.rt.Exec(t.Context(), id, tc.cmd)
			if err != nil {
				t.Fatalf("Exec(%v): %v", tc.cmd, err)
			}
			if code != tc.wantCode || !strings.Contains(string(out), tc.wantOut) {
				t.Errorf("Exec(%v) = %d, %q; want %d, output containing %q", tc.cmd, code, out, tc.wantCode, tc.wantOut)
			}
		})
	}

	t.Run("streams stdout and stderr apart, with stdin", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		code, err := e.rt.ExecStream(t.Context(), id, []string{"/app", "stdin"}, strings.NewReader("line one\nline two\n"), &stdout, &stderr)
		if err != nil {
			t.Fatalf("ExecStream: %v", err)
		}
		if code != 0 || stdout.String() != "line one\nline two\n" || stderr.String() != "app: stdin done\n" {
			t.Errorf("ExecStream = %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
		}
	})
	t.Run("honours ctx", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, _, err := e.rt.Exec(ctx, id, []string{"/app", "sleep"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Exec past deadline: %v, want DeadlineExceeded", err)
		}
	})
	t.Run("missing container", func(t *testing.T) {
		_, _, err := e.rt.Exec(t.Context(), "edgeset-absent-container", []string{"/app"})
		if !errors.Is(err, edgeagent.ErrNotFound) {
			t.Errorf("Exec in missing container: %v, want ErrNotFound", err)
		}
	})
}

func TestEventsReportsDieWithExitCode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	events, errs := e.rt.Events(ctx)

	id := e.run(t, e.spec("dies", "exit", "3"))
	var sawStart bool
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event stream closed: %v", <-errs)
			}
			if ev.ContainerID != id {
				continue
			}
			if ev.Labels[edgeagent.LabelNode] != e.node || ev.Time.IsZero() {
				t.Errorf("event %+v lacks the node label or a time", ev)
			}
			switch ev.Action {
			case "start":
				sawStart = true
			case "die":
				if ev.ExitCode != 3 {
					t.Errorf("die event exit code = %d, want 3", ev.ExitCode)
				}
				if !sawStart {
					t.Error("die event without a start event before it")
				}
				cancel()
				if _, ok := <-events; ok {
					// Drain: the stream may still hold events; it must close.
					for range events {
					}
				}
				if err, ok := <-errs; ok {
					t.Errorf("error after cancel: %v, want none", err)
				}
				return
			}
		case <-ctx.Done():
			t.Fatal("no die event within 30s")
		}
	}
}

func TestLogs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	exited := e.run(t, e.spec("logs", "exit", "4"))
	e.waitExit(t, exited)
	// The engine orders lines across stdout and stderr only by their
	// arrival, so the cases compare sets of lines.
	stdout, stderr := "app: exiting with 4", "app: stderr exiting with 4"
	cases := []struct {
		name      string
		tail      int
		wantLines int
	}{
		{"all", 0, 2},
		{"tail 1", 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := e.rt.Logs(ctx, exited, edgeagent.LogOptions{Tail: tc.tail, Follow: false})
			if err != nil {
				t.Fatalf("Logs: %v", err)
			}
			defer rc.Close()
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatalf("read logs: %v", err)
			}
			lines := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
			if len(lines) != tc.wantLines {
				t.Errorf("logs = %q, want %d lines", got, tc.wantLines)
			}
			for _, l := range lines {
				if l != stdout && l != stderr {
					t.Errorf("log line %q, want %q or %q", l, stdout, stderr)
				}
			}
			if tc.tail == 0 && lines[0] == lines[len(lines)-1] {
				t.Errorf("logs = %q, want both stdout and stderr", got)
			}
		})
	}

	t.Run("follow", func(t *testing.T) {
		running := e.run(t, e.spec("follow", "sleep"))
		rc, err := e.rt.Logs(ctx, running, edgeagent.LogOptions{Tail: 0, Follow: true})
		if err != nil {
			t.Fatalf("Logs: %v", err)
		}
		buf := make([]byte, 64)
		n, err := io.ReadAtLeast(rc, buf, len("app: sleeping\n"))
		if err != nil || string(buf[:n]) != "app: sleeping\n" {
			t.Errorf("followed logs = %q, %v; want the start line", buf[:n], err)
		}
		if err := rc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := rc.Read(buf); err == nil {
			t.Error("Read after Close succeeded")
		}
	})

	t.Run("missing container", func(t *testing.T) {
		if _, err := e.rt.Logs(ctx, "edgeset-absent-container", edgeagent.LogOptions{Tail: 0, Follow: false}); !errors.Is(err, edgeagent.ErrNotFound) {
			t.Errorf("Logs of missing container: %v, want ErrNotFound", err)
		}
	})
}
