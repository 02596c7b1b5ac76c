package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/schema"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// newTestCA creates a self-signed CA.
func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf certificate for cn (a server certificate for 127.0.0.1
// when server is set, else a client certificate).
func (ca *testCA) issue(t *testing.T, cn string, server bool) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// newKey returns a new P-256 key.
func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// writePEM writes cert and key as PEM files in dir and returns their paths.
func writePEM(t *testing.T, dir string, cert tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	write := func(path, typ string, der []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(certFile, "CERTIFICATE", cert.Certificate[0])
	write(keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, "edgeset test CA")
	rogue := newTestCA(t, "rogue CA")
	certFile, keyFile := writePEM(t, dir, ca.issue(t, "broker", true))
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	tb := startBroker(t, Options{TLSAddr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile})
	if tb.Addr() != nil {
		t.Fatalf("plain listener %v enabled although only TLSAddr was set", tb.Addr())
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	withCert := func(c client, certs ...tls.Certificate) client {
		c.tls = &tls.Config{RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS12}
		return c
	}
	nodeCert := ca.issue(t, "node-a", false)
	tests := []struct {
		name string
		c    client
		ok   bool
	}{
		{"valid cert, no username or password", withCert(client{id: "node-a"}, nodeCert), true},
		{"valid cert, username equal to CN", withCert(client{id: "node-a", user: "node-a"}, nodeCert), true},
		{"valid cert, other username", withCert(tb.node("node-b"), nodeCert), false},
		{"no cert, valid token", withCert(tb.node("node-a")), false},
		{"cert of a rogue CA", withCert(client{id: "node-a"}, rogue.issue(t, "node-a", false)), false},
		{"controller CN without token", withCert(client{id: "c"}, ca.issue(t, credential.ControllerUsername, false)), false},
		{"controller CN with token", withCert(tb.controller(), ca.issue(t, credential.ControllerUsername, false)), true},
		{"CN not a node name", withCert(client{id: "Bad/Name"}, ca.issue(t, "Bad/Name", false)), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := dial(t, tb.TLSAddr(), tc.c)
			if tc.ok && err != nil {
				t.Fatalf("connect refused: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("connect accepted")
			}
			if cl != nil {
				cl.Disconnect(0)
			}
		})
	}

	// The certificate's identity is subject to the ACL like a token's.
	a := mustDial(t, tb.TLSAddr(), withCert(client{id: "node-a"}, nodeCert))
	var in inbox
	if code := subscribe(t, a, schema.NodeTopic("node-b", schema.TopicDesired), &in); code != suback80 {
		t.Errorf("cert node-a subscribing node-b desired: SUBACK %#x, want %#x", code, suback80)
	}
	if code := subscribe(t, a, schema.NodeTopic("node-a", schema.TopicDesired), &in); code != 1 {
		t.Errorf("cert node-a subscribing own desired: SUBACK %#x, want 1", code)
	}
}
