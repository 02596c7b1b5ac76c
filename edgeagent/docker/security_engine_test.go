package docker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/schema"
)

// logsOf returns everything the container has logged so far.
func (e env) logsOf(t testing.TB, id string, opts edgeagent.LogOptions) string {
	t.Helper()
	rc, err := e.rt.Logs(t.Context(), id, opts)
	if err != nil {
		t.Fatalf("Logs(%s): %v", id, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read logs of %s: %v", id, err)
	}
	return string(b)
}

// catFile runs spec as "app cat path" and returns what the process printed
// of the file.
func (e env) catFile(t testing.TB, spec edgeagent.ContainerSpec, path string) string {
	t.Helper()
	spec.Cmd = []string{"cat", path}
	id := e.run(t, spec)
	e.waitLog(t, id, "app: cat done")
	return strings.TrimSuffix(e.logsOf(t, id, edgeagent.LogOptions{}), "app: cat done\n")
}

// statusField returns the value of field in a /proc/<pid>/status text.
func statusField(t testing.TB, status, field string) string {
	t.Helper()
	for line := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in status %q", field, status)
	return ""
}

func TestSecurityContextReachesTheProcess(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spec := e.spec("secctx")
	spec.User = "1000:2000"
	spec.GroupAdd = []string{"3000", "4000"}
	spec.CapDrop = []string{"ALL"}
	spec.CapAdd = []string{"net_bind_service"}
	spec.NoNewPrivileges = true
	spec.ReadOnlyRootfs = true
	spec.Sysctls = map[string]string{"net.core.somaxconn": "1234"}
	status := e.catFile(t, spec, "/proc/self/status")

	c := e.inspect(t, spec.Name)
	hc := c.HostConfig
	asked := []struct {
		name      string
		got, want any
	}{
		{"User", c.Config.User, "1000:2000"},
		{"GroupAdd", strings.Join(hc.GroupAdd, ","), "3000,4000"},
		{"CapDrop", capNames(hc.CapDrop), "ALL"},
		{"CapAdd", capNames(hc.CapAdd), "NET_BIND_SERVICE"},
		{"ReadonlyRootfs", hc.ReadonlyRootfs, true},
		{"SecurityOpt has no-new-privileges", slices.Contains(hc.SecurityOpt, "no-new-privileges=true"), true},
		{"Sysctls", hc.Sysctls["net.core.somaxconn"], "1234"},
	}
	for _, a := range asked {
		if a.got != a.want {
			t.Errorf("engine asked %s = %v, want %v", a.name, a.got, a.want)
		}
	}
	seen := []struct{ field, want string }{
		{"Uid", "1000\t1000\t1000\t1000"},
		{"Gid", "2000\t2000\t2000\t2000"},
		// A non-root process holds no effective capabilities (no ambient
		// set, as under Kubernetes); the bounding set is what was asked.
		{"CapEff", "0000000000000000"},
		{"CapBnd", "0000000000000400"}, // CAP_NET_BIND_SERVICE only
		{"NoNewPrivs", "1"},
	}
	for _, s := range seen {
		if got := statusField(t, status, s.field); got != s.want {
			t.Errorf("process sees %s %q, want %q", s.field, got, s.want)
		}
	}
	// The engine adds the primary group to the supplementary ones.
	if groups := strings.Fields(statusField(t, status, "Groups")); !slices.Contains(groups, "3000") || !slices.Contains(groups, "4000") {
		t.Errorf("process sees Groups %q, want 3000 and 4000 among them", groups)
	}
	if got := e.catFile(t, e.spec("sysctl-default"), "/proc/sys/net/core/somaxconn"); got == "1234\n" {
		t.Fatal("the engine's default somaxconn is 1234 already; the sysctl check proves nothing")
	}
	spec = e.spec("sysctl-set")
	spec.Sysctls = map[string]string{"net.core.somaxconn": "1234"}
	if got := e.catFile(t, spec, "/proc/sys/net/core/somaxconn"); got != "1234\n" {
		t.Errorf("process sees somaxconn %q, want 1234", got)
	}
}

func TestCapabilitiesOfRoot(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name       string
		add, drop  []string
		wantCapEff string
	}{
		{"drop ALL", nil, []string{"ALL"}, "0000000000000000"},
		{"drop ALL add one", []string{"NET_BIND_SERVICE"}, []string{"ALL"}, "0000000000000400"},
		{"drop one", nil, []string{"CAP_CHOWN"}, ""}, // checked below: the default set minus CHOWN
	}
	defaults := statusField(t, e.catFile(t, e.spec("caps-default"), "/proc/self/status"), "CapEff")
	for i, tc := range cases {
		spec := e.spec("caps-" + string(rune('a'+i)))
		spec.CapAdd, spec.CapDrop = tc.add, tc.drop
		got := statusField(t, e.catFile(t, spec, "/proc/self/status"), "CapEff")
		want := tc.wantCapEff
		if want == "" {
			want = clearBit(t, defaults, 0) // CAP_CHOWN is bit 0
		}
		if got != want {
			t.Errorf("%s: CapEff %s, want %s", tc.name, got, want)
		}
	}
}

// clearBit clears bit n of a /proc status capability mask.
func clearBit(t testing.TB, mask string, n uint) string {
	t.Helper()
	v, err := strconv.ParseUint(mask, 16, 64)
	if err != nil {
		t.Fatalf("capability mask %q: %v", mask, err)
	}
	return fmt.Sprintf("%016x", v&^(1<<n))
}

// capNames joins capability names in edgeset's spelling (engines differ on
// the CAP_ prefix they report).
func capNames(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i], _ = schema.CapabilityName(n)
	}
	return strings.Join(out, ",")
}

func TestDefaultsKeepEngineSecurity(t *testing.T) {
	t.Parallel()
	e := setup(t)
	status := e.catFile(t, e.spec("defaults"), "/proc/self/status")
	if got := statusField(t, status, "Uid"); !strings.HasPrefix(got, "0\t") {
		t.Errorf("Uid %q, want the image's (root)", got)
	}
	if got := statusField(t, status, "CapEff"); got == "0000000000000000" || got == "000001ffffffffff" {
		t.Errorf("CapEff %q, want the engine's default set", got)
	}
	if got := statusField(t, status, "NoNewPrivs"); got != "0" {
		t.Errorf("NoNewPrivs %q, want 0", got)
	}
	if got := statusField(t, status, "Seccomp"); got != "2" {
		t.Errorf("Seccomp %q, want 2 (the engine's default filter)", got)
	}
}

func TestReadOnlyRootfs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, ro := range []bool{false, true} {
		spec := e.spec("rootfs-"+map[bool]string{false: "rw", true: "ro"}[ro], "write", "/tmp/file")
		spec.ReadOnlyRootfs = ro
		st := e.waitExit(t, e.run(t, spec))
		if want := map[bool]int{false: 0, true: 1}[ro]; st.ExitCode != want {
			t.Errorf("write to the root filesystem with ReadOnlyRootfs %v exited %d, want %d", ro, st.ExitCode, want)
		}
	}
}

func TestWorkingDir(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spec := e.spec("workdir", "pwd")
	spec.WorkingDir = "/srv/daemon"
	id := e.run(t, spec)
	e.waitExit(t, id)
	if got := e.inspect(t, id).Config.WorkingDir; got != "/srv/daemon" {
		t.Errorf("engine asked WorkingDir %q", got)
	}
	if got := e.logsOf(t, id, edgeagent.LogOptions{}); got != "app: pwd /srv/daemon\n" {
		t.Errorf("process printed %q, want its working directory /srv/daemon", got)
	}
}

func TestSeccomp(t *testing.T) {
	t.Parallel()
	e := setup(t)
	t.Run("unconfined", func(t *testing.T) {
		t.Parallel()
		spec := e.spec("seccomp-unconfined")
		spec.Seccomp = "unconfined"
		status := e.catFile(t, spec, "/proc/self/status")
		if got := statusField(t, status, "Seccomp"); got != "0" {
			t.Errorf("Seccomp %q, want 0 (no filter)", got)
		}
		if opts := e.inspect(t, spec.Name).HostConfig.SecurityOpt; !slices.Contains(opts, "seccomp=unconfined") {
			t.Errorf("SecurityOpt %q, want seccomp=unconfined", opts)
		}
	})
	t.Run("localhost profile", func(t *testing.T) {
		t.Parallel()
		// The profile refuses getcwd: the process proves it runs under
		// this very profile, not the engine's default.
		profile := filepath.Join(t.TempDir(), "no-getcwd.json")
		err := os.WriteFile(profile, []byte(`{
  "defaultAction": "SCMP_ACT_ALLOW",
  "syscalls": [{"names": ["getcwd"], "action": "SCMP_ACT_ERRNO"}]
}`), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		spec := e.spec("seccomp-profile", "pwd")
		spec.Seccomp = profile
		// With no-new-privileges the runtime loads the filter just before
		// exec, after its own getcwd.
		spec.NoNewPrivileges = true
		id := e.run(t, spec)
		if st := e.waitExit(t, id); st.ExitCode != 1 {
			t.Errorf("pwd under a profile refusing getcwd exited %d, want 1; logs %q", st.ExitCode, e.logsOf(t, id, edgeagent.LogOptions{}))
		}
		if got := e.logsOf(t, id, edgeagent.LogOptions{}); !strings.Contains(got, "operation not permitted") {
			t.Errorf("logs %q, want getcwd refused", got)
		}
		want := `seccomp={"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["getcwd"],"action":"SCMP_ACT_ERRNO"}]}`
		if opts := e.inspect(t, id).HostConfig.SecurityOpt; !slices.Contains(opts, want) {
			t.Errorf("SecurityOpt %q, want %s", opts, want)
		}
	})
	t.Run("missing profile", func(t *testing.T) {
		t.Parallel()
		spec := e.spec("seccomp-missing", "sleep")
		spec.Seccomp = filepath.Join(t.TempDir(), "absent.json")
		if _, err := e.rt.Create(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "absent.json") {
			t.Errorf("Create with a missing profile: %v, want an error naming the file", err)
		}
	})
}

func TestUnmaskedProc(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// The engine masks (or mounts read-only) these where they exist.
	systemPaths := []string{" /proc/keys ", " /proc/timer_list ", " /proc/kcore ", " /proc/sys ", " /proc/bus "}
	masked := e.catFile(t, e.spec("proc-default"), "/proc/self/mountinfo")
	if !slices.ContainsFunc(systemPaths, func(p string) bool { return strings.Contains(masked, p) }) {
		t.Fatalf("the engine masks none of %q by default; mountinfo %q", systemPaths, masked)
	}
	spec := e.spec("proc-unmasked")
	spec.UnmaskedProc = true
	got := e.catFile(t, spec, "/proc/self/mountinfo")
	for _, p := range systemPaths {
		if strings.Contains(got, p) {
			t.Errorf("with UnmaskedProc, %s is still mounted over: %q", p, got)
		}
	}
	hc := e.inspect(t, spec.Name).HostConfig
	if len(hc.MaskedPaths) != 0 || len(hc.ReadonlyPaths) != 0 {
		t.Errorf("MaskedPaths %q, ReadonlyPaths %q; want none", hc.MaskedPaths, hc.ReadonlyPaths)
	}
}

func TestMountPropagation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spec := e.spec("propagation", "sleep")
	dir := t.TempDir()
	spec.Mounts = []edgeagent.Mount{
		{Source: dir, Target: "/private"},
		{Source: dir, Target: "/slave", Propagation: "rslave"},
		{Source: dir, Target: "/shared", Propagation: "rshared"},
	}
	// Starting needs the host's mount to be shared, which a test cannot
	// assume; what the engine was asked is the adapter's part.
	id := e.create(t, spec)
	want := map[string]mount.Propagation{"/private": "", "/slave": mount.PropagationRSlave, "/shared": mount.PropagationRShared}
	for _, m := range e.inspect(t, id).HostConfig.Mounts {
		var got mount.Propagation
		if m.BindOptions != nil {
			got = m.BindOptions.Propagation
		}
		if got != want[m.Target] {
			t.Errorf("mount %s propagation %q, want %q", m.Target, got, want[m.Target])
		}
	}
}

// imageWithUser commits the test image with USER user as image name and
// returns its tag, removed at cleanup.
func (e env) imageWithUser(t testing.TB, name, user string) string {
	t.Helper()
	id := e.create(t, e.spec("base-"+name, "sleep"))
	tag := "edgeset-test-user:" + e.node + "-" + name
	if _, err := e.cli.ContainerCommit(t.Context(), id, client.ContainerCommitOptions{Reference: tag, Changes: []string{"USER " + user}}); err != nil {
		t.Fatalf("commit image with user %s: %v", user, err)
	}
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		_, _ = e.cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true})
	})
	return tag
}

func TestRunAsNonRoot(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cases := []struct {
		name, imageUser, specUser string
		want                      string // "" created, else the refusal
	}{
		{"root image", "", "", "container has runAsNonRoot and image will run as root"},
		{"uid 0 image", "0:0", "", "container has runAsNonRoot and image will run as root"},
		{"named image user", "nobody", "", "image has non-numeric user (nobody), cannot verify user is non-root"},
		{"numeric image user", "1000", "", ""},
		{"runAsUser over a root image", "", "1000", ""},
		{"runAsUser 0", "1000", "0", "container's runAsUser breaks non-root policy"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := e.spec("nonroot-"+string(rune('a'+i)), "sleep")
			if tc.imageUser != "" {
				spec.Image = e.imageWithUser(t, string(rune('a'+i)), tc.imageUser)
			}
			spec.User = tc.specUser
			spec.RunAsNonRoot = true
			id, err := e.rt.Create(t.Context(), spec)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				want := tc.specUser
				if want == "" {
					want = tc.imageUser
				}
				if u := e.inspect(t, id).Config.User; u != want {
					t.Errorf("container user %q, want %q", u, want)
				}
				return
			}
			if !errors.Is(err, edgeagent.ErrRunAsRoot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Create: %v, want ErrRunAsRoot saying %q", err, tc.want)
			}
			if _, err := e.cli.ContainerInspect(t.Context(), spec.Name, client.ContainerInspectOptions{}); err == nil {
				t.Error("a refused container was created")
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	running := e.run(t, e.spec("readfile-running", "sleep"))
	e.waitLog(t, running, "app: sleeping")
	exited := e.run(t, e.spec("readfile-exited", "write", "/tmp/message"))
	if st := e.waitExit(t, exited); st.ExitCode != 0 {
		t.Fatalf("write exited %d", st.ExitCode)
	}
	cases := []struct {
		name, id, path string
		limit          int64
		want           string
		wantErr        error
		wantErrText    string
	}{
		{"running container", running, "/app", 4, "\x7fELF", nil, ""},
		{"exited container", exited, "/tmp/message", 4096, "edgeset\n", nil, ""},
		{"limit cuts", exited, "/tmp/message", 3, "edg", nil, ""},
		{"missing file", exited, "/tmp/absent", 4096, "", edgeagent.ErrNotFound, ""},
		{"missing container", "edgeset-absent-container", "/tmp/message", 4096, "", edgeagent.ErrNotFound, ""},
		{"directory", exited, "/tmp", 4096, "", nil, "not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := e.rt.ReadFile(ctx, tc.id, tc.path, tc.limit)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Errorf("ReadFile: %q, %v; want %v", got, err, tc.wantErr)
				}
			case tc.wantErrText != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErrText) {
					t.Errorf("ReadFile: %q, %v; want an error saying %q", got, err, tc.wantErrText)
				}
			case err != nil || string(got) != tc.want:
				t.Errorf("ReadFile = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestLogsUntilEndsAtTheRestart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	// The delay puts each run's lines well after its StartedAt, which the
	// engine records only once the process runs (a process printing at
	// once may log before its StartedAt).
	id := e.run(t, e.spec("until", "exit", "3", "300ms"))
	first := e.waitExit(t, id)
	if err := e.rt.Start(ctx, id); err != nil {
		t.Fatalf("restart: %v", err)
	}
	var second edgeagent.ContainerState
	checkfor.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		var err error
		if second, err = e.rt.Inspect(ctx, id); err != nil {
			return err
		}
		if second.Running || !second.FinishedAt.After(first.FinishedAt) {
			return errors.New("second run not over")
		}
		return nil
	})
	const line = "app: exiting with 3\n"
	if got := strings.Count(e.logsOf(t, id, edgeagent.LogOptions{}), line); got != 2 {
		t.Fatalf("whole log has %d exit lines, want 2 (one per run)", got)
	}
	previous := e.logsOf(t, id, edgeagent.LogOptions{Until: second.StartedAt})
	if got := strings.Count(previous, line); got != 1 {
		t.Errorf("log until the second start = %q, want the first run's lines only", previous)
	}
	if got := e.logsOf(t, id, edgeagent.LogOptions{Until: first.StartedAt.Add(-time.Millisecond)}); got != "" {
		t.Errorf("log until before the first start = %q, want nothing", got)
	}
	// Since (a termination message's log tail) keeps the second run only.
	last := e.logsOf(t, id, edgeagent.LogOptions{Since: second.StartedAt, Tail: 80})
	if got := strings.Count(last, line); got != 1 {
		t.Errorf("log since the second start = %q, want the second run's lines only", last)
	}
}

func TestOOMKilled(t *testing.T) {
	t.Parallel()
	e := setup(t)
	spec := e.spec("oom", "oom")
	spec.Memory = 32 << 20
	id := e.run(t, spec)
	st := e.waitExit(t, id)
	// The engine learns of the OOM kill from containerd's OOM event, which
	// may arrive after the exit it caused: look again for a while.
	checkfor.Eventually(t, 5*time.Second, 50*time.Millisecond, func() error {
		var err error
		if st, err = e.rt.Inspect(t.Context(), id); err != nil {
			return err
		}
		if !st.OOMKilled {
			return fmt.Errorf("state after exceeding the memory limit = %+v, want OOMKilled", st)
		}
		return nil
	})
	if st.ExitCode != 137 {
		t.Errorf("state after exceeding the memory limit = %+v, want OOMKilled with exit code 137", st)
	}
	ok := e.waitExit(t, e.run(t, e.spec("no-oom", "exit", "0")))
	if ok.OOMKilled {
		t.Errorf("a clean exit reports OOMKilled: %+v", ok)
	}
}
