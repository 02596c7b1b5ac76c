package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/edgeset/edgeset/broker/natsauth"
	"github.com/edgeset/edgeset/credential"
)

// openNATSAuth prepares the NATS cluster's auth callout responder when
// nats-auth-url is set (nil otherwise): the devices on the cluster's MQTT
// listeners are admitted with their node tokens, as the embedded broker
// admits them. Every file is read now, so a bad one fails the start.
func (c *Controller) openNATSAuth() (*natsauth.Responder, error) {
	cfg := c.cfg
	if len(cfg.NATSAuthURLs) == 0 {
		return nil, nil
	}
	password, err := readSecretFile("nats-auth-password-file", cfg.NATSAuthPasswordFile)
	if err != nil {
		return nil, err
	}
	seed, err := readSecretFile("nats-auth-issuer-seed-file", cfg.NATSAuthIssuerSeedFile)
	if err != nil {
		return nil, err
	}
	issuer, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		return nil, fmt.Errorf("nats-auth-issuer-seed-file %s: not an nkey seed: %w", cfg.NATSAuthIssuerSeedFile, err)
	}
	secret, err := credential.LoadOrCreateFleetSecret(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	ttl := max(cfg.NATSAuthUserTTL, 0)
	r, err := natsauth.New(natsauth.Options{
		URL: strings.Join(cfg.NATSAuthURLs, ","), User: cfg.NATSAuthUser, Password: password,
		Issuer: issuer, Account: cfg.NATSAuthAccount, Secret: secret,
		RevokedFile: filepath.Join(cfg.DataDir, credential.RevokedFile), UserTTL: ttl,
		Logger: c.log,
	})
	if err != nil {
		return nil, fmt.Errorf("nats-auth: %w", err)
	}
	if err := r.Register(c.metrics.reg); err != nil {
		return nil, fmt.Errorf("nats-auth metrics: %w", err)
	}
	return r, nil
}

// readSecretFile reads a file holding one secret (a password, a seed),
// trimmed; key names the config key in errors.
func readSecretFile(key, path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	v := strings.TrimSpace(string(data))
	if v == "" {
		return "", fmt.Errorf("%s %s: empty", key, path)
	}
	return v, nil
}
