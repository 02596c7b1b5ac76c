package edgeagent

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// dockerConfigJSON is the content of a kubernetes.io/dockerconfigjson
// Secret's .dockerconfigjson key.
type dockerConfigJSON struct {
	Auths map[string]dockerConfigEntry `json:"auths"`
}

type dockerConfigEntry struct {
	Auth     string `json:"auth,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// pullAuthFor picks the credential for image from the template's
// imagePullSecrets: among the entries whose registry matches the image's
// (docker.io and its aliases being one registry), the one with the
// longest matching path, first secret first. Missing or unreadable
// secrets are skipped, as the kubelet only warns about them. nil means the
// device's own credentials.
func pullAuthFor(image string, refs []schema.LocalObjectReference, secrets map[string]schema.Secret) *RegistryAuth {
	host, repo := imageRegistry(image)
	var best *RegistryAuth
	bestLen := -1
	for _, ref := range refs {
		s, ok := secrets[ref.Name]
		if !ok || s.Type != schema.SecretTypeDockerConfigJSON {
			continue
		}
		var cfg dockerConfigJSON
		if json.Unmarshal(s.Data[schema.DockerConfigJSONKey], &cfg) != nil {
			continue
		}
		for _, key := range sortedKeys(cfg.Auths) {
			n, ok := matchRegistryKey(key, host, repo)
			if !ok || n <= bestLen {
				continue
			}
			if auth, ok := cfg.Auths[key].credential(key); ok {
				best, bestLen = auth, n
			}
		}
	}
	return best
}

func (e dockerConfigEntry) credential(server string) (*RegistryAuth, bool) {
	user, pass := e.Username, e.Password
	if e.Auth != "" {
		b, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return nil, false
		}
		u, p, ok := strings.Cut(string(b), ":")
		if !ok {
			return nil, false
		}
		user, pass = u, p
	}
	if user == "" && pass == "" {
		return nil, false
	}
	return &RegistryAuth{Username: user, Password: pass, Server: server}, true
}

// imageRegistry splits an image reference into its registry host
// (docker.io when the first component is no host) and repository path.
func imageRegistry(image string) (host, repo string) {
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	first, rest, found := strings.Cut(name, "/")
	if !found {
		return "docker.io", "library/" + name
	}
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io", name
	}
	return canonicalRegistry(first), rest
}

// canonicalRegistry folds Docker Hub's aliases into docker.io.
func canonicalRegistry(host string) string {
	switch host {
	case "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com":
		return "docker.io"
	}
	return host
}

// matchRegistryKey reports whether a dockerconfig key (a host, optionally
// with scheme, path, or the legacy "/v1/" suffix) covers host/repo, and
// how long its matching path is.
func matchRegistryKey(key, host, repo string) (int, bool) {
	k := key
	if i := strings.Index(k, "://"); i >= 0 {
		k = k[i+3:]
	}
	kh, kpath, _ := strings.Cut(k, "/")
	kpath = strings.Trim(kpath, "/")
	if kpath == "v1" || kpath == "v2" {
		kpath = ""
	}
	if canonicalRegistry(kh) != host {
		return 0, false
	}
	if kpath == "" {
		return 0, true
	}
	if repo == kpath || strings.HasPrefix(repo, kpath+"/") {
		return len(kpath), true
	}
	return 0, false
}
