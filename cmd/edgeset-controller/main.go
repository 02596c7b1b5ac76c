package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	// Maintenance windows name IANA zones: the zone database is built in
	// (about 450 KB) so that a controller on a minimal image, without
	// /usr/share/zoneinfo, evaluates them as everywhere else.
	_ "time/tzdata"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/audit"
	"github.com/edgeset/edgeset/controller/ha"
	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/internal/cliconfig"
	"github.com/edgeset/edgeset/schema"
)

func main() {
	if err := newRootCmd(os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "edgeset-controller:", err)
		os.Exit(1)
	}
}

// fileConfig is what a config file, the environment and the flags set.
type fileConfig struct {
	controller.Config `mapstructure:",squash"`
	HA                ha.Config `mapstructure:",squash"`
	ConfigFile        string    `mapstructure:"config"`
}

func newRootCmd(stderr io.Writer) *cobra.Command {
	v := cliconfig.New(nil)
	cmd := &cobra.Command{
		Use:   "edgeset-controller",
		Short: "Run the edgeset controller: embedded MQTT broker, store, reconcile loop and HTTP API",
		Long: `edgeset-controller keeps the fleet's desired daemonsets in its store and
publishes each node's desired state over MQTT.

Every flag is also a key of the config file (--config) and an environment
variable: --data-dir is data-dir and EDGESET_DATA_DIR.`,
		Version:       schema.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc, source, err := loadFileConfig(v)
			if err != nil {
				return err
			}
			if fc.HA.Store == ha.StoreEtcd {
				return runHA(cmd.Context(), fc.Config, fc.HA, source, stderr)
			}
			if err := checkBolt(fc.Config, fc.HA); err != nil {
				return err
			}
			return run(cmd.Context(), fc.Config, source, stderr)
		},
	}
	addFlags(cmd.Flags())
	addHAFlags(cmd.Flags())
	cmd.AddCommand(newBackupCmd(cmd.OutOrStdout()))
	cliconfig.Bind(v, cmd.Flags())
	return cmd
}

func addFlags(f *pflag.FlagSet) {
	f.String("config", "", "config file (YAML); see configs/controller.yaml")
	f.String("data-dir", controller.DefaultDataDir, "directory of the store, broker state, fleet secret and API token")
	f.String("mqtt-addr", controller.DefaultMQTTAddr, "embedded broker TCP listener")
	f.String("mqtt-tls-addr", "", "embedded broker TLS listener (needs --mqtt-tls-cert and --mqtt-tls-key)")
	f.String("mqtt-tls-cert", "", "TLS certificate file of the embedded broker")
	f.String("mqtt-tls-key", "", "TLS key file of the embedded broker")
	f.String("mqtt-client-ca", "", "CA file: require client certificates on the TLS listener (mutual TLS)")
	f.String("mqtt-ws-addr", "", "embedded broker WebSocket listener")
	f.Duration("mqtt-connect-timeout", broker.DefaultConnectTimeout, "close an MQTT connection that has not completed CONNECT and authentication within this")
	f.Int("mqtt-max-pending-connections", broker.DefaultMaxPendingConnections, "MQTT connections not yet authenticated; more are closed at accept")
	f.Int("mqtt-max-connections-per-source", broker.DefaultMaxConnectionsPerSource, "open MQTT connections per IP address (IPv6: one /64; loopback included); more are closed at accept")
	f.Int("mqtt-auth-failure-limit", broker.DefaultAuthFailureLimit, "failed MQTT logins from one IP address within --mqtt-auth-failure-window that refuse it for --mqtt-auth-failure-backoff")
	f.Duration("mqtt-auth-failure-window", broker.DefaultAuthFailureWindow, "window counting failed MQTT logins per IP address")
	f.Duration("mqtt-auth-failure-backoff", broker.DefaultAuthFailureBackoff, "how long an IP address that failed too many MQTT logins is refused")
	f.StringSlice("mqtt-exempt-sources", nil, "IP addresses or CIDR prefixes exempt from the per-source cap and the failed-login back-off")
	f.StringSlice("broker-url", nil, "use this external MQTT broker instead of the embedded one (tcp://host:1883); a comma-separated list names the nodes of a broker cluster, tried in turn on failure")
	f.StringSlice("enroll-broker-url", nil, "the broker URLs an enrolled device is given (edgeset-agent enroll); default: broker-url, or the embedded broker's listeners on the host the device reached the API at")
	f.String("broker-username", controller.DefaultControllerUser, "controller's username on an external broker")
	f.String("broker-password-file", "", "controller's password on an external broker (default: derived from the fleet secret)")
	f.String("broker-ca-file", "", "CA file verifying an external broker's TLS certificate")
	f.String("broker-drop-topic", controller.DefaultBrokerDropTopic, "an external broker's count of dropped messages; a rise triggers a republish and re-read (none: off)")
	f.Duration("broker-resync-interval", controller.DefaultBrokerResyncInterval, "re-read every node's retained state from an external broker this often (negative: never)")
	f.Duration("broker-settle-interval", controller.DefaultBrokerSettleInterval, "re-read the fleet's retained state once this long after each connection to an external broker (negative: never)")
	f.StringSlice("nats-auth-url", nil, "serve the auth callout of the NATS cluster at these client URLs (docs/scale-out.md)")
	f.String("nats-auth-user", controller.DefaultNATSAuthUser, "the auth callout's user on the NATS cluster")
	f.String("nats-auth-password-file", "", "file holding --nats-auth-user's password")
	f.String("nats-auth-issuer-seed-file", "", "file holding the account nkey seed whose public key is the servers' auth_callout issuer")
	f.String("nats-auth-account", controller.DefaultNATSAuthAccount, "NATS account admitted devices and the controller are placed in")
	f.Duration("nats-auth-user-ttl", controller.DefaultNATSAuthUserTTL, "NATS servers close an admitted connection after this, so a revocation takes effect within it (negative: never)")
	f.String("api-addr", controller.DefaultAPIAddr, "HTTP API listener")
	f.String("api-tls-cert", "", "serve the API over HTTPS with this certificate")
	f.Bool("ui-disabled", false, "do not serve the web dashboard (/ui/ on --api-addr)")
	f.String("api-tls-key", "", "key of --api-tls-cert")
	f.Duration("api-read-header-timeout", controller.DefaultAPIReadHeaderTimeout, "API: time a client has to send a request's headers")
	f.Duration("api-read-timeout", controller.DefaultAPIReadTimeout, "API: time a client has to send a whole request, body included")
	f.Duration("api-write-timeout", controller.DefaultAPIWriteTimeout, "API: time a client has to take a response (a log stream: each chunk)")
	f.Duration("api-idle-timeout", controller.DefaultAPIIdleTimeout, "API: close keep-alive connections idle this long")
	f.Int("api-max-header-bytes", controller.DefaultAPIMaxHeaderBytes, "API: largest request header block")
	f.Int("api-max-unauthenticated-connections", controller.DefaultAPIMaxUnauthenticatedConns, "API: open connections without an authorised request yet")
	f.Int("api-max-connections-per-source", controller.DefaultAPIMaxConnsPerSource, "API: open connections of one source address (IPv6: one /64)")
	f.Int("api-auth-failure-limit", controller.DefaultAPIAuthFailureLimit, "API: failed authentications of a source within --api-auth-failure-window that block it for the window")
	f.Duration("api-auth-failure-window", controller.DefaultAPIAuthFailureWindow, "API: window of --api-auth-failure-limit, and how long a block lasts")
	f.Duration("api-auth-log-interval", controller.DefaultAPIAuthLogInterval, "API: at most one log line about failed authentications per source and interval, and one about refused connections")
	f.Duration("node-offline-grace", controller.DefaultNodeOfflineGrace, "how long a node may be disconnected before it is tainted unreachable")
	f.Bool("signing", false, "sign every desired state, revision, ConfigMap and Secret with the online key in --data-dir (docs/security.md)")
	f.Duration("signing-validity", controller.DefaultSigningValidity, "how long a signed document stays acceptable; everything is re-signed every half of it")
	f.String("signing-trust-root", "", "fleet root public key (file or ed25519:... value) to verify uploaded key sets against")
	f.String("secret-encryption-key-file", "", "file of the AES-256 keys (base64, one a line, the first current) that encrypt Secrets in the store (default: a key derived from the fleet secret)")
	f.Bool("unsealed-secrets-fallback", false, "send Secrets in the clear to nodes that registered no sealing key (agents older than sealing); off: withheld, with an event")
	f.Int("republish-rate", controller.DefaultRepublishRate, "desired-state messages per second when republishing the fleet")
	f.Duration("full-pass-interval", controller.DefaultFullPassInterval, "how often a reconcile pass decides every node and daemonset from scratch (safety net under incremental passes)")
	f.Duration("desired-repair-after", controller.DefaultDesiredRepairAfter, "publish an online node's desired state again when it reports an older generation for this long (negative: never)")
	f.String("site-label", controller.DefaultSiteLabel, "node label naming a node's site: the dashboard and /metrics (edgeset_nodes_by_site) group nodes by its value, and spec.rollout.prefetch bounds downloads per site by it when a daemonset names no key")
	f.Int("telemetry-history", telemetry.DefaultLimit, "telemetry reports kept per node for describe node and the dashboard (negative: the latest only)")
	f.Int64("image-quota", controller.DefaultImageQuota, "bytes the image store (DATA-DIR/images, edgesetctl image push) may hold; a push past it first collects unreferenced images")
	f.Int64("image-max-upload", controller.DefaultImageMaxUpload, "largest image archive one push may send, in bytes")
	f.Duration("image-gc-grace", controller.DefaultImageGCGrace, "an image no revision references is collected this long after its push")
	f.Int("image-downloads-per-node", controller.DefaultImageDownloadsPerNode, "blob downloads one node may have open at once from the image store")
	f.Bool("metrics-per-node", false, "add per-node series to /metrics (edgeset_node_*) for up to 1000 nodes: for small fleets")
	f.Int("max-events", controller.DefaultMaxEvents, "events kept in the store")
	f.Int("max-events-per-node", 0, "events caused by one node kept in the store; its newest evicts its oldest (0: a tenth of --max-events)")
	f.Int("max-node-events", 0, "events caused by nodes kept in the store, all nodes together; past it the oldest node-caused event is trimmed, never the controller's own (0: half of --max-events)")
	f.Int("node-event-rate", controller.DefaultNodeEventRate, "events per second accepted from one node (token bucket)")
	f.Int("node-event-burst", controller.DefaultNodeEventBurst, "burst of events accepted from one node")
	f.Duration("event-series-window", controller.DefaultEventSeriesWindow, "a repeated event within this window folds into the stored one (count, lastTime)")
	f.Int("user-max", access.DefaultMaxUsers, "API users the controller holds at most (edgesetctl user create)")
	f.Duration("user-max-ttl", access.DefaultMaxTTL, "longest lifetime of a user's API token (user create --ttl)")
	f.Bool("user-require-ttl", false, "refuse users created without --ttl")
	f.Int("audit-max-entries", audit.DefaultMaxEntries, "audit log entries kept in the store; the oldest go first")
	f.Duration("audit-max-age", audit.DefaultMaxAge, "audit log entries older than this are dropped (at least 1h)")
	f.String("manifests-dir", "", "apply every manifest in this directory and watch it for changes")
	f.Bool("prune", false, "delete daemonsets whose manifest file is removed from --manifests-dir")
	f.String("log-level", "info", "debug, info, warn or error")
	f.String("log-format", "text", "text or json")
}

// loadConfig merges flags, environment and the config file; unknown keys in
// the file are an error naming them, and so is a duration without its unit.
// It returns the config file used.
func loadConfig(v *viper.Viper) (controller.Config, string, error) {
	fc, source, err := loadFileConfig(v)
	return fc.Config, source, err
}

// loadFileConfig is loadConfig with the HA keys.
func loadFileConfig(v *viper.Viper) (fileConfig, string, error) {
	var fc fileConfig
	source, err := cliconfig.Load(v, &fc, cliconfig.StrictDurations)
	if err != nil {
		return fileConfig{}, "", err
	}
	return fc, source, nil
}

func run(ctx context.Context, cfg controller.Config, source string, stderr io.Writer) error {
	cfg.ApplyDefaults()
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := controller.New(cfg, log)
	if err != nil {
		return err
	}
	scheme := "http://"
	if cfg.APITLSCert != "" {
		scheme = "https://"
	}
	log.Info("edgeset-controller starting", "version", schema.Version, "config", source,
		"api", scheme+c.APIAddr().String(), "token", cfg.TokenPath(), "data", cfg.DataDir)
	if !cfg.UIDisabled {
		log.Info("dashboard", "url", scheme+c.APIAddr().String()+"/ui/")
	}
	if addr := c.MQTTAddr(); addr != nil {
		log.Info("embedded MQTT broker", "addr", addr.String())
	}
	start := time.Now()
	err = c.Run(ctx)
	log.Info("edgeset-controller stopped", "uptime", time.Since(start).Round(time.Second))
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func newLogger(cfg controller.Config, w io.Writer) (*slog.Logger, error) {
	level, err := controller.ParseLogLevel(cfg.LogLevel)
	if err != nil {
		return nil, fmt.Errorf("log-level: %w", err)
	}
	return cliconfig.NewLogger(level, cfg.LogFormat, w), nil
}
