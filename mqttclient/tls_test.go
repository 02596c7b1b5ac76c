package mqttclient

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"

	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/internal/mochistop"
)

// testPKI is a throwaway CA and a server certificate for 127.0.0.1.
type testPKI struct {
	caFile string
	server tls.Certificate
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	caKey := mustKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "edgeset test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey := mustKey(t)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return testPKI{caFile: caFile, server: tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// startMochiTLS starts an in-process broker with a TLS listener.
func startMochiTLS(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	srv := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	ln := listeners.NewTCP(listeners.Config{ID: "tls", Address: "127.0.0.1:0",
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	if err := srv.AddListener(ln); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mochistop.Close(srv, "tls") })
	return "ssl://" + ln.Address()
}

func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	url := startMochiTLS(t, pki.server)

	t.Run("trusted CA file connects", func(t *testing.T) {
		rec := newRecorder()
		opts := testOptions(url, "tls-ok")
		opts.CAFile = pki.caFile
		opts.Handler = rec.handle
		opts.Subscriptions = []Subscription{{Filter: "edgeset/v1/revisions/#", QoS: 1}}
		c := newClient(t, opts)
		startConnected(t, c)
		publishUntilReceived(t, c, rec, "edgeset/v1/revisions/r", "x")
	})
	t.Run("unknown CA never connects", func(t *testing.T) {
		c := newClient(t, testOptions(url, "tls-untrusted")) // system roots only
		start(t, c)
		checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
			if st := c.Stats(); st.ConnectFailures < 2 || st.Connects != 0 {
				return errors.New("want repeated connect failures and no connection")
			}
			return nil
		})
	})
}
