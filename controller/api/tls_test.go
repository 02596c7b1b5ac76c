package api

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns their paths and a pool trusting it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLSTracksConnections: over HTTPS (HTTP/1.1 and HTTP/2) a
// connection counts as authenticated after its first authorised request,
// so the unauthenticated cap leaves it out.
func TestServeTLSTracksConnections(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "h2"}[h2], func(t *testing.T) {
			certFile, keyFile, pool := selfSigned(t, t.TempDir())
			obs := &countingObserver{}
			b := &fakeBackend{getNode: func(name string) (Node, error) { return Node{}, nil }}
			s := New(b, Options{Token: testToken, Observer: obs,
				Limits: Limits{ReadHeaderTimeout: time.Minute, MaxUnauthenticatedConns: 1}})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.ServeTLS(ctx, ln, certFile, keyFile) }()
			defer func() { cancel(); assert.NoError(t, <-done) }()
			addr := ln.Addr().String()

			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: h2}
			defer tr.CloseIdleConnections()
			resp, err := NewClient("https://"+addr, testToken, &http.Client{Transport: tr}).GetNode(ctx, "gw-1")
			require.NoError(t, err)
			_ = resp

			idle := dialRaw(t, addr) // the one unauthenticated slot
			extra := dialRaw(t, addr)
			expectClosed(t, extra, bufio.NewReader(extra))
			assert.Equal(t, 1, obs.refusals(ConnRefusedUnauthenticated), "only the third connection is refused")
			idle.Close()
		})
	}
}
