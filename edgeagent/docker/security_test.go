package docker

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/edgeset/edgeset/edgeagent"
)

func TestCreateOptionsSecurity(t *testing.T) {
	spec := edgeagent.ContainerSpec{
		Name:            "c",
		Image:           "img",
		WorkingDir:      "/work",
		User:            "1000:2000",
		GroupAdd:        []string{"3000", "4000"},
		CapAdd:          []string{"net_bind_service", "CAP_NET_RAW"},
		CapDrop:         []string{"ALL"},
		ReadOnlyRootfs:  true,
		NoNewPrivileges: true,
		Seccomp:         "unconfined",
		UnmaskedProc:    true,
		Sysctls:         map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"},
		Mounts: []edgeagent.Mount{
			{Source: "/a", Target: "/a"},
			{Source: "/b", Target: "/b", Propagation: "rslave"},
			{Source: "/c", Target: "/c", Propagation: "rshared"},
		},
	}
	opts, err := createOptions(spec)
	if err != nil {
		t.Fatalf("createOptions: %v", err)
	}
	cfg, host := opts.Config, opts.HostConfig
	if cfg.WorkingDir != "/work" || cfg.User != "1000:2000" {
		t.Errorf("WorkingDir %q, User %q; want /work, 1000:2000", cfg.WorkingDir, cfg.User)
	}
	checkStrings(t, "GroupAdd", host.GroupAdd, "3000", "4000")
	checkStrings(t, "CapAdd", host.CapAdd, "NET_BIND_SERVICE", "NET_RAW")
	checkStrings(t, "CapDrop", host.CapDrop, "ALL")
	checkStrings(t, "SecurityOpt", host.SecurityOpt, "no-new-privileges=true", "seccomp=unconfined")
	if !host.ReadonlyRootfs {
		t.Error("ReadonlyRootfs not set")
	}
	if host.MaskedPaths == nil || len(host.MaskedPaths) != 0 || host.ReadonlyPaths == nil || len(host.ReadonlyPaths) != 0 {
		t.Errorf("MaskedPaths %#v, ReadonlyPaths %#v; want both empty and non-nil (systempaths=unconfined)", host.MaskedPaths, host.ReadonlyPaths)
	}
	if host.Sysctls["net.ipv4.ip_unprivileged_port_start"] != "0" || len(host.Sysctls) != 1 {
		t.Errorf("Sysctls = %v", host.Sysctls)
	}
	spec.Sysctls["x"] = "y"
	if _, ok := host.Sysctls["x"]; ok {
		t.Error("Sysctls share the spec's map")
	}
	wantProp := []mount.Propagation{"", mount.PropagationRSlave, mount.PropagationRShared}
	for i, m := range host.Mounts {
		var got mount.Propagation
		if m.BindOptions != nil {
			got = m.BindOptions.Propagation
		}
		if got != wantProp[i] {
			t.Errorf("mounts[%d] propagation %q, want %q", i, got, wantProp[i])
		}
	}
}

func TestCreateOptionsSecurityDefaults(t *testing.T) {
	opts, err := createOptions(edgeagent.ContainerSpec{Name: "c", Image: "img"})
	if err != nil {
		t.Fatalf("createOptions: %v", err)
	}
	cfg, host := opts.Config, opts.HostConfig
	if cfg.User != "" || cfg.WorkingDir != "" || host.ReadonlyRootfs || host.CapAdd != nil || host.CapDrop != nil ||
		host.GroupAdd != nil || host.SecurityOpt != nil || host.Sysctls != nil || host.MaskedPaths != nil || host.ReadonlyPaths != nil {
		t.Errorf("a spec without security settings changed the engine's defaults: config %+v, host %+v", cfg, host)
	}
}

func TestSecurityOptsSeccompProfile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "audit.json")
	if err := os.WriteFile(good, []byte("{\n  \"defaultAction\": \"SCMP_ACT_LOG\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("defaultAction: SCMP_ACT_LOG\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		seccomp string
		want    []string
		wantErr string
	}{
		{"runtime default", "", nil, ""},
		{"unconfined", "unconfined", []string{"seccomp=unconfined"}, ""},
		{"profile content, compacted", good, []string{`seccomp={"defaultAction":"SCMP_ACT_LOG"}`}, ""},
		{"missing profile", filepath.Join(dir, "absent.json"), nil, "absent.json: no such file"},
		{"profile not JSON", bad, nil, "seccomp profile " + bad + ": not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := securityOpts(edgeagent.ContainerSpec{Seccomp: tc.seccomp})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("securityOpts: %v, want error containing %q", err, tc.wantErr)
				}
				if _, err := createOptions(edgeagent.ContainerSpec{Seccomp: tc.seccomp}); err == nil {
					t.Error("createOptions accepted the spec")
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("securityOpts = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestBindMountsBadPropagation(t *testing.T) {
	_, err := bindMounts([]edgeagent.Mount{{Source: "/a", Target: "/a"}, {Source: "/b", Target: "/b", Propagation: "HostToContainer"}})
	if err == nil || !strings.Contains(err.Error(), `mounts[1] (/b): propagation "HostToContainer"`) {
		t.Errorf("bindMounts: %v, want an error naming mounts[1]", err)
	}
}

func TestCheckNonRoot(t *testing.T) {
	cases := []struct {
		name, specUser, imageUser string
		want                      string // "" allowed, else the error
	}{
		{"runAsUser decides over a root image", "1000", "", ""},
		{"runAsUser with group", "1000:0", "root", ""},
		{"runAsUser 0", "0", "1000", "container's runAsUser breaks non-root policy"},
		{"runAsUser 0 with group", "0:1000", "", "container's runAsUser breaks non-root policy"},
		{"image without user", "", "", "container has runAsNonRoot and image will run as root"},
		{"image uid 0", "", "0", "container has runAsNonRoot and image will run as root"},
		{"image uid 0 with group", "", "0:0", "container has runAsNonRoot and image will run as root"},
		{"image named root", "", "root", "container has runAsNonRoot and image has non-numeric user (root), cannot verify user is non-root"},
		{"image named user", "", "nobody:nogroup", "container has runAsNonRoot and image has non-numeric user (nobody), cannot verify user is non-root"},
		{"image numeric user", "", "65534", ""},
		{"image numeric user and group", "", "65534:65534", ""},
		{"group only keeps the image user", ":1000", "1000", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkNonRoot(tc.specUser, tc.imageUser)
			if tc.want == "" {
				if err != nil {
					t.Errorf("checkNonRoot(%q, %q) = %v, want nil", tc.specUser, tc.imageUser, err)
				}
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("checkNonRoot(%q, %q) = %v, want %q", tc.specUser, tc.imageUser, err, tc.want)
			}
			if !errors.Is(err, edgeagent.ErrRunAsRoot) {
				t.Errorf("error %v is not ErrRunAsRoot", err)
			}
		})
	}
}

func TestContainerStateOOMAndLogPath(t *testing.T) {
	st, err := containerState(container.InspectResponse{
		ID:      "c1",
		LogPath: "/var/lib/docker/containers/c1/c1-json.log",
		State:   &container.State{OOMKilled: true, ExitCode: 137},
	})
	if err != nil {
		t.Fatalf("containerState: %v", err)
	}
	if !st.OOMKilled || st.LogPath != "/var/lib/docker/containers/c1/c1-json.log" || st.ExitCode != 137 {
		t.Errorf("state = %+v, want OOMKilled, exit 137 and the log path", st)
	}
}

func checkStrings(t *testing.T, field string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", field, got, want)
	}
}
