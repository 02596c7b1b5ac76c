package ha

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/atomicfile"
)

// Keys of the shared secrets, under Options.Prefix.
const (
	apiTokenKey    = "/secrets/api-token"
	fleetSecretKey = "/secrets/fleet-secret"
)

// Sizes the shared secrets must have, as the single-node controller
// checks its files.
const (
	minTokenLen    = 16
	minSecretBytes = 32
)

// sharedSecrets are what every controller of one fleet must hold alike:
// the API token (clients may talk to any controller) and the fleet
// secret (node tokens, the controller's broker password, the NATS
// callout all derive from it).
type sharedSecrets struct {
	token string
	fleet []byte
}

// ensureSecrets makes the fleet's shared secrets exist in etcd and in
// dataDir, where the controller reads them (admin.token, fleet.secret).
// The first controller creates them with one create-if-absent
// transaction, from the files of its data directory when they exist (a
// single-node controller moving to etcd keeps its devices' tokens), else
// new random ones; every other controller reads them and overwrites its
// files with them. The values are never logged.
func ensureSecrets(ctx context.Context, kv clientv3.KV, prefix, dataDir string) (sharedSecrets, bool, error) {
	local, err := localSecrets(dataDir)
	if err != nil {
		return sharedSecrets{}, false, err
	}
	tk, sk := prefix+apiTokenKey, prefix+fleetSecretKey
	resp, err := kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(tk), "=", 0), clientv3.Compare(clientv3.CreateRevision(sk), "=", 0)).
		Then(clientv3.OpPut(tk, local.token), clientv3.OpPut(sk, hex.EncodeToString(local.fleet))).
		Else(clientv3.OpGet(tk), clientv3.OpGet(sk)).
		Commit()
	if err != nil {
		return sharedSecrets{}, false, fmt.Errorf("create or read the shared secrets %s and %s in etcd: %w", tk, sk, err)
	}
	s := local
	if !resp.Succeeded {
		if s, err = decodeSecrets(resp, tk, sk); err != nil {
			return sharedSecrets{}, false, err
		}
	}
	if err := writeSecrets(dataDir, s); err != nil {
		return sharedSecrets{}, false, err
	}
	return s, resp.Succeeded, nil
}

// localSecrets reads the data directory's token and fleet secret, or
// makes new random ones where there are none.
func localSecrets(dataDir string) (sharedSecrets, error) {
	fleet, err := credential.LoadOrCreateFleetSecret(dataDir)
	if err != nil {
		return sharedSecrets{}, err
	}
	path := tokenPath(dataDir)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return sharedSecrets{}, fmt.Errorf("generate API token: %w", err)
		}
		return sharedSecrets{token: hex.EncodeToString(raw), fleet: fleet}, nil
	case err != nil:
		return sharedSecrets{}, fmt.Errorf("read API token %s: %w", path, err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < minTokenLen {
		return sharedSecrets{}, fmt.Errorf("API token %s is shorter than %d characters; delete it to have a new one generated", path, minTokenLen)
	}
	return sharedSecrets{token: token, fleet: fleet}, nil
}

// decodeSecrets reads and checks the values of the transaction's Else
// branch: both keys exist and hold secrets of the right size.
func decodeSecrets(resp *clientv3.TxnResponse, tk, sk string) (sharedSecrets, error) {
	values := make([]string, 2)
	for i, key := range []string{tk, sk} {
		r := resp.Responses[i].GetResponseRange()
		if r == nil || len(r.Kvs) == 0 {
			return sharedSecrets{}, fmt.Errorf("shared secret %s is missing in etcd while the other exists: restore it (docs/scale-out.md)", key)
		}
		values[i] = string(r.Kvs[0].Value)
	}
	if len(values[0]) < minTokenLen {
		return sharedSecrets{}, fmt.Errorf("shared secret %s in etcd is shorter than %d characters", tk, minTokenLen)
	}
	fleet, err := hex.DecodeString(values[1])
	if err != nil || len(fleet) < minSecretBytes {
		return sharedSecrets{}, fmt.Errorf("shared secret %s in etcd: want at least %d hex-encoded bytes", sk, minSecretBytes)
	}
	return sharedSecrets{token: values[0], fleet: fleet}, nil
}

// writeSecrets writes s to the data directory's token and fleet secret
// files (mode 0600), each replaced atomically.
func writeSecrets(dataDir string, s sharedSecrets) error {
	if err := atomicfile.Write(tokenPath(dataDir), []byte(s.token+"\n"), 0o600); err != nil {
		return fmt.Errorf("write API token: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dataDir, credential.SecretFile), []byte(hex.EncodeToString(s.fleet)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write fleet secret: %w", err)
	}
	return nil
}

func tokenPath(dataDir string) string {
	cfg := controller.Config{DataDir: dataDir}
	return cfg.TokenPath()
}
