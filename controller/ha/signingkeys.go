package ha

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/signing"
)

// Signing with HA controllers (issue 18). Every controller keeps its own
// online key in its data directory (controller.SigningKeyPath), as a
// single controller does: no private key ever leaves the machine that
// made it, nor travels through etcd. Each registers its public key under
// Prefix+"/signing/online-keys/"+ID at start; the leader lists them in
// its signing status (controller.Config.SigningPeers), and edgesetctl
// keys delegate signs one key set delegating all of them, so that agents
// accept what whichever controller leads signs. The key set itself is
// in the replicated store.

// onlineKeysKey is the prefix of the registered online keys, under
// Options.Prefix.
const onlineKeysKey = "/signing/online-keys/"

// MaxControllerKeys bounds the online keys read from etcd: a key set
// holds at most signing.MaxKeys, with room for keys being rotated.
const MaxControllerKeys = 8

// registeredKey is the value of an online-keys entry.
type registeredKey struct {
	Controller string `json:"controller"`
	KeyID      string `json:"keyID"`
	PublicKey  string `json:"publicKey"`
}

// registerSigningKey loads (or makes) the data directory's online key and
// puts its public key under this controller's ID, replacing what an
// earlier key of this controller registered.
func registerSigningKey(ctx context.Context, kv clientv3.KV, prefix, id, dataDir string) (string, error) {
	priv, err := controller.LoadOrCreateSigningKey(dataDir)
	if err != nil {
		return "", err
	}
	pub, _ := priv.Public().(ed25519.PublicKey)
	v, err := json.Marshal(registeredKey{Controller: id, KeyID: signing.KeyID(pub), PublicKey: signing.FormatPublicKey(pub)})
	if err != nil {
		return "", err
	}
	key := prefix + onlineKeysKey + id
	if _, err := kv.Put(ctx, key, string(v)); err != nil {
		return "", fmt.Errorf("register the online signing key at %s in etcd: %w", key, err)
	}
	return signing.KeyID(pub), nil
}

// signingPeers returns the controller.Config.SigningPeers that reads the
// registered online keys, in controller order, each checked: a public
// key that does not parse or whose ID does not match is an error naming
// the etcd key, never a key to delegate.
func signingPeers(kv clientv3.KV, prefix string) func(context.Context) ([]api.ControllerKey, error) {
	return func(ctx context.Context) ([]api.ControllerKey, error) {
		resp, err := kv.Get(ctx, prefix+onlineKeysKey, clientv3.WithPrefix(), clientv3.WithLimit(MaxControllerKeys+1))
		if err != nil {
			return nil, fmt.Errorf("read %s in etcd: %w", prefix+onlineKeysKey, err)
		}
		if len(resp.Kvs) > MaxControllerKeys {
			return nil, fmt.Errorf("more than %d online keys registered under %s: delete the entries of controllers that are gone (etcdctl del)",
				MaxControllerKeys, prefix+onlineKeysKey)
		}
		out := make([]api.ControllerKey, 0, len(resp.Kvs))
		for _, e := range resp.Kvs {
			k, err := decodeRegisteredKey(e.Value)
			if err != nil {
				return nil, fmt.Errorf("online key %s in etcd: %w", e.Key, err)
			}
			out = append(out, k)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Controller < out[j].Controller })
		return out, nil
	}
}

func decodeRegisteredKey(b []byte) (api.ControllerKey, error) {
	var r registeredKey
	if err := json.Unmarshal(b, &r); err != nil {
		return api.ControllerKey{}, err
	}
	pub, err := signing.ParsePublicKey(r.PublicKey)
	if err != nil {
		return api.ControllerKey{}, fmt.Errorf("publicKey: %w", err)
	}
	if id := signing.KeyID(pub); id != r.KeyID {
		return api.ControllerKey{}, fmt.Errorf("keyID %q, but the public key's ID is %s", r.KeyID, id)
	}
	return api.ControllerKey{Controller: r.Controller, KeyID: r.KeyID, PublicKey: r.PublicKey}, nil
}
