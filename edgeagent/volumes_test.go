package edgeagent

import (
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// listVolume returns every entry of dir (relative path -> what it is:
// "link:<target>", "dir", or "file:<mode>:<content>").
func listVolume(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := os.Lstat(p)
		require.NoError(t, err)
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			require.NoError(t, err)
			out[rel] = "link:" + target
		case info.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			out[rel] = "file:" + info.Mode().Perm().String() + ":" + string(b)
		}
		return nil
	}))
	return out
}

func tsDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) > 2 && e.Name()[:2] == ".." {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	written, err := writeAtomic(dir, map[string]fileProjection{
		"fluent.conf":   {Data: []byte("[INPUT]"), Mode: 0o644},
		"parsers/a.cfg": {Data: []byte("a"), Mode: 0o600},
	}, nil, t0)
	require.NoError(t, err)
	assert.True(t, written)
	ts := tsDirs(t, dir)
	require.Len(t, ts, 1)
	assert.Regexp(t, `^\.\.2026_01_02_03_04_05\.\d+$`, ts[0])
	assert.Equal(t, map[string]string{
		"..data":                 "link:" + ts[0],
		"fluent.conf":            "link:..data/fluent.conf",
		"parsers":                "link:..data/parsers",
		ts[0]:                    "dir",
		ts[0] + "/fluent.conf":   "file:-rw-r--r--:[INPUT]",
		ts[0] + "/parsers":       "dir",
		ts[0] + "/parsers/a.cfg": "file:-rw-------:a",
	}, listVolume(t, dir))
	b, err := os.ReadFile(filepath.Join(dir, "parsers", "a.cfg"))
	require.NoError(t, err)
	assert.Equal(t, "a", string(b), "readable through the visible links")

	t.Run("same payload writes nothing", func(t *testing.T) {
		written, err := writeAtomic(dir, map[string]fileProjection{
			"fluent.conf":   {Data: []byte("[INPUT]"), Mode: 0o644},
			"parsers/a.cfg": {Data: []byte("a"), Mode: 0o600},
		}, nil, t0.Add(time.Minute))
		require.NoError(t, err)
		assert.False(t, written)
		assert.Equal(t, ts, tsDirs(t, dir))
	})

	t.Run("update in place swaps ..data, drops old files and the old version", func(t *testing.T) {
		written, err := writeAtomic(dir, map[string]fileProjection{
			"fluent.conf": {Data: []byte("[OUTPUT]"), Mode: 0o644},
			"new.conf":    {Data: []byte("n"), Mode: 0o644},
		}, nil, t0.Add(time.Hour))
		require.NoError(t, err)
		assert.True(t, written)
		ts2 := tsDirs(t, dir)
		require.Len(t, ts2, 1, "the old version is removed")
		assert.NotEqual(t, ts, ts2)
		assert.Equal(t, map[string]string{
			"..data":                "link:" + ts2[0],
			"fluent.conf":           "link:..data/fluent.conf",
			"new.conf":              "link:..data/new.conf",
			ts2[0]:                  "dir",
			ts2[0] + "/fluent.conf": "file:-rw-r--r--:[OUTPUT]",
			ts2[0] + "/new.conf":    "file:-rw-r--r--:n",
		}, listVolume(t, dir))
	})

	t.Run("bad paths are refused", func(t *testing.T) {
		for _, p := range []string{"../x", "/abs", "..hidden", "a/../../b", ""} {
			_, err := writeAtomic(dir, map[string]fileProjection{p: {Data: []byte("x"), Mode: 0o644}}, nil, t0)
			assert.Error(t, err, p)
		}
	})
}

func TestPrepareHostPath(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	sock := filepath.Join(root, "s.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	tests := []struct {
		name, path, typ, wantErr string
	}{
		{"unset checks nothing", file, schema.HostPathUnset, ""},
		{"unset creates what is missing, as container runtimes do", filepath.Join(root, "runtime", "made"), schema.HostPathUnset, ""},
		{"DirectoryOrCreate creates", filepath.Join(root, "new", "deep"), schema.HostPathDirectoryOrCreate, ""},
		{"DirectoryOrCreate on a file", file, schema.HostPathDirectoryOrCreate, "hostPath type check failed: " + file + " is not a directory"},
		{"FileOrCreate creates", filepath.Join(root, "created"), schema.HostPathFileOrCreate, ""},
		{"FileOrCreate needs the parent", filepath.Join(root, "nodir", "f"), schema.HostPathFileOrCreate, "hostPath FileOrCreate"},
		{"FileOrCreate on a directory", root, schema.HostPathFileOrCreate, "hostPath type check failed: " + root + " is not a file"},
		{"Directory", root, schema.HostPathDirectory, ""},
		{"Directory missing", filepath.Join(root, "absent"), schema.HostPathDirectory, "is not a directory"},
		{"File", file, schema.HostPathFile, ""},
		{"Socket", sock, schema.HostPathSocket, ""},
		{"Socket on a file", file, schema.HostPathSocket, "hostPath type check failed: " + file + " is not a socket file"},
		{"CharDevice", "/dev/null", schema.HostPathCharDevice, ""},
		{"CharDevice on a file", file, schema.HostPathCharDevice, "is not a character device"},
		{"BlockDevice on a char device", "/dev/null", schema.HostPathBlockDevice, "hostPath type check failed: /dev/null is not a block device"},
		{"unknown type", root, "Fifo", "Fifo is an invalid volume type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := prepareHostPath(tc.path, tc.typ)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}
	info, err := os.Stat(filepath.Join(root, "new", "deep"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o755), info.Mode().Perm())
	info, err = os.Stat(filepath.Join(root, "runtime", "made"))
	require.NoError(t, err)
	assert.True(t, info.IsDir())
	assert.Equal(t, fs.FileMode(0o755), info.Mode().Perm())
	info, err = os.Stat(filepath.Join(root, "created"))
	require.NoError(t, err)
	assert.True(t, info.Mode().IsRegular())
	assert.Zero(t, info.Size())
}

func TestPrepareSubPath(t *testing.T) {
	root := t.TempDir()
	vol := filepath.Join(root, "vol")
	require.NoError(t, os.MkdirAll(vol, 0o750))
	require.NoError(t, os.Symlink("/etc", filepath.Join(vol, "escape")))
	require.NoError(t, os.Symlink(".", filepath.Join(vol, "self")))

	resolved, err := prepareSubPath(subPathSetup{volume: "v", root: vol, sub: "a/b"})
	require.NoError(t, err)
	wantVol, err := filepath.EvalSymlinks(vol)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(wantVol, "a", "b"), resolved, "the resolved path is returned, to bind")
	info, err := os.Stat(filepath.Join(vol, "a", "b"))
	require.NoError(t, err)
	assert.True(t, info.IsDir(), "a missing subPath is created as a directory")
	assert.Equal(t, fs.FileMode(0o750), info.Mode().Perm(), "with the volume's mode")

	resolved, err = prepareSubPath(subPathSetup{volume: "v", root: vol, sub: "self"})
	require.NoError(t, err)
	assert.Equal(t, wantVol, resolved)
	_, err = prepareSubPath(subPathSetup{volume: "v", root: vol, sub: "escape"})
	require.ErrorContains(t, err, `MountVolume.SetUp failed for volume "v": subPath escape resolves to /etc, outside the volume`)
}

func volumeTemplate() schema.PodTemplateSpec {
	items := []schema.KeyToPath{{Key: "fluent.conf", Path: "conf/fluent.conf", Mode: ptr(int32(0o600))}}
	return schema.PodTemplateSpec{
		Metadata: schema.ObjectMeta{Labels: map[string]string{"app": "logs"}},
		Spec: schema.PodSpec{
			Volumes: []schema.Volume{
				{Name: "config", ConfigMap: &schema.ConfigMapVolumeSource{Name: "cfg"}},
				{Name: "picked", ConfigMap: &schema.ConfigMapVolumeSource{Name: "cfg", Items: items}},
				{Name: "creds", Secret: &schema.SecretVolumeSource{SecretName: "api"}},
				{Name: "opt", Secret: &schema.SecretVolumeSource{SecretName: "absent", Optional: ptr(true)}},
				{Name: "info", DownwardAPI: &schema.DownwardAPIVolumeSource{Items: []schema.DownwardAPIVolumeFile{
					{Path: "labels", FieldRef: &schema.ObjectFieldSelector{FieldPath: "metadata.labels"}},
					{Path: "cpu", ResourceFieldRef: &schema.ResourceFieldSelector{ContainerName: "main", Resource: "limits.cpu", Divisor: ptr(schema.Quantity("1m"))}},
				}}},
				{Name: "all", Projected: &schema.ProjectedVolumeSource{DefaultMode: ptr(int32(0o640)), Sources: []schema.VolumeProjection{
					{ConfigMap: &schema.ConfigMapProjection{Name: "cfg", Items: []schema.KeyToPath{{Key: "LEVEL", Path: "level"}}}},
					{Secret: &schema.SecretProjection{Name: "api"}},
					{DownwardAPI: &schema.DownwardAPIProjection{Items: []schema.DownwardAPIVolumeFile{{Path: "name", FieldRef: &schema.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
				}}},
				{Name: "scratch", EmptyDir: &schema.EmptyDirVolumeSource{}},
				{Name: "logs", HostPath: &schema.HostPathVolumeSource{Path: "HOST/var/log/app", Type: schema.HostPathDirectoryOrCreate}},
			},
			InitContainers: []schema.Container{{Name: "init", Image: "busybox:1.36", VolumeMounts: []schema.VolumeMount{{Name: "scratch", MountPath: "/work"}}}},
			Containers: []schema.Container{{
				Name: "main", Image: "fluent/fluent-bit:3", TerminationMessagePath: "/tmp/term",
				Resources: schema.ResourceRequirements{Limits: schema.ResourceList{"cpu": "500m"}},
				Env:       []schema.EnvVar{{Name: "POD", ValueFrom: &schema.EnvVarSource{FieldRef: &schema.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				VolumeMounts: []schema.VolumeMount{
					{Name: "config", MountPath: "/fluent-bit/etc"},
					{Name: "config", MountPath: "/etc/fluent.conf", SubPath: "fluent.conf"},
					{Name: "picked", MountPath: "/picked"},
					{Name: "creds", MountPath: "/creds"},
					{Name: "info", MountPath: "/info"},
					{Name: "all", MountPath: "/all"},
					{Name: "scratch", MountPath: "/scratch/pod", SubPathExpr: "$(POD)"},
					{Name: "logs", MountPath: "/var/log/app", MountPropagation: ptr(schema.MountPropagationHostToContainer)},
				},
			}},
		},
	}
}

func hostTemplate(t *testing.T) (schema.PodTemplateSpec, string) {
	host := t.TempDir()
	tmpl := volumeTemplate()
	for i, v := range tmpl.Spec.Volumes {
		if v.HostPath != nil {
			tmpl.Spec.Volumes[i].HostPath = &schema.HostPathVolumeSource{Path: filepath.Join(host, "var/log/app"), Type: v.HostPath.Type}
		}
	}
	return tmpl, host
}

func TestBuildInstanceMaterialisesVolumes(t *testing.T) {
	ic := testContext()
	ic.DataDir = t.TempDir()
	tmpl, host := hostTemplate(t)
	spec, err := BuildInstance(ic, tmpl)
	require.NoError(t, err)
	uid := ic.PodUID()
	vol := func(kind, name string) string { return volumeDir(ic.DataDir, uid, kind, name) }

	require.Len(t, spec.Init, 1)
	assert.Equal(t, "0", spec.Init[0].Labels[LabelInitIndex])
	assert.NotContains(t, spec.Init[0].Labels, LabelIndex)
	assert.Equal(t, []Mount{
		{Source: vol(volumeKindEmptyDir, "scratch"), Target: "/work"},
		{Source: terminationLogPath(ic.DataDir, uid, "init"), Target: schema.DefaultTerminationMessagePath},
	}, spec.Init[0].Mounts, "init and main containers share the emptyDir")

	main := spec.Containers[0]
	assert.Equal(t, ic.PodName(), main.Labels[LabelPodName])
	assert.Equal(t, uid, main.Labels[LabelPodUID])
	assert.Equal(t, []Mount{
		{Source: vol(volumeKindConfigMap, "config"), Target: "/fluent-bit/etc", ReadOnly: true},
		{Source: filepath.Join(vol(volumeKindConfigMap, "config"), "fluent.conf"), Target: "/etc/fluent.conf", ReadOnly: true},
		{Source: vol(volumeKindConfigMap, "picked"), Target: "/picked", ReadOnly: true},
		{Source: vol(volumeKindSecret, "creds"), Target: "/creds", ReadOnly: true},
		{Source: vol(volumeKindDownwardAPI, "info"), Target: "/info", ReadOnly: true},
		{Source: vol(volumeKindProjected, "all"), Target: "/all", ReadOnly: true},
		{Source: filepath.Join(vol(volumeKindEmptyDir, "scratch"), ic.PodName()), Target: "/scratch/pod"},
		{Source: filepath.Join(host, "var/log/app"), Target: "/var/log/app", Propagation: "rslave"},
		{Source: terminationLogPath(ic.DataDir, uid, "main"), Target: "/tmp/term"},
	}, main.Mounts)

	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		return string(b)
	}
	mode := func(p string) fs.FileMode {
		t.Helper()
		info, err := os.Stat(p)
		require.NoError(t, err)
		return info.Mode().Perm()
	}
	assert.Equal(t, "[INPUT]", read(filepath.Join(vol(volumeKindConfigMap, "config"), "fluent.conf")))
	assert.Equal(t, "debug", read(filepath.Join(vol(volumeKindConfigMap, "config"), "LEVEL")))
	assert.Equal(t, "[INPUT]", read(filepath.Join(vol(volumeKindConfigMap, "picked"), "conf", "fluent.conf")))
	assert.Equal(t, fs.FileMode(0o600), mode(filepath.Join(vol(volumeKindConfigMap, "picked"), "conf", "fluent.conf")), "item mode")
	assert.NoFileExists(t, filepath.Join(vol(volumeKindConfigMap, "picked"), "LEVEL"), "only the items")
	assert.Equal(t, "s3cr3t", read(filepath.Join(vol(volumeKindSecret, "creds"), "key")))
	assert.Equal(t, fs.FileMode(0o644), mode(filepath.Join(vol(volumeKindSecret, "creds"), "key")), "Kubernetes' default mode")
	assert.DirExists(t, vol(volumeKindSecret, "opt"), "an absent optional secret is an empty volume")
	assert.Equal(t, `app="logs"`, read(filepath.Join(vol(volumeKindDownwardAPI, "info"), "labels")))
	assert.Equal(t, "500", read(filepath.Join(vol(volumeKindDownwardAPI, "info"), "cpu")))
	assert.Equal(t, "debug", read(filepath.Join(vol(volumeKindProjected, "all"), "level")))
	assert.Equal(t, "s3cr3t", read(filepath.Join(vol(volumeKindProjected, "all"), "key")))
	assert.Equal(t, ic.PodName(), read(filepath.Join(vol(volumeKindProjected, "all"), "name")))
	assert.Equal(t, fs.FileMode(0o640), mode(filepath.Join(vol(volumeKindProjected, "all"), "name")), "projected defaultMode")
	assert.Equal(t, fs.FileMode(0o777), mode(vol(volumeKindEmptyDir, "scratch")))
	assert.DirExists(t, filepath.Join(vol(volumeKindEmptyDir, "scratch"), ic.PodName()), "subPathExpr created")
	assert.DirExists(t, filepath.Join(host, "var/log/app"), "DirectoryOrCreate")
	assert.Equal(t, fs.FileMode(0o666), mode(terminationLogPath(ic.DataDir, uid, "main")))
	assert.Empty(t, read(terminationLogPath(ic.DataDir, uid, "main")))

	t.Run("a changed ConfigMap updates the files in place, the subPath source is the visible link", func(t *testing.T) {
		// A bind mount holds the inode it resolved at container start, as
		// this open file does: a subPath mount is not updated.
		bound, err := os.Open(spec.Containers[0].Mounts[1].Source)
		require.NoError(t, err)
		defer bound.Close()
		cm := ic.ConfigMaps["cfg"]
		cm.Data = map[string]string{"LEVEL": "info", "fluent.conf": "[OUTPUT]"}
		ic.ConfigMaps = map[string]schema.ConfigMap{"cfg": cm}
		again, err := BuildInstance(ic, tmpl)
		require.NoError(t, err)
		assert.Equal(t, spec.Containers[0].Mounts, again.Containers[0].Mounts, "what the container mounts does not change")
		assert.Equal(t, "[OUTPUT]", read(filepath.Join(vol(volumeKindConfigMap, "config"), "fluent.conf")))
		assert.Equal(t, "info", read(filepath.Join(vol(volumeKindProjected, "all"), "level")))
		assert.NoFileExists(t, filepath.Join(vol(volumeKindConfigMap, "config"), "url"), "keys gone from the object are gone from the volume")
		assert.Len(t, tsDirs(t, vol(volumeKindConfigMap, "config")), 1)
		assert.Equal(t, spec.Containers[0].Env, again.Containers[0].Env)
		old, err := io.ReadAll(bound)
		require.NoError(t, err)
		assert.Equal(t, "[INPUT]", string(old), "the subPath-bound file keeps its content")
	})

	t.Run("the instance's files go with it", func(t *testing.T) {
		require.NoError(t, removePodFiles(ic.DataDir, uid))
		assert.NoDirExists(t, podDir(ic.DataDir, uid))
		assert.DirExists(t, filepath.Join(host, "var/log/app"), "host paths are not the instance's")
	})
}

func TestBuildInstanceEphemeralWritesNothing(t *testing.T) {
	ic := testContext()
	tmpl, host := hostTemplate(t)
	spec, err := BuildInstance(ic, tmpl)
	require.NoError(t, err)
	assert.Equal(t, []Mount{{Source: filepath.Join(host, "var/log/app"), Target: "/var/log/app", Propagation: "rslave"}}, spec.Containers[0].Mounts)
	assert.Empty(t, spec.Init[0].Mounts)
	assert.NoDirExists(t, filepath.Join(host, "var/log/app"), "no host preparation either")
	assert.Equal(t, []string{"POD=" + ic.PodName()}, spec.Containers[0].Env)
}

func TestBuildInstanceRefusesBadSubPaths(t *testing.T) {
	for _, sub := range []string{"../etc", "/etc", "a/../../b"} {
		tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
			Volumes:    []schema.Volume{{Name: "v", EmptyDir: &schema.EmptyDirVolumeSource{}}},
			Containers: []schema.Container{{Name: "c", Image: "x:1", VolumeMounts: []schema.VolumeMount{{Name: "v", MountPath: "/v", SubPath: sub}}}},
		}}
		_, err := BuildInstance(testContext(), tmpl)
		require.ErrorContains(t, err, "spec.containers[0] (c): volumeMounts[0]: subPath", sub)
	}
}

// TestSubPathSwappedForASymlinkIsHeld: a container that can write its
// volume may replace a subPath with a symlink out of it; the check at the
// next pass holds the instance (no container is created or restarted).
func TestSubPathSwappedForASymlinkIsHeld(t *testing.T) {
	ic := testContext()
	ic.DataDir = t.TempDir()
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
		Volumes:    []schema.Volume{{Name: "v", EmptyDir: &schema.EmptyDirVolumeSource{}}},
		Containers: []schema.Container{{Name: "c", Image: "x:1", VolumeMounts: []schema.VolumeMount{{Name: "v", MountPath: "/v", SubPath: "data"}}}},
	}}
	_, err := BuildInstance(ic, tmpl)
	require.NoError(t, err)
	sub := filepath.Join(volumeDir(ic.DataDir, ic.PodUID(), volumeKindEmptyDir, "v"), "data")
	require.NoError(t, os.Remove(sub))
	require.NoError(t, os.Symlink("/", sub))
	_, err = BuildInstance(ic, tmpl)
	var me *mountError
	require.ErrorAs(t, err, &me)
	assert.ErrorContains(t, err, "outside the volume")
}

func TestSubPathExprNeedsItsVariables(t *testing.T) {
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
		Volumes: []schema.Volume{{Name: "v", EmptyDir: &schema.EmptyDirVolumeSource{}}},
		Containers: []schema.Container{{Name: "c", Image: "x:1", Env: []schema.EnvVar{{Name: "EMPTY"}},
			VolumeMounts: []schema.VolumeMount{{Name: "v", MountPath: "/v", SubPathExpr: "$(EMPTY)/$(UNSET)/$(UNSET)"}}}},
	}}
	_, err := BuildInstance(testContext(), tmpl)
	var cfgErr *ConfigError
	require.ErrorAs(t, err, &cfgErr)
	assert.EqualError(t, err, `volumeMount "v": subPathExpr "$(EMPTY)/$(UNSET)/$(UNSET)": missing value for EMPTY, UNSET`)
}

func TestBuildInstanceMountErrorWaits(t *testing.T) {
	ic := testContext()
	ic.DataDir = t.TempDir()
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
		Volumes:    []schema.Volume{{Name: "sock", HostPath: &schema.HostPathVolumeSource{Path: ic.DataDir, Type: schema.HostPathSocket}}},
		Containers: []schema.Container{{Name: "c", Image: "x:1", VolumeMounts: []schema.VolumeMount{{Name: "sock", MountPath: "/s"}}}},
	}}
	_, err := BuildInstance(ic, tmpl)
	var me *mountError
	require.ErrorAs(t, err, &me)
	assert.EqualError(t, err, `MountVolume.SetUp failed for volume "sock": hostPath type check failed: `+ic.DataDir+` is not a socket file`)
}

// TestPrepareSubPathCreatesNothingOutsideTheVolume: a container that can
// write its volume may plant a symlink to anywhere on the host; a subPath
// (or a subPathExpr) through it must not make the agent, running as root,
// create directories out there before it notices the escape.
func TestPrepareSubPathCreatesNothingOutsideTheVolume(t *testing.T) {
	root := t.TempDir()
	vol := filepath.Join(root, "vol")
	outside := filepath.Join(root, "host")
	require.NoError(t, os.MkdirAll(vol, 0o777))
	require.NoError(t, os.MkdirAll(outside, 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(vol, "planted")))
	require.NoError(t, os.Symlink("../host", filepath.Join(vol, "relative")))

	for _, sub := range []string{"planted/cron.d", "relative/x/y"} {
		_, err := prepareSubPath(subPathSetup{volume: "v", root: vol, sub: sub})
		require.Error(t, err, sub)
		assert.Contains(t, err.Error(), `MountVolume.SetUp failed for volume "v"`)
	}
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing created outside the volume")
}

// TestWriteAtomicRecoversFromACrash: the agent killed (-9, power loss) at
// any point of an update leaves the volume in a state the next
// writeAtomic repairs: a half-written version directory is removed, and a
// swap done without its visible links (or without removing the previous
// version) is completed, even though ..data already holds the payload.
func TestWriteAtomicRecoversFromACrash(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v1 := map[string]fileProjection{"a.conf": {Data: []byte("1"), Mode: 0o644}}
	v2 := map[string]fileProjection{"a.conf": {Data: []byte("2"), Mode: 0o644}, "b.conf": {Data: []byte("b"), Mode: 0o644}}
	want := func(ts string) map[string]string {
		return map[string]string{
			"..data":       "link:" + ts,
			"a.conf":       "link:..data/a.conf",
			"b.conf":       "link:..data/b.conf",
			ts:             "dir",
			ts + "/a.conf": "file:-rw-r--r--:2",
			ts + "/b.conf": "file:-rw-r--r--:b",
		}
	}

	t.Run("killed while writing the new version", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		_, err := writeAtomic(dir, v1, nil, t0)
		require.NoError(t, err)
		half := filepath.Join(dir, "..2026_01_02_03_05_05.123")
		require.NoError(t, os.Mkdir(half, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(half, "a.conf"), []byte("2"), 0o644))

		_, err = writeAtomic(dir, v2, nil, t0.Add(2*time.Minute))
		require.NoError(t, err)
		ts := tsDirs(t, dir)
		require.Len(t, ts, 1, "the half-written version is gone")
		assert.Equal(t, want(ts[0]), listVolume(t, dir))
	})

	t.Run("killed after the swap, before the links", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		_, err := writeAtomic(dir, v1, nil, t0)
		require.NoError(t, err)
		old := tsDirs(t, dir)[0]
		// The first steps of an update to v2, then the kill.
		next := filepath.Join(dir, "..2026_01_02_03_05_05.456")
		require.NoError(t, os.Mkdir(next, 0o755))
		require.NoError(t, writeVersion(next, v2, nil))
		require.NoError(t, swapDataDir(dir, filepath.Base(next)))

		_, err = writeAtomic(dir, v2, nil, t0.Add(2*time.Minute))
		require.NoError(t, err)
		assert.Equal(t, want(filepath.Base(next)), listVolume(t, dir), "b.conf visible, %s removed", old)
	})

	t.Run("a visible name that is not the writer's link", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "vol")
		_, err := writeAtomic(dir, v1, nil, t0)
		require.NoError(t, err)
		// A subPath mount of a key not there yet makes it a directory.
		require.NoError(t, os.Mkdir(filepath.Join(dir, "b.conf"), 0o755))

		_, err = writeAtomic(dir, v2, nil, t0.Add(2*time.Minute))
		require.NoError(t, err)
		ts := tsDirs(t, dir)
		require.Len(t, ts, 1)
		assert.Equal(t, want(ts[0]), listVolume(t, dir))
	})
}

// TestSubPathExprErrorsHideTheExpansion: a subPathExpr may expand a
// secretKeyRef; when the subPath cannot be prepared, the error (which
// becomes an event and the observed message) names the expression, never
// its value.
func TestSubPathExprErrorsHideTheExpansion(t *testing.T) {
	long := strings.Repeat("s3cr3t", 50) // longer than a file name may be
	for _, tc := range []struct {
		name, value string
		plant       bool
	}{
		{"cannot be created", long, false},
		{"resolves outside the volume", "out/s3cr3t-token", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ic := testContext()
			ic.DataDir = t.TempDir()
			ic.Secrets = map[string]schema.Secret{"api": {Metadata: schema.ObjectMeta{Name: "api"}, Data: map[string][]byte{"token": []byte(tc.value)}}}
			tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
				Volumes: []schema.Volume{{Name: "v", EmptyDir: &schema.EmptyDirVolumeSource{}}},
				Containers: []schema.Container{{Name: "c", Image: "x:1",
					Env:          []schema.EnvVar{{Name: "TOKEN", ValueFrom: &schema.EnvVarSource{SecretKeyRef: &schema.SecretKeySelector{Name: "api", Key: "token"}}}},
					VolumeMounts: []schema.VolumeMount{{Name: "v", MountPath: "/v", SubPathExpr: "$(TOKEN)"}}}},
			}}
			if tc.plant {
				vol := volumeDir(ic.DataDir, ic.PodUID(), volumeKindEmptyDir, "v")
				require.NoError(t, os.MkdirAll(vol, 0o777))
				require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(vol, "out")))
			}
			_, err := BuildInstance(ic, tmpl)
			var me *mountError
			require.ErrorAs(t, err, &me)
			assert.Contains(t, err.Error(), `subPathExpr "$(TOKEN)"`)
			assert.NotContains(t, err.Error(), "s3cr3t")
		})
	}
}

// TestInstanceFilesAreBounded: items may name one key many times, and
// volumes may project one object many times, so a small template could
// make the agent write gigabytes to the device's disk (and read them back
// on every pass). The instance waits with a reason instead, and nothing
// is written.
func TestInstanceFilesAreBounded(t *testing.T) {
	ic := testContext()
	ic.DataDir = t.TempDir()
	ic.ConfigMaps = map[string]schema.ConfigMap{"big": {Metadata: schema.ObjectMeta{Name: "big"}, Data: map[string]string{"v": strings.Repeat("x", 1<<20)}}}
	var items []schema.KeyToPath
	for i := range 100 {
		items = append(items, schema.KeyToPath{Key: "v", Path: fmt.Sprintf("f%d", i)})
	}
	tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
		Volumes:    []schema.Volume{{Name: "v", ConfigMap: &schema.ConfigMapVolumeSource{Name: "big", Items: items}}},
		Containers: []schema.Container{{Name: "c", Image: "x:1", VolumeMounts: []schema.VolumeMount{{Name: "v", MountPath: "/v"}}}},
	}}
	_, err := BuildInstance(ic, tmpl)
	var cfgErr *ConfigError
	require.ErrorAs(t, err, &cfgErr)
	assert.Contains(t, err.Error(), "more than the limit")
	_, statErr := os.Stat(podDir(ic.DataDir, ic.PodUID()))
	assert.ErrorIs(t, statErr, fs.ErrNotExist, "nothing written")
}
