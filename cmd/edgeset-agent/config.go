package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/selfupdate"
	"github.com/edgeset/edgeset/internal/cliconfig"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// Defaults of the keys whose zero value is not the default.
const (
	defaultBrokerURL      = "tcp://127.0.0.1:1883"
	defaultDataDir        = "./agent-data"
	defaultRuntime        = "docker"
	defaultKeepAlive      = mqttclient.DefaultKeepAlive
	defaultStatusInterval = edgeagent.DefaultStatusInterval
	defaultSubscribeQoS   = 1
	defaultPublishQoS     = 1
	defaultSettleInterval = edgeagent.DefaultSettleInterval
)

// fileConfig is what a config file, the environment and the flags set; one
// field per key, named as the flag.
type fileConfig struct {
	ConfigFile string `mapstructure:"config"`
	NodeName   string `mapstructure:"node-name"`

	// BrokerURLs is broker-url: one URL, a comma-separated list (flag,
	// environment, file) or a YAML list.
	BrokerURLs []string      `mapstructure:"broker-url"`
	Token      string        `mapstructure:"token"`
	TokenFile  string        `mapstructure:"token-file"`
	CAFile     string        `mapstructure:"ca-file"`
	CertFile   string        `mapstructure:"cert-file"`
	KeyFile    string        `mapstructure:"key-file"`
	KeepAlive  time.Duration `mapstructure:"keepalive"`

	SubscribeQoS   int           `mapstructure:"subscribe-qos"`
	PublishQoS     int           `mapstructure:"publish-qos"`
	SettleInterval time.Duration `mapstructure:"broker-settle-interval"`

	DataDir    string `mapstructure:"data-dir"`
	Runtime    string `mapstructure:"runtime"`
	DockerHost string `mapstructure:"docker-host"`
	SeccompDir string `mapstructure:"seccomp-profile-dir"`

	Labels         []string      `mapstructure:"labels"`
	Taints         []string      `mapstructure:"taints"`
	StatusInterval time.Duration `mapstructure:"status-interval"`
	// TelemetryInterval (negative: no telemetry) and TelemetryMaxInterval:
	// see edgeagent.NodeOptions.
	TelemetryInterval    time.Duration `mapstructure:"telemetry-interval"`
	TelemetryMaxInterval time.Duration `mapstructure:"telemetry-max-interval"`

	DiskMinFreePercent float64 `mapstructure:"disk-min-free-percent"`
	DiskMinFree        string  `mapstructure:"disk-min-free"`
	MemoryMinAvailable string  `mapstructure:"memory-min-available"`
	PIDMaxPercent      float64 `mapstructure:"pid-max-percent"`

	AllowExec         bool     `mapstructure:"allow-exec"`
	RefusePrivileged  bool     `mapstructure:"refuse-privileged"`
	RefuseHostNetwork bool     `mapstructure:"refuse-host-network"`
	RefuseHostPID     bool     `mapstructure:"refuse-host-pid"`
	RestrictHostPaths bool     `mapstructure:"restrict-host-paths"`
	AllowedHostPaths  []string `mapstructure:"allowed-host-paths"`

	DeniedCapabilities      []string `mapstructure:"denied-capabilities"`
	AllowedCapabilities     []string `mapstructure:"allowed-capabilities"`
	RefuseUnconfinedSeccomp bool     `mapstructure:"refuse-unconfined-seccomp"`
	RefuseUnmaskedProcMount bool     `mapstructure:"refuse-unmasked-proc-mount"`

	KubeletLogDir string `mapstructure:"kubelet-log-dir"`

	TrustRoot string `mapstructure:"trust-root"`

	NodeKeyFile      string `mapstructure:"node-key-file"`
	SecretsAtRest    string `mapstructure:"secrets-at-rest"`
	ControllerURL    string `mapstructure:"controller-url"`
	ControllerCAFile string `mapstructure:"controller-ca-file"`

	RegistryServer       string `mapstructure:"registry-server"`
	RegistryUsername     string `mapstructure:"registry-username"`
	RegistryPassword     string `mapstructure:"registry-password"`
	RegistryPasswordFile string `mapstructure:"registry-password-file"`

	ImageURL    string `mapstructure:"image-url"`
	ImageCAFile string `mapstructure:"image-ca-file"`

	LogLevel    string `mapstructure:"log-level"`
	LogFormat   string `mapstructure:"log-format"`
	MetricsAddr string `mapstructure:"metrics-addr"`
}

func addFlags(f *pflag.FlagSet) {
	f.String("config", "", "config file (YAML); see configs/agent.yaml")
	f.String("node-name", "", "this device's node name, a DNS-1123 subdomain (default: the hostname, lowercased)")
	f.StringSlice("broker-url", []string{defaultBrokerURL}, "MQTT broker: tcp://, ssl://, tls://, mqtts://, ws:// or wss://; a comma-separated list names the nodes of one broker, tried in turn on failure")
	f.String("token", "", "node token (MQTT password) from `edgesetctl token create NODE`")
	f.String("token-file", "", "file holding the node token (instead of --token)")
	f.String("ca-file", "", "CA bundle verifying the broker's TLS certificate (default: system roots)")
	f.String("cert-file", "", "client certificate for mutual TLS (with --key-file)")
	f.String("key-file", "", "key of --cert-file")
	f.Duration("keepalive", defaultKeepAlive, "MQTT keepalive; the broker declares the node offline after 1.5 times this")
	f.Int("subscribe-qos", defaultSubscribeQoS, "QoS of the node's subscriptions (desired state, revisions, config objects, log requests): 0 or 1; 0 on a NATS cluster, where each QoS 1 subscription is a replicated JetStream consumer (docs/scale-out.md)")
	f.Int("publish-qos", defaultPublishQoS, "QoS of the node's publishes (presence, status, observed state, events; the will stays 1): 0 or 1; 0 on a NATS cluster, which stores every QoS 1 publish in a replicated JetStream stream (docs/scale-out.md)")
	f.Duration("broker-settle-interval", defaultSettleInterval, "announce the node again (online, status, observed state) this long after each connection, repairing a clustered broker's late or lost messages (0: never)")
	f.String("trust-root", "", "fleet root public key (a file, or its ed25519:... value from `edgesetctl keys init`): accept only documents the fleet's keys signed; empty is the insecure mode")
	f.String("node-key-file", "", "this node's X25519 key that Secrets are sealed to, mode 0600, created when missing (default: DATA-DIR/node.key)")
	f.String("secrets-at-rest", edgeagent.SecretsSealed, "where Secrets are kept between runs: sealed (agent.db, as received, sealed to the node key) or memory (nowhere on disk; secret volumes on a tmpfs)")
	f.String("controller-url", "", "controller API URL (https://controller:8080) the node registers its sealing key with, authenticated by its token (default: image-url)")
	f.String("controller-ca-file", "", "CA bundle verifying --controller-url's TLS certificate (default: system roots)")
	f.String("data-dir", defaultDataDir, "directory of the local state (agent.db); its filesystem is watched for DiskPressure")
	f.String("runtime", defaultRuntime, "container runtime: docker, or fake (in memory, for trials)")
	f.String("docker-host", "", "Docker engine address (default: DOCKER_HOST or the local socket)")
	f.String("seccomp-profile-dir", edgeagent.DefaultSeccompProfileDir, "directory of the seccomp profiles of seccompProfile type Localhost")
	f.StringSlice("labels", nil, "node labels, key=value,...")
	f.StringSlice("taints", nil, "node taints, key[=value]:Effect,... (NoSchedule, PreferNoSchedule, NoExecute)")
	f.Duration("status-interval", defaultStatusInterval, "how often the node is re-measured (published only on change)")
	f.Duration("telemetry-interval", edgeagent.DefaultTelemetryInterval, "how often CPU, memory, disk, temperature and each instance's usage are measured; published only on a meaningful change (negative: no telemetry)")
	f.Duration("telemetry-max-interval", edgeagent.DefaultTelemetryMaxInterval, "longest time between two telemetry messages, changed or not")
	f.Float64("disk-min-free-percent", edgeagent.DefaultDiskMinFreePercent, "DiskPressure below this free share of the data dir's filesystem (0: off)")
	f.String("disk-min-free", "1Gi", "DiskPressure below this free space; the smaller threshold applies (\"0\": off)")
	f.String("memory-min-available", "100Mi", "MemoryPressure below this MemAvailable (\"0\": off)")
	f.Float64("pid-max-percent", edgeagent.DefaultPIDMaxPercent, "PIDPressure at this share of kernel.pid_max (0: off)")
	f.Bool("allow-exec", false, "let an admin run commands in this device's instances (edgesetctl exec); off, every request is refused")
	f.Bool("refuse-privileged", false, "refuse privileged containers")
	f.Bool("refuse-host-network", false, "refuse hostNetwork daemons")
	f.Bool("refuse-host-pid", false, "refuse hostPID daemons")
	f.Bool("restrict-host-paths", false, "refuse hostPath volumes outside --allowed-host-paths (implied by setting it)")
	f.StringSlice("allowed-host-paths", nil, "host paths that hostPath volumes may mount (and beneath)")
	f.StringSlice("denied-capabilities", nil, "capabilities no container may add, e.g. SYS_ADMIN,NET_ADMIN (ALL: none may be added)")
	f.StringSlice("allowed-capabilities", nil, "if set, the only capabilities a container may add")
	f.Bool("refuse-unconfined-seccomp", false, "refuse seccompProfile Unconfined")
	f.Bool("refuse-unmasked-proc-mount", false, "refuse procMount Unmasked")
	f.String("kubelet-log-dir", "", "keep kubelet-style pods/ and containers/ log links here for log shippers, e.g. /var/log (default: off)")
	f.String("registry-server", "", "registry the credentials are for (empty: Docker Hub)")
	f.String("registry-username", "", "registry user for image pulls")
	f.String("registry-password", "", "registry password")
	f.String("registry-password-file", "", "file holding the registry password (instead of --registry-password)")
	f.String("image-url", "", "controller API URL (https://controller:8080) to fetch images from its image store when no registry serves them (default: off)")
	f.String("image-ca-file", "", "CA bundle verifying --image-url's TLS certificate (default: system roots)")
	f.String("log-level", "info", "debug, info, warn or error")
	f.String("log-format", "text", "text or json")
	f.String("metrics-addr", "", "serve /healthz and /metrics here, e.g. 127.0.0.1:9101 (default: off)")
}

// loadConfig merges flags, environment and the config file (in that order
// of precedence); unknown keys are an error naming them. It returns the
// config file used, or "flags and environment".
func loadConfig(v *viper.Viper) (fileConfig, string, error) {
	var fc fileConfig
	source, err := cliconfig.Load(v, &fc)
	if err != nil {
		return fileConfig{}, "", err
	}
	return fc, source, nil
}

// settings is the validated configuration the agent runs with.
type settings struct {
	node        edgeagent.NodeOptions
	announce    edgeagent.AnnounceConfig
	runtime     string
	dockerHost  string
	logLevel    string
	logFormat   string
	metricsAddr string
	// telemetry: measure and publish telemetry (telemetry-interval > 0).
	telemetry bool
	// images: fetch images from the controller (image-url); zero: off.
	images imageSettings
	// boot is what selfupdate.Start found; nil: no self-upgrade.
	boot *selfupdate.Boot
	// keys: register the node's sealing key (controller-url); zero: off.
	keys keySettings
}

// resolve validates fc and turns it into settings, reporting every problem,
// each naming its key. hostname supplies the default node name.
func (fc fileConfig) resolve(hostname func() (string, error)) (settings, error) {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	node, err := nodeName(fc.NodeName, hostname)
	add(err)
	labels, err := parseLabels(fc.Labels)
	add(err)
	taints, err := parseTaints(fc.Taints)
	add(err)
	token, err := fc.token()
	add(err)
	thr, err := fc.thresholds()
	add(err)
	auth, err := fc.registryAuth()
	add(err)
	brokers, err := fc.brokerURLs()
	add(err)
	images, err := fc.imageSettings(token)
	add(err)
	keys, err := fc.keySettings(token)
	add(err)
	add(fc.checkSecretsAtRest())
	add(fc.checkChoices())
	var root ed25519.PublicKey
	if fc.TrustRoot != "" {
		root, err = signing.LoadPublicKey(fc.TrustRoot)
		if err != nil {
			add(fmt.Errorf("trust-root: %w", err))
		}
	}
	add(fc.policy().Validate())
	announce := edgeagent.AnnounceConfig{NodeName: node, Labels: labels, Taints: taints, DataDir: fc.DataDir, Thresholds: thr}
	if len(errs) == 0 {
		add(announce.Validate())
	}
	if len(errs) > 0 {
		return settings{}, errors.Join(errs...)
	}
	s := settings{
		runtime: fc.Runtime, dockerHost: fc.DockerHost,
		logLevel: fc.LogLevel, logFormat: fc.LogFormat, metricsAddr: fc.MetricsAddr,
		announce: announce, images: images, keys: keys,
	}
	s.node = edgeagent.NodeOptions{
		Agent: edgeagent.Config{NodeName: node, DataDir: fc.DataDir, Policy: fc.policy(), RegistryAuth: auth,
			KubeletLogDir: fc.KubeletLogDir, SeccompProfileDir: fc.SeccompDir, TrustRoot: root,
			NodeKeyFile: fc.NodeKeyFile, SecretsAtRest: fc.SecretsAtRest},
		MQTT: mqttclient.Options{
			BrokerURLs: brokers, Password: token, KeepAlive: fc.KeepAlive,
			CAFile: fc.CAFile, CertFile: fc.CertFile, KeyFile: fc.KeyFile,
		},
		StatusInterval:       fc.StatusInterval,
		TelemetryInterval:    fc.TelemetryInterval,
		TelemetryMaxInterval: fc.TelemetryMaxInterval,
		SubscribeAtMostOnce:  fc.SubscribeQoS == 0,
		PublishAtMostOnce:    fc.PublishQoS == 0,
		SettleInterval:       fc.SettleInterval,
		AllowExec:            fc.AllowExec,
	}
	if fc.SettleInterval == 0 {
		s.node.SettleInterval = -1 // never
	}
	s.telemetry = fc.TelemetryInterval > 0
	return s, nil
}

// checkChoices validates the keys with a fixed set of values or a lower bound.
func (fc fileConfig) checkChoices() error {
	var errs []error
	if fc.Runtime != "docker" && fc.Runtime != "fake" {
		errs = append(errs, fmt.Errorf("runtime: %q is not docker or fake", fc.Runtime))
	}
	if fc.DockerHost != "" && fc.Runtime != "docker" {
		errs = append(errs, fmt.Errorf("docker-host: set but runtime is %q", fc.Runtime))
	}
	if fc.DataDir == "" {
		errs = append(errs, errors.New("data-dir: required"))
	}
	if fc.KeepAlive < time.Second {
		errs = append(errs, fmt.Errorf("keepalive: %s is below the 1s MQTT resolution", fc.KeepAlive))
	}
	if fc.SubscribeQoS != 0 && fc.SubscribeQoS != 1 {
		errs = append(errs, fmt.Errorf("subscribe-qos: %d is not 0 or 1", fc.SubscribeQoS))
	}
	if fc.PublishQoS != 0 && fc.PublishQoS != 1 {
		errs = append(errs, fmt.Errorf("publish-qos: %d is not 0 or 1", fc.PublishQoS))
	}
	if fc.SettleInterval < 0 {
		errs = append(errs, fmt.Errorf("broker-settle-interval: %s is negative (0 turns it off)", fc.SettleInterval))
	}
	if fc.StatusInterval < time.Second {
		errs = append(errs, fmt.Errorf("status-interval: %s is below 1s", fc.StatusInterval))
	}
	if fc.TelemetryInterval >= 0 && fc.TelemetryInterval < time.Second {
		errs = append(errs, fmt.Errorf("telemetry-interval: %s is below 1s (negative turns telemetry off)", fc.TelemetryInterval))
	}
	if fc.TelemetryInterval > 0 && fc.TelemetryMaxInterval < fc.TelemetryInterval {
		errs = append(errs, fmt.Errorf("telemetry-max-interval: %s is below telemetry-interval %s", fc.TelemetryMaxInterval, fc.TelemetryInterval))
	}
	if (fc.CertFile == "") != (fc.KeyFile == "") {
		errs = append(errs, errors.New("cert-file, key-file: set both or neither"))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(fc.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("log-level: %q is not debug, info, warn or error", fc.LogLevel))
	}
	if fc.LogFormat != "text" && fc.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log-format: %q is not text or json", fc.LogFormat))
	}
	return errors.Join(errs...)
}

// brokerURLs returns broker-url's URLs, trimmed of spaces. The list must
// not be empty, nor have an empty entry, nor more than
// mqttclient.MaxBrokerURLs; mqttclient checks each URL, naming its index.
func (fc fileConfig) brokerURLs() ([]string, error) {
	if len(fc.BrokerURLs) == 0 {
		return nil, errors.New("broker-url: required")
	}
	if len(fc.BrokerURLs) > mqttclient.MaxBrokerURLs {
		return nil, fmt.Errorf("broker-url: %d URLs, at most %d", len(fc.BrokerURLs), mqttclient.MaxBrokerURLs)
	}
	out := make([]string, len(fc.BrokerURLs))
	var errs []error
	for i, u := range fc.BrokerURLs {
		out[i] = strings.TrimSpace(u)
		if out[i] == "" {
			errs = append(errs, fmt.Errorf("broker-url[%d]: empty (a stray comma?)", i))
		}
	}
	return out, errors.Join(errs...)
}

// envNames are the agent's keys whose environment variable is not
// EDGESET_ and the key: EDGESET_TOKEN and EDGESET_TOKEN_FILE are
// edgesetctl's API token, which an agent started from the same shell must
// not take for its node token and send to the broker.
var envNames = map[string]string{
	"token":      "EDGESET_NODE_TOKEN",
	"token-file": "EDGESET_NODE_TOKEN_FILE",
}

// token returns the node token from token or token-file. One of them is
// required unless a client certificate identifies the node.
func (fc fileConfig) token() (string, error) {
	secret, err := secretValue("token", fc.Token, "token-file", fc.TokenFile)
	if err == nil && secret == "" && fc.CertFile == "" {
		msg := "token: required (or token-file, or cert-file for mutual TLS); mint one with `edgesetctl token create NODE`"
		if os.Getenv("EDGESET_TOKEN") != "" || os.Getenv("EDGESET_TOKEN_FILE") != "" {
			msg += "; EDGESET_TOKEN and EDGESET_TOKEN_FILE are edgesetctl's API token, not read by the agent: its environment variables are EDGESET_NODE_TOKEN and EDGESET_NODE_TOKEN_FILE"
		}
		err = errors.New(msg)
	}
	return secret, err
}

// secretValue returns value, or the trimmed content of file; setting both
// is an error naming the two keys.
func secretValue(key, value, fileKey, file string) (string, error) {
	switch {
	case value != "" && file != "":
		return "", fmt.Errorf("%s, %s: set one, not both", key, fileKey)
	case file == "":
		return value, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fileKey, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s %s: empty", fileKey, file)
	}
	return s, nil
}

// thresholds converts the pressure keys. A key of 0 (or a negative
// percentage, or an empty quantity) disables its criterion.
func (fc fileConfig) thresholds() (edgeagent.Thresholds, error) {
	disk, err1 := bytesKey("disk-min-free", fc.DiskMinFree)
	mem, err2 := bytesKey("memory-min-available", fc.MemoryMinAvailable)
	if err := errors.Join(err1, err2); err != nil {
		return edgeagent.Thresholds{}, err
	}
	return edgeagent.Thresholds{
		DiskMinFreePercent: orOff(fc.DiskMinFreePercent), DiskMinFreeBytes: orOff(disk),
		MemoryMinAvailable: orOff(mem), PIDMaxPercent: orOff(fc.PIDMaxPercent),
	}, nil
}

// orOff maps a configured zero (off) to the Thresholds' "disabled" (-1).
func orOff[T int64 | float64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// bytesKey parses a byte quantity ("1Gi", "500M", "0") of key.
func bytesKey(key, value string) (int64, error) {
	if value == "" {
		return 0, nil
	}
	n, err := schema.Quantity(value).Value()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: %q must not be negative", key, value)
	}
	return n, nil
}

func (fc fileConfig) policy() edgeagent.LocalPolicy {
	return edgeagent.LocalPolicy{
		RefusePrivileged:  fc.RefusePrivileged,
		RefuseHostNetwork: fc.RefuseHostNetwork,
		RefuseHostPID:     fc.RefuseHostPID,
		RestrictHostPaths: fc.RestrictHostPaths || len(fc.AllowedHostPaths) > 0,
		AllowedHostPaths:  fc.AllowedHostPaths,

		DeniedCapabilities:      fc.DeniedCapabilities,
		AllowedCapabilities:     fc.AllowedCapabilities,
		RefuseUnconfinedSeccomp: fc.RefuseUnconfinedSeccomp,
		RefuseUnmaskedProcMount: fc.RefuseUnmaskedProcMount,
	}
}

// registryAuth returns the pull credentials, or nil when no username is set.
func (fc fileConfig) registryAuth() (*edgeagent.RegistryAuth, error) {
	password, err := secretValue("registry-password", fc.RegistryPassword, "registry-password-file", fc.RegistryPasswordFile)
	if err != nil {
		return nil, err
	}
	if fc.RegistryUsername == "" {
		if password != "" || fc.RegistryServer != "" {
			return nil, errors.New("registry-username: required with registry-password or registry-server")
		}
		return nil, nil
	}
	return &edgeagent.RegistryAuth{Server: fc.RegistryServer, Username: fc.RegistryUsername, Password: password}, nil
}
