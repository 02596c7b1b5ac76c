package scale

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// The test binary runs a controller host instead of the tests when
// envHostBroker is set: against that broker (a comma-separated list),
// with the password file in envHostPassword, serving the auth callout of
// a NATS cluster when envHostNATSAuthURLs is set, on the data directory
// given as its last argument.
const (
	envHostBroker         = "EDGESET_SCALE_HOST_BROKER_URL"
	envHostPassword       = "EDGESET_SCALE_HOST_PASSWORD_FILE"
	envHostNATSAuthURLs   = "EDGESET_SCALE_HOST_NATS_AUTH_URLS"
	envHostNATSAuthPWFile = "EDGESET_SCALE_HOST_NATS_AUTH_PASSWORD_FILE"
	envHostNATSAuthSeed   = "EDGESET_SCALE_HOST_NATS_AUTH_SEED_FILE"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envHostBroker); url != "" {
		os.Exit(runHost(url))
	}
	os.Exit(m.Run())
}

// runHost serves Host until its stdin closes (the benchmark is done).
func runHost(brokerURL string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	opts := HostOptions{BrokerURL: brokerURL, BrokerPasswordFile: os.Getenv(envHostPassword)}
	if urls := os.Getenv(envHostNATSAuthURLs); urls != "" {
		opts.NATSAuth = NATSAuth{URLs: strings.Split(urls, ","),
			PasswordFile: os.Getenv(envHostNATSAuthPWFile), SeedFile: os.Getenv(envHostNATSAuthSeed)}
	}
	if err := Host(ctx, os.Args[len(os.Args)-1], opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "controller host:", err)
		return 1
	}
	return 0
}
