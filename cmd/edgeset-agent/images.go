package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/imagefetch"
)

// imageSettings are the keys of image fetches from the controller.
type imageSettings struct {
	url, caFile, token string
}

// imageSettings checks image-url and image-ca-file.
func (fc fileConfig) imageSettings(token string) (imageSettings, error) {
	if fc.ImageURL == "" {
		if fc.ImageCAFile != "" {
			return imageSettings{}, errors.New("image-ca-file: set but image-url is not")
		}
		return imageSettings{}, nil
	}
	u, err := url.Parse(fc.ImageURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return imageSettings{}, fmt.Errorf("image-url: %q is not an http:// or https:// URL of the controller's API", fc.ImageURL)
	}
	if token == "" {
		return imageSettings{}, errors.New("image-url: needs the node token (token or token-file): the controller authenticates image fetches with it")
	}
	return imageSettings{url: fc.ImageURL, caFile: fc.ImageCAFile, token: token}, nil
}

// imageFetcher returns the fetcher of s for node, loading through rt, or
// nil when image-url is not set or rt loads no images (the fake runtime,
// which pulls every image itself: image-url then serves only the agent's
// own upgrades).
func imageFetcher(s imageSettings, node, dataDir string, rt edgeagent.Runtime) (edgeagent.ImageFetcher, error) {
	if s.url == "" {
		return nil, nil
	}
	loader, ok := rt.(imagefetch.Loader)
	if !ok {
		return nil, nil
	}
	client, err := imageClient(s)
	if err != nil {
		return nil, err
	}
	return imagefetch.New(imagefetch.Options{
		URL: s.url, Node: node, Token: s.token, Dir: filepath.Join(dataDir, "images"),
		Loader: loader, Client: client,
	})
}

// imageClient is the HTTP client of fetches from the controller: its TLS
// verified with image-ca-file when set.
func imageClient(s imageSettings) (*http.Client, error) {
	client := &http.Client{}
	if s.caFile != "" {
		pem, err := os.ReadFile(s.caFile)
		if err != nil {
			return nil, fmt.Errorf("image-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("image-ca-file: %s holds no PEM certificate", s.caFile)
		}
		client.Transport = &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return client, nil
}
