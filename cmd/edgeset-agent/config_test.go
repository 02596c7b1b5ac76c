package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// parseCmd loads the config as the command would, from args and the
// environment, without running anything.
func parseCmd(t *testing.T, args ...string) (fileConfig, error) {
	t.Helper()
	var got fileConfig
	cmd := newCommand(func(_ context.Context, fc fileConfig, _ string) error { got = fc; return nil })
	cmd.SetArgs(args)
	err := cmd.Execute()
	return got, err
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestConfigPrecedence(t *testing.T) {
	file := writeFile(t, "agent.yaml", "node-name: from-file\nbroker-url: tcp://file:1883\nkeepalive: 30s\nruntime: fake\nlabels: [site=file, role=gw]\n")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want func(t *testing.T, fc fileConfig)
	}{
		{name: "defaults", args: nil, want: func(t *testing.T, fc fileConfig) {
			require.Equal(t, []string{defaultBrokerURL}, fc.BrokerURLs)
			require.Equal(t, defaultDataDir, fc.DataDir)
			require.Equal(t, "docker", fc.Runtime)
			require.Equal(t, 60*time.Second, fc.KeepAlive)
			require.Equal(t, "1Gi", fc.DiskMinFree)
			require.Empty(t, fc.NodeName)
		}},
		{name: "file over default", args: []string{"--config", file}, want: func(t *testing.T, fc fileConfig) {
			require.Equal(t, "from-file", fc.NodeName)
			require.Equal(t, []string{"tcp://file:1883"}, fc.BrokerURLs)
			require.Equal(t, 30*time.Second, fc.KeepAlive)
			require.Equal(t, []string{"site=file", "role=gw"}, fc.Labels)
			require.Equal(t, defaultDataDir, fc.DataDir)
		}},
		{name: "env over file", env: map[string]string{"EDGESET_NODE_NAME": "from-env", "EDGESET_LABELS": "site=env,x=y", "EDGESET_KEEPALIVE": "45s"},
			args: []string{"--config", file}, want: func(t *testing.T, fc fileConfig) {
				require.Equal(t, "from-env", fc.NodeName)
				require.Equal(t, []string{"site=env", "x=y"}, fc.Labels)
				require.Equal(t, 45*time.Second, fc.KeepAlive)
				require.Equal(t, []string{"tcp://file:1883"}, fc.BrokerURLs)
			}},
		{name: "flag over env and file", env: map[string]string{"EDGESET_NODE_NAME": "from-env", "EDGESET_BROKER_URL": "tcp://env:1883"},
			args: []string{"--config", file, "--node-name", "from-flag", "--labels", "site=flag"}, want: func(t *testing.T, fc fileConfig) {
				require.Equal(t, "from-flag", fc.NodeName)
				require.Equal(t, []string{"site=flag"}, fc.Labels)
				require.Equal(t, []string{"tcp://env:1883"}, fc.BrokerURLs)
				require.Equal(t, "fake", fc.Runtime)
			}},
		{name: "config file from env", env: map[string]string{"EDGESET_CONFIG": file}, want: func(t *testing.T, fc fileConfig) {
			require.Equal(t, "from-file", fc.NodeName)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			fc, err := parseCmd(t, tc.args...)
			require.NoError(t, err)
			tc.want(t, fc)
		})
	}
}

// TestBrokerURLList: broker-url takes one URL or several, as a
// comma-separated flag, environment variable or file string, a repeated
// flag, or a YAML list; resolve trims them and hands them to the client.
func TestBrokerURLList(t *testing.T) {
	want := []string{"tcp://a:1883", "ssl://b:8883"}
	cases := []struct {
		name string
		env  string // EDGESET_BROKER_URL
		file string // agent.yaml content; "" for none
		args []string
	}{
		{name: "flag list", args: []string{"--broker-url", "tcp://a:1883,ssl://b:8883"}},
		{name: "repeated flag", args: []string{"--broker-url", "tcp://a:1883", "--broker-url", "ssl://b:8883"}},
		{name: "environment list", env: "tcp://a:1883,ssl://b:8883"},
		{name: "file string list", file: "broker-url: tcp://a:1883, ssl://b:8883\n"},
		{name: "file yaml list", file: "broker-url: [tcp://a:1883, ssl://b:8883]\n"},
		{name: "file yaml block list", file: "broker-url:\n  - tcp://a:1883\n  - ssl://b:8883\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("EDGESET_BROKER_URL", tc.env)
			}
			args := append([]string{"--token", "secret-token", "--node-name", "gw-1"}, tc.args...)
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, "agent.yaml", tc.file))
			}
			fc, err := parseCmd(t, args...)
			require.NoError(t, err)
			s, err := fc.resolve(os.Hostname)
			require.NoError(t, err)
			require.Equal(t, want, s.node.MQTT.BrokerURLs)
		})
	}
}

func TestConfigFileErrors(t *testing.T) {
	cases := []struct {
		name    string
		content string
		wantIn  []string
	}{
		{name: "unknown key", content: "node-name: a\nbroker-uri: tcp://x\n", wantIn: []string{"broker-uri"}},
		{name: "bad duration", content: "keepalive: often\n", wantIn: []string{"keepalive"}},
		{name: "syntax", content: "labels: [a=b\n", wantIn: []string{"agent.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "agent.yaml", tc.content)
			_, err := parseCmd(t, "--config", file)
			require.Error(t, err)
			for _, s := range tc.wantIn {
				require.Contains(t, err.Error(), s)
			}
		})
	}
	_, err := parseCmd(t, "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "missing.yaml")
}

// validConfig is a fileConfig with the defaults and a token.
func validConfig(t *testing.T) fileConfig {
	fc, err := parseCmd(t, "--token", "secret-token", "--node-name", "gw-1")
	require.NoError(t, err)
	return fc
}

func TestResolveErrors(t *testing.T) {
	emptyFile := writeFile(t, "token", "  \n")
	cases := []struct {
		name   string
		edit   func(fc *fileConfig)
		wantIn []string
	}{
		{name: "bad label entry", edit: func(fc *fileConfig) { fc.Labels = []string{"site=a", "oops"} }, wantIn: []string{`labels: entry "oops"`}},
		{name: "bad label value", edit: func(fc *fileConfig) { fc.Labels = []string{"site=a b"} }, wantIn: []string{"site", "a b"}},
		{name: "automatic label", edit: func(fc *fileConfig) { fc.Labels = []string{"kubernetes.io/os=plan9"} }, wantIn: []string{"kubernetes.io/os"}},
		{name: "duplicate label", edit: func(fc *fileConfig) { fc.Labels = []string{"a=1", "a=2"} }, wantIn: []string{`"a=2"`, "twice"}},
		{name: "bad taint effect", edit: func(fc *fileConfig) { fc.Taints = []string{"a=b:NoSchedule", "c=d:Never"} }, wantIn: []string{`taints: entry "c=d:Never"`, "Never"}},
		{name: "taint without effect", edit: func(fc *fileConfig) { fc.Taints = []string{"dedicated=camera"} }, wantIn: []string{`"dedicated=camera"`, "key[=value]:Effect"}},
		{name: "taint empty key", edit: func(fc *fileConfig) { fc.Taints = []string{"=v:NoExecute"} }, wantIn: []string{`"=v:NoExecute"`, "empty key"}},
		{name: "no token", edit: func(fc *fileConfig) { fc.Token = "" }, wantIn: []string{"token: required"}},
		{name: "token and file", edit: func(fc *fileConfig) { fc.TokenFile = "/x" }, wantIn: []string{"token, token-file"}},
		{name: "empty token file", edit: func(fc *fileConfig) { fc.Token, fc.TokenFile = "", emptyFile }, wantIn: []string{"token-file", "empty"}},
		{name: "runtime", edit: func(fc *fileConfig) { fc.Runtime = "podman" }, wantIn: []string{`runtime: "podman"`}},
		{name: "keepalive", edit: func(fc *fileConfig) { fc.KeepAlive = 10 * time.Millisecond }, wantIn: []string{"keepalive"}},
		{name: "subscribe qos", edit: func(fc *fileConfig) { fc.SubscribeQoS = 2 }, wantIn: []string{"subscribe-qos: 2 is not 0 or 1"}},
		{name: "publish qos", edit: func(fc *fileConfig) { fc.PublishQoS = -1 }, wantIn: []string{"publish-qos: -1 is not 0 or 1"}},
		{name: "negative settle", edit: func(fc *fileConfig) { fc.SettleInterval = -time.Second }, wantIn: []string{"broker-settle-interval: -1s"}},
		{name: "cert without key", edit: func(fc *fileConfig) { fc.CertFile = "c.pem" }, wantIn: []string{"cert-file, key-file"}},
		{name: "bad quantity", edit: func(fc *fileConfig) { fc.MemoryMinAvailable = "lots" }, wantIn: []string{"memory-min-available"}},
		{name: "registry password without user", edit: func(fc *fileConfig) { fc.RegistryPassword = "p" }, wantIn: []string{"registry-username"}},
		{name: "log level", edit: func(fc *fileConfig) { fc.LogLevel = "loud" }, wantIn: []string{"log-level"}},
		{name: "log format", edit: func(fc *fileConfig) { fc.LogFormat = "xml" }, wantIn: []string{"log-format"}},
		{name: "unknown capability", edit: func(fc *fileConfig) { fc.DeniedCapabilities = []string{"SYS_ADMIN", "SYS_ADMN"} }, wantIn: []string{`denied-capabilities: "SYS_ADMN"`}},
		{name: "no broker", edit: func(fc *fileConfig) { fc.BrokerURLs = nil }, wantIn: []string{"broker-url: required"}},
		{name: "empty broker entry", edit: func(fc *fileConfig) { fc.BrokerURLs = []string{"tcp://a", " "} }, wantIn: []string{"broker-url[1]: empty"}},
		{name: "too many brokers", edit: func(fc *fileConfig) { fc.BrokerURLs = make([]string, 33) }, wantIn: []string{"broker-url: 33 URLs, at most 32"}},
		{name: "several at once", edit: func(fc *fileConfig) { fc.Runtime, fc.LogFormat = "x", "y" }, wantIn: []string{"runtime", "log-format"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := validConfig(t)
			tc.edit(&fc)
			_, err := fc.resolve(os.Hostname)
			require.Error(t, err)
			for _, s := range tc.wantIn {
				require.Contains(t, err.Error(), s)
			}
		})
	}
}

// TestBrokerDeliverySettings: subscribe-qos, publish-qos and
// broker-settle-interval reach the node's options, with their defaults
// (QoS 1, 10 s) and 0 as "never" for the settle interval.
func TestBrokerDeliverySettings(t *testing.T) {
	s, err := validConfig(t).resolve(os.Hostname)
	require.NoError(t, err)
	require.False(t, s.node.SubscribeAtMostOnce, "QoS 1 by default")
	require.False(t, s.node.PublishAtMostOnce, "QoS 1 by default")
	require.Equal(t, 10*time.Second, s.node.SettleInterval)

	fc, err := parseCmd(t, "--token", "t", "--node-name", "gw-1", "--subscribe-qos", "0", "--publish-qos", "0", "--broker-settle-interval", "0")
	require.NoError(t, err)
	s, err = fc.resolve(os.Hostname)
	require.NoError(t, err)
	require.True(t, s.node.SubscribeAtMostOnce)
	require.True(t, s.node.PublishAtMostOnce)
	require.Negative(t, s.node.SettleInterval, "0 turns the second announcement off")
}

func TestResolveSettings(t *testing.T) {
	fc := validConfig(t)
	fc.Labels = []string{"site=berlin-3", "role=gw"}
	fc.Taints = []string{"dedicated=camera:NoSchedule", "maintenance:NoExecute"}
	fc.AllowedHostPaths = []string{"/var/log"}
	fc.RefusePrivileged = true
	fc.DeniedCapabilities, fc.AllowedCapabilities = []string{"SYS_ADMIN", "cap_net_admin"}, []string{"NET_BIND_SERVICE"}
	fc.RefuseUnconfinedSeccomp, fc.RefuseUnmaskedProcMount = true, true
	fc.KubeletLogDir = "/var/log"
	fc.RegistryUsername, fc.RegistryPasswordFile = "bot", writeFile(t, "pw", "s3cret\n")
	fc.MemoryMinAvailable, fc.DiskMinFree, fc.PIDMaxPercent = "200Mi", "0", 0
	s, err := fc.resolve(os.Hostname)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"site": "berlin-3", "role": "gw"}, s.announce.Labels)
	require.Equal(t, []schema.Taint{{Key: "dedicated", Value: "camera", Effect: "NoSchedule"}, {Key: "maintenance", Effect: "NoExecute"}}, s.announce.Taints)
	require.True(t, s.node.Agent.Policy.RestrictHostPaths, "allowed-host-paths implies restrict-host-paths")
	require.True(t, s.node.Agent.Policy.RefusePrivileged)
	require.Equal(t, []string{"SYS_ADMIN", "cap_net_admin"}, s.node.Agent.Policy.DeniedCapabilities)
	require.Equal(t, []string{"NET_BIND_SERVICE"}, s.node.Agent.Policy.AllowedCapabilities)
	require.True(t, s.node.Agent.Policy.RefuseUnconfinedSeccomp)
	require.True(t, s.node.Agent.Policy.RefuseUnmaskedProcMount)
	require.Equal(t, "/var/log", s.node.Agent.KubeletLogDir)
	require.Equal(t, "s3cret", s.node.Agent.RegistryAuth.Password)
	require.Equal(t, "secret-token", s.node.MQTT.Password)
	require.Equal(t, int64(200<<20), s.announce.Thresholds.MemoryMinAvailable)
	require.Negative(t, s.announce.Thresholds.DiskMinFreeBytes, "0 disables")
	require.Negative(t, s.announce.Thresholds.PIDMaxPercent, "0 disables")
	require.Equal(t, 10.0, s.announce.Thresholds.DiskMinFreePercent)
}

func TestNodeName(t *testing.T) {
	host := func(h string, err error) func() (string, error) { return func() (string, error) { return h, err } }
	cases := []struct {
		name, flag string
		hostname   func() (string, error)
		want       string
		errIn      string
	}{
		{name: "flag", flag: "gw-1.site-3", hostname: host("ignored", nil), want: "gw-1.site-3"},
		{name: "hostname lowercased", hostname: host("Gateway-7", nil), want: "gateway-7"},
		{name: "bad flag", flag: "GW_1", hostname: host("ok", nil), errIn: `node-name: "GW_1" is not a DNS-1123 subdomain`},
		{name: "bad hostname", hostname: host("my_laptop", nil), errIn: `node-name (from the hostname): "my_laptop"`},
		{name: "trailing dash", flag: "gw-", errIn: `"gw-"`},
		{name: "no hostname", hostname: host("", errors.New("uts gone")), errIn: "uts gone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := nodeName(tc.flag, tc.hostname)
			if tc.errIn != "" {
				require.ErrorContains(t, err, tc.errIn)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseLabelsAndTaints(t *testing.T) {
	labels, err := parseLabels([]string{"a=1", " b= ", "c=x=y"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a": "1", "b": "", "c": "x=y"}, labels)

	_, err = parseLabels([]string{"=v", "ok=1", "novalue"})
	require.ErrorContains(t, err, `entry "=v"`)
	require.ErrorContains(t, err, `entry "novalue"`)

	taints, err := parseTaints([]string{"example.com/gpu=nvidia:PreferNoSchedule"})
	require.NoError(t, err)
	require.Equal(t, []schema.Taint{{Key: "example.com/gpu", Value: "nvidia", Effect: "PreferNoSchedule"}}, taints)
}

// TestNodeTokenEnvironment: the node token is read from EDGESET_NODE_TOKEN
// (or _FILE), never from EDGESET_TOKEN, edgesetctl's API token: an agent
// started from an operator's shell must not send that to the broker, and
// one left without a token says which variable it reads.
func TestNodeTokenEnvironment(t *testing.T) {
	t.Setenv("EDGESET_TOKEN", "operator-api-token")
	t.Setenv("EDGESET_TOKEN_FILE", writeFile(t, "admin.token", "operator-api-token\n"))
	fc, err := parseCmd(t, "--node-name", "gw-1")
	require.NoError(t, err)
	require.Empty(t, fc.Token)
	require.Empty(t, fc.TokenFile)
	_, err = fc.token()
	require.ErrorContains(t, err, "EDGESET_NODE_TOKEN")

	t.Setenv("EDGESET_NODE_TOKEN_FILE", writeFile(t, "node.token", "node-token\n"))
	fc, err = parseCmd(t, "--node-name", "gw-1")
	require.NoError(t, err)
	token, err := fc.token()
	require.NoError(t, err)
	require.Equal(t, "node-token", token)
}
