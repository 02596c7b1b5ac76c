package ha

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
)

// TestConfigValidate: every invalid HA key is named, the advertised URL
// derives from api-addr unless it is a wildcard, and store bbolt refuses
// the etcd keys it would ignore.
func TestConfigValidate(t *testing.T) {
	ext := controller.Config{BrokerURLs: []string{"tcp://mqtt:1883"}}
	etcd := []string{"http://etcd-1:2379"}
	tests := []struct {
		name    string
		ctl     controller.Config
		cfg     Config
		want    []string // substrings of the error; none: valid
		wantURL string
	}{
		{name: "bbolt default", cfg: Config{}},
		{name: "bbolt with etcd keys", cfg: Config{EtcdEndpoints: etcd, AdvertiseURL: "http://a:1"},
			want: []string{"etcd-endpoints: set, but store is bbolt", "advertise-url: set, but store is bbolt"}},
		{name: "unknown store", cfg: Config{Store: "consul"}, want: []string{`store: "consul": want bbolt or etcd`}},
		{name: "etcd", ctl: ext, cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1"}, wantURL: "http://127.0.0.1:8080"},
		{name: "etcd over TLS API", ctl: controller.Config{BrokerURLs: ext.BrokerURLs, APIAddr: "ctl-1:8443", APITLSCert: "c", APITLSKey: "k"},
			cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1"}, wantURL: "https://ctl-1:8443"},
		{name: "embedded broker", cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1"},
			want: []string{"broker-url: required with store etcd"}},
		{name: "no endpoints", ctl: ext, cfg: Config{Store: StoreEtcd, ControllerID: "c1"}, want: []string{"etcd-endpoints: required"}},
		{name: "bad endpoint", ctl: ext, cfg: Config{Store: StoreEtcd, EtcdEndpoints: []string{"http://a:2379", "etcd-2"}, ControllerID: "c1"},
			want: []string{`etcd-endpoints[1]: "etcd-2" is not a URL`}},
		{name: "too many endpoints", ctl: ext, cfg: Config{Store: StoreEtcd, EtcdEndpoints: make([]string, MaxEtcdEndpoints+1), ControllerID: "c1"},
			want: []string{"etcd-endpoints: 17 endpoints, at most 16"}},
		{name: "wildcard api-addr", ctl: controller.Config{BrokerURLs: ext.BrokerURLs, APIAddr: "0.0.0.0:8080"},
			cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1"}, want: []string{"advertise-url: required: api-addr 0.0.0.0:8080 listens on every address"}},
		{name: "empty host api-addr", ctl: controller.Config{BrokerURLs: ext.BrokerURLs, APIAddr: ":8080"},
			cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1"}, want: []string{"advertise-url: required"}},
		{name: "given advertise-url", ctl: controller.Config{BrokerURLs: ext.BrokerURLs, APIAddr: "[::]:8080"},
			cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1", AdvertiseURL: "http://ctl-1:8080"}, wantURL: "http://ctl-1:8080"},
		{name: "bad advertise-url", ctl: ext, cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1", AdvertiseURL: "ctl-1:8080"},
			want: []string{`advertise-url: "ctl-1:8080" is not a URL`}},
		{name: "bad id", ctl: ext, cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "a/b"}, want: []string{`controller-id: "a/b"`}},
		{name: "short lease", ctl: ext, cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1", LeaderLeaseTTL: 500 * time.Millisecond},
			want: []string{"leader-lease-ttl: must be at least 1s"}},
		{name: "cert without key", ctl: ext, cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1", EtcdCert: "c.pem"},
			want: []string{"etcd-cert: etcd-cert and etcd-key go together"}},
		{name: "bad prefix", ctl: ext, cfg: Config{Store: StoreEtcd, EtcdEndpoints: etcd, ControllerID: "c1", EtcdPrefix: "edgeset"},
			want: []string{`etcd-prefix: "edgeset"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.ctl.ApplyDefaults()
			tc.cfg.ApplyDefaults(tc.ctl)
			err := tc.cfg.Validate(tc.ctl)
			if len(tc.want) == 0 {
				require.NoError(t, err)
				assert.Equal(t, tc.wantURL, tc.cfg.AdvertiseURL)
				return
			}
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Len(t, strings.Split(err.Error(), "\n"), len(tc.want), "one line per problem: %v", err)
		})
	}
}

// TestConfigDefaults: the documented defaults, the host name as the id.
func TestConfigDefaults(t *testing.T) {
	ctl := controller.Config{}
	ctl.ApplyDefaults()
	c := Config{Store: StoreEtcd, EtcdPrefix: "/fleet-a/"}
	c.ApplyDefaults(ctl)
	assert.Equal(t, "/fleet-a", c.EtcdPrefix, "a trailing slash is dropped")
	assert.NotEmpty(t, c.ControllerID)
	assert.Equal(t, 10*time.Second, c.LeaderLeaseTTL)
	b := Config{}
	b.ApplyDefaults(ctl)
	assert.Equal(t, Config{Store: StoreBolt, EtcdPrefix: DefaultPrefix, LeaderLeaseTTL: 10 * time.Second}, b)
}

// TestEtcdTLSFiles: the etcd TLS files load into the client's TLS
// configuration, and a bad one is an error naming its key.
func TestEtcdTLSFiles(t *testing.T) {
	dir := t.TempDir()
	caPEM, certPEM, keyPEM := selfSigned(t)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	ca, cert, key := write("ca.pem", caPEM), write("cert.pem", certPEM), write("key.pem", keyPEM)
	garbage := write("garbage.pem", []byte("not a certificate"))

	c := Config{Store: StoreEtcd, EtcdEndpoints: []string{"https://etcd-1:2379"}, EtcdCACert: ca, EtcdCert: cert, EtcdKey: key}
	tc, err := c.tlsConfig()
	require.NoError(t, err)
	assert.NotNil(t, tc.RootCAs)
	assert.Len(t, tc.Certificates, 1)
	cli, err := c.NewClient()
	require.NoError(t, err, "the client dials lazily")
	require.NoError(t, cli.Close())

	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "missing CA", cfg: Config{EtcdCACert: filepath.Join(dir, "none.pem")}, want: "etcd-cacert: "},
		{name: "garbage CA", cfg: Config{EtcdCACert: garbage}, want: "etcd-cacert: " + garbage + " holds no PEM certificate"},
		{name: "key of another file", cfg: Config{EtcdCert: cert, EtcdKey: garbage}, want: "etcd-cert and etcd-key: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.tlsConfig()
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// selfSigned returns a self-signed certificate (as CA and as client
// certificate) and its key, PEM-encoded.
func selfSigned(t *testing.T) (ca, cert, key []byte) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edgeset-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	cert = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return cert, cert, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
