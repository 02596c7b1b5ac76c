package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/atomicfile"
	"github.com/edgeset/edgeset/sealing"
)

// enrollOptions are the flags of edgeset-agent enroll.
type enrollOptions struct {
	controller string // the controller's API URL
	code       string
	codeFile   string
	node       string
	caFile     string // verifies the controller's HTTPS certificate
	config     string // the agent config file to write
	tokenFile  string // the token file to write; next to config by default
	keyFile    string // the node's sealing key; next to config by default
	dataDir    string // written into the config when set
	force      bool
}

func newEnrollCmd() *cobra.Command {
	var o enrollOptions
	cmd := &cobra.Command{
		Use:   "enroll --controller URL --code CODE",
		Short: "Admit this device to the fleet with an enrollment code, and write its configuration",
		Long: `enroll presents a one-time enrollment code (edgesetctl enrollment create)
to the controller's API, which answers with this device's node name, its MQTT
token, the broker URLs and, when the fleet signs its desired state, the
fleet root to pin. They are written to --config (node-name, broker-url,
token-file, trust-root) and to the token file (mode 0600), so that
'edgeset-agent --config FILE' then runs with nothing pasted by hand. A code
bound to one node gives that node's name; a code shared by several devices
needs --node. An existing config file is not replaced without --force.

enroll also makes the node's X25519 key (--node-key-file, mode 0600; an
existing one is kept) and sends its public half with the code, so the
controller seals this node's Secrets to it from the first; the private key
never leaves the device. The config gets node-key-file and controller-url
(and controller-ca-file), where the agent registers a rotated key.`,
		Example: `  edgeset-agent enroll --controller https://ctl.example:8080 --ca-file /etc/edgeset/ca.pem --code esn1_... 
  edgeset-agent enroll --controller http://10.0.0.1:8080 --code-file /boot/edgeset.code --node berlin-gw-07
  edgeset-agent --config /etc/edgeset/agent.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return enroll(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.controller, "controller", "", "the controller's API URL (https://host:8080)")
	f.StringVar(&o.code, "code", "", "the enrollment code")
	f.StringVar(&o.codeFile, "code-file", "", "read the enrollment code from this file instead")
	f.StringVar(&o.node, "node", "", "the node name to ask for (required by a code shared by several devices)")
	f.StringVar(&o.caFile, "ca-file", "", "PEM CA bundle that verifies the controller's HTTPS certificate")
	f.StringVar(&o.config, "config", "/etc/edgeset/agent.yaml", "the agent config file to write")
	f.StringVar(&o.tokenFile, "token-file", "", "the token file to write (default: token next to --config)")
	f.StringVar(&o.keyFile, "node-key-file", "", "the node's sealing key, created when missing (default: node.key next to --config)")
	f.StringVar(&o.dataDir, "data-dir", "", "the agent's data directory, written into the config (default: the agent's default)")
	f.BoolVar(&o.force, "force", false, "replace an existing config file")
	return cmd
}

// enroll runs edgeset-agent enroll.
func enroll(ctx context.Context, o enrollOptions, stdout io.Writer) error {
	if o.controller == "" {
		return errors.New("--controller: the controller's API URL is required")
	}
	code := o.code
	if o.codeFile != "" {
		if code != "" {
			return errors.New("--code and --code-file: give one")
		}
		b, err := os.ReadFile(o.codeFile)
		if err != nil {
			return fmt.Errorf("--code-file: %w", err)
		}
		code = string(b)
	}
	if code == "" {
		return errors.New("--code (or --code-file): the enrollment code is required")
	}
	if o.tokenFile == "" {
		o.tokenFile = filepath.Join(filepath.Dir(o.config), "token")
	}
	// The config names the token file absolutely: the agent reads it from
	// wherever it runs (systemd starts it in /).
	if o.keyFile == "" {
		o.keyFile = filepath.Join(filepath.Dir(o.config), sealing.KeyFile)
	}
	var err error
	if o.tokenFile, err = filepath.Abs(o.tokenFile); err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if o.keyFile, err = filepath.Abs(o.keyFile); err != nil {
		return fmt.Errorf("--node-key-file: %w", err)
	}
	if _, err := os.Stat(o.config); err == nil && !o.force {
		return fmt.Errorf("--config %s exists; enroll replaces it only with --force", o.config)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--config: %w", err)
	}
	hc, err := enrollHTTPClient(o.caFile)
	if err != nil {
		return err
	}
	ring, _, err := sealing.LoadOrCreateKeyFile(o.keyFile)
	if err != nil {
		return fmt.Errorf("--node-key-file: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got, err := api.NewClient(o.controller, "", hc).Enroll(ctx, api.EnrollRequest{Code: code, Node: o.node,
		PublicKey: ring.Current.Public().String()})
	if err != nil {
		return fmt.Errorf("enroll at %s: %w", o.controller, err)
	}
	if len(got.BrokerURLs) == 0 {
		return fmt.Errorf("enroll at %s: the controller gave no broker URL (set its enroll-broker-url)", o.controller)
	}
	if err := os.MkdirAll(filepath.Dir(o.tokenFile), 0o700); err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if err := atomicfile.Write(o.tokenFile, []byte(got.Token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the token: %w", err)
	}
	cfg := map[string]any{"node-name": got.Node, "broker-url": got.BrokerURLs, "token-file": o.tokenFile,
		"node-key-file": o.keyFile, "controller-url": o.controller}
	if o.caFile != "" {
		ca, err := filepath.Abs(o.caFile)
		if err != nil {
			return fmt.Errorf("--ca-file: %w", err)
		}
		cfg["controller-ca-file"] = ca
	}
	if got.TrustRoot != "" {
		cfg["trust-root"] = got.TrustRoot // the fleet root, pinned from now on
	}
	if o.dataDir != "" {
		cfg["data-dir"] = o.dataDir
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	header := fmt.Sprintf("# written by edgeset-agent enroll at %s: node %s, token fingerprint %s\n",
		time.Now().UTC().Format(time.RFC3339), got.Node, got.Fingerprint)
	if err := os.MkdirAll(filepath.Dir(o.config), 0o755); err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	if err := atomicfile.Write(o.config, append([]byte(header), out...), 0o644); err != nil {
		return fmt.Errorf("write the config: %w", err)
	}
	fmt.Fprintf(stdout, "enrolled as node %s (token fingerprint %s, sealing key %s); brokers %v\nwrote %s and %s; run: edgeset-agent --config %s\n",
		got.Node, got.Fingerprint, ring.Current.KeyID(), got.BrokerURLs, o.config, o.tokenFile, o.config)
	return nil
}

// enrollHTTPClient is the client enroll reaches the controller with:
// caFile, when given, is the only CA its HTTPS certificate may chain to.
func enrollHTTPClient(caFile string) (*http.Client, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	if caFile == "" {
		return hc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", caFile)
	}
	hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return hc, nil
}
