package natsauth

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Defaults of Options, applied by withDefaults.
const (
	DefaultMaxRequestBytes = 64 << 10
	DefaultPendingRequests = 4096
	DefaultRevocationPoll  = 5 * time.Second
	DefaultLogInterval     = time.Minute
	// QueueGroup is the queue the responders of a cluster subscribe in, so
	// that each request is answered once however many run.
	QueueGroup = "edgeset-auth"
)

// Options configure a Responder. URL, User, Password, Issuer, Account and
// Secret are required.
type Options struct {
	// URL is a NATS client URL of a server of the cluster
	// (nats://127.0.0.1:4222, or several separated by commas).
	URL string
	// User and Password are one of the auth_callout auth_users: the
	// responder's own connection bypasses the callout.
	User, Password string
	// Issuer is the account key pair whose public key is the
	// auth_callout issuer; it signs the responses and the user JWTs.
	Issuer nkeys.KeyPair
	// Account is the account admitted clients are placed in (the one with
	// JetStream, where MQTT keeps its sessions and retained messages).
	Account string
	// Secret is the fleet secret the tokens derive from.
	Secret []byte
	// RevokedFile is the revocation list (DATA_DIR/revoked-tokens); empty
	// for none. It is re-read when its size or modification time changes,
	// every RevocationPoll. A revoked node is refused at its next
	// connection; see UserTTL.
	RevokedFile    string
	RevocationPoll time.Duration
	// UserTTL, when positive, is how long an admitted connection lasts:
	// nats-server closes it when its user JWT expires, and the client
	// reconnects and is checked again, so a revocation takes effect within
	// UserTTL. Zero: connections are never expired.
	UserTTL time.Duration
	// MaxRequestBytes bounds one authorization request; a larger one is
	// not answered (the server refuses the client when its auth timeout
	// ends). Default DefaultMaxRequestBytes.
	MaxRequestBytes int
	// PendingRequests bounds the requests waiting for a worker; past it
	// nats.go drops them (slow consumer) and their clients are refused at
	// the server's auth timeout. Default DefaultPendingRequests.
	PendingRequests int
	// Workers answer requests concurrently. Default GOMAXPROCS.
	Workers int
	// LogInterval bounds the refusal log lines: at most one per node (or
	// username) and interval, the next one carrying suppressed=N.
	LogInterval time.Duration
	// NATSOptions are added to the connection's options (TLS, CA).
	NATSOptions []nats.Option
	Logger      *slog.Logger
}

// withDefaults returns o with every zero limit set to its default.
func (o Options) withDefaults() Options {
	if o.RevocationPoll <= 0 {
		o.RevocationPoll = DefaultRevocationPoll
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.PendingRequests <= 0 {
		o.PendingRequests = DefaultPendingRequests
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.LogInterval <= 0 {
		o.LogInterval = DefaultLogInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// validate reports every missing or invalid required option, by name.
func (o Options) validate() error {
	var errs []error
	if o.URL == "" {
		errs = append(errs, errors.New("natsauth: Options.URL is empty"))
	}
	if o.User == "" {
		errs = append(errs, errors.New("natsauth: Options.User is empty"))
	}
	if o.Account == "" {
		errs = append(errs, errors.New("natsauth: Options.Account is empty"))
	}
	if len(o.Secret) == 0 {
		errs = append(errs, errors.New("natsauth: Options.Secret is empty"))
	}
	if o.UserTTL < 0 {
		errs = append(errs, fmt.Errorf("natsauth: Options.UserTTL %s is negative", o.UserTTL))
	}
	if err := validIssuer(o.Issuer); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validIssuer checks that kp is an account key pair with its private key.
func validIssuer(kp nkeys.KeyPair) error {
	if kp == nil {
		return errors.New("natsauth: Options.Issuer is nil")
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return fmt.Errorf("natsauth: Options.Issuer: %w", err)
	}
	if !nkeys.IsValidPublicAccountKey(pub) {
		return fmt.Errorf("natsauth: Options.Issuer %s is not an account key", pub)
	}
	if _, err := kp.Seed(); err != nil {
		return fmt.Errorf("natsauth: Options.Issuer has no private key: %w", err)
	}
	return nil
}
