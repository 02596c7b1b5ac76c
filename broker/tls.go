package broker

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// serverTLS returns the TLS configuration of the TLS listener (requiring
// client certificates when ClientCAFile is set) and of the WebSocket
// listener (never requiring them), or nil, nil when CertFile is unset.
func serverTLS(o Options) (tlsLn, ws *tls.Config, err error) {
	if o.CertFile == "" && o.KeyFile == "" {
		if o.TLSAddr != "" || o.ClientCAFile != "" {
			return nil, nil, fmt.Errorf("TLS listener or client CA without cert and key files: %w", ErrTLSIncomplete)
		}
		return nil, nil, nil
	}
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, nil, fmt.Errorf("cert file %q and key file %q must both be set: %w", o.CertFile, o.KeyFile, ErrTLSIncomplete)
	}
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("load TLS key pair %s, %s: %w", o.CertFile, o.KeyFile, err)
	}
	ws = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	tlsLn = ws.Clone()
	if o.ClientCAFile != "" {
		pool, err := loadCAPool(o.ClientCAFile)
		if err != nil {
			return nil, nil, err
		}
		tlsLn.ClientCAs = pool
		tlsLn.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tlsLn, ws, nil
}

// loadCAPool reads PEM CA certificates from path.
func loadCAPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read client CA file %s: %w", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("client CA file %s: no PEM certificate: %w", path, ErrTLSIncomplete)
	}
	return pool, nil
}

// peerCommonName returns the CommonName of the verified client certificate
// of conn, or "" when conn is not a TLS connection with a verified client
// certificate.
func peerCommonName(conn net.Conn) string {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return ""
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return ""
	}
	return st.PeerCertificates[0].Subject.CommonName
}
