package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/cliconfig"
	"github.com/edgeset/edgeset/sealing"
)

// keySettings are the keys of the node's sealing key and its
// registration with the controller.
type keySettings struct {
	url, caFile, token string
}

// keySettings checks controller-url (image-url when unset: the same API)
// and controller-ca-file.
func (fc fileConfig) keySettings(token string) (keySettings, error) {
	u, ca := fc.ControllerURL, fc.ControllerCAFile
	if u == "" {
		if ca != "" {
			return keySettings{}, errors.New("controller-ca-file: set but controller-url is not")
		}
		u, ca = fc.ImageURL, fc.ImageCAFile
	}
	if u == "" {
		return keySettings{}, nil
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return keySettings{}, fmt.Errorf("controller-url: %q is not an http:// or https:// URL of the controller's API", u)
	}
	if token == "" {
		return keySettings{}, errors.New("controller-url: needs the node token (token or token-file): the controller authenticates the key registration with it")
	}
	return keySettings{url: u, caFile: ca, token: token}, nil
}

// checkSecretsAtRest validates secrets-at-rest.
func (fc fileConfig) checkSecretsAtRest() error {
	if fc.SecretsAtRest != edgeagent.SecretsSealed && fc.SecretsAtRest != edgeagent.SecretsInMemory {
		return fmt.Errorf("secrets-at-rest: %q is not %s or %s", fc.SecretsAtRest, edgeagent.SecretsSealed, edgeagent.SecretsInMemory)
	}
	return nil
}

// keyRegistrar returns the registration of the node's key with the
// controller at s, or nil when no controller URL is set.
func keyRegistrar(s keySettings, node string) (edgeagent.KeyRegistrar, error) {
	if s.url == "" {
		return nil, nil
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if s.caFile != "" {
		pool, err := caPool(s.caFile)
		if err != nil {
			return nil, fmt.Errorf("controller-ca-file: %w", err)
		}
		hc.Transport = &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return api.NewNodeClient(s.url, node, s.token, hc), nil
}

// caPool reads a PEM CA bundle.
func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// nodeKeyFile is the key file the agent of fc uses.
func (fc fileConfig) nodeKeyFile() string {
	if fc.NodeKeyFile != "" {
		return fc.NodeKeyFile
	}
	return filepath.Join(fc.DataDir, sealing.KeyFile)
}

// newKeyCmd is edgeset-agent key: show or rotate the node's sealing key.
func newKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Show or rotate this node's sealing key (the key its Secrets are encrypted to)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newKeySubCmd("show", "Print the node's public key (created if there is none), alone on the last line",
		`show prints the public key Secrets are sealed to, for an admin to register it
(edgesetctl node key set NODE KEY) when the agent cannot reach the controller's API.`,
		func(fc fileConfig, w io.Writer) error {
			ring, created, err := sealing.LoadOrCreateKeyFile(fc.nodeKeyFile())
			if err != nil {
				return err
			}
			if created {
				fmt.Fprintf(w, "created %s\n", fc.nodeKeyFile())
			}
			fmt.Fprintf(w, "key ID %s\n%s\n", ring.Current.KeyID(), ring.Current.Public())
			return nil
		}))
	cmd.AddCommand(newKeySubCmd("rotate", "Give the node a new sealing key (stop the agent first)",
		`rotate makes a new key, keeps the old one until the controller has the new one
(the agent registers it when it starts, proving the old one), and seals the
Secrets agent.db keeps to the new key. Stop the agent first: it holds agent.db.`,
		func(fc fileConfig, w io.Writer) error {
			node, err := nodeName(fc.NodeName, os.Hostname)
			if err != nil {
				return err
			}
			ring, err := edgeagent.RotateNodeKey(edgeagent.Config{NodeName: node, DataDir: fc.DataDir, NodeKeyFile: fc.nodeKeyFile()})
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "new key ID %s (previous %s kept until the controller has the new one)\n%s\n",
				ring.Current.KeyID(), ring.Previous.KeyID(), ring.Current.Public())
			return nil
		}))
	return cmd
}

// newKeySubCmd is one key subcommand, reading the agent's configuration
// (--config, environment, the key flags) as the agent does.
func newKeySubCmd(use, short, long string, run func(fc fileConfig, w io.Writer) error) *cobra.Command {
	v := cliconfig.New(envNames)
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc, _, err := loadConfig(v)
			if err != nil {
				return err
			}
			return run(fc, cmd.OutOrStdout())
		},
	}
	addFlags(cmd.Flags())
	cliconfig.Bind(v, cmd.Flags())
	return cmd
}
