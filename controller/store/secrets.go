package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Secrets at rest. With Options.SecretCipher every SecretRecord is
// written encrypted: the bucket's value is
//
//	{"encrypted": {"keyId": "<the cipher's key ID>", "ciphertext": "<base64>"}}
//
// where the ciphertext holds the record's JSON, bound (as additional
// authenticated data) to its key in the bucket, so a record moved under
// another key does not decrypt. The key ID in each record lets the cipher
// hold several keys and RewrapSecrets move every record to the current
// one. A record written before encryption (the plain JSON of a
// SecretRecord) is still read, and rewritten encrypted by RewrapSecrets.
// Every other bucket is unaffected: a Secret's values are only ever in
// its record.

// SecretCipher encrypts and decrypts Secret records: the consumer's view
// of a key provider (controller/datakey). Implementations must be safe
// for concurrent use.
type SecretCipher interface {
	// KeyID names the key Encrypt uses.
	KeyID() string
	// Encrypt returns plaintext encrypted and authenticated with aad,
	// under the key KeyID names.
	Encrypt(plaintext, aad []byte) (ciphertext []byte, err error)
	// Decrypt opens what Encrypt returned under key keyID with aad.
	Decrypt(keyID string, ciphertext, aad []byte) ([]byte, error)
}

// ErrSecretKey: a Secret record is encrypted under a key the store's
// cipher does not hold (or the store has none).
var ErrSecretKey = errors.New("secret record encrypted under an unknown key")

// encryptedRecord is the stored form of an encrypted Secret record.
type encryptedRecord struct {
	Encrypted *encryptedValue `json:"encrypted"`
}

type encryptedValue struct {
	KeyID      string `json:"keyId"`
	Ciphertext []byte `json:"ciphertext"`
}

// encryptedPrefix starts every encrypted record as encoding/json writes it.
var encryptedPrefix = []byte(`{"encrypted":`)

// secretAAD binds a record's ciphertext to its key in the bucket.
func secretAAD(key string) []byte { return []byte("edgeset store secret\x00" + key) }

// secretCodec reads and writes the secrets bucket through the cipher.
type secretCodec struct{ cipher SecretCipher }

// encode returns what the bucket holds for rec under key.
func (c secretCodec) encode(key string, rec SecretRecord) ([]byte, error) {
	plain, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode %s/%s: %w", bucketSecrets, key, err)
	}
	if c.cipher == nil {
		return plain, nil
	}
	ct, err := c.cipher.Encrypt(plain, secretAAD(key))
	if err != nil {
		return nil, fmt.Errorf("encrypt %s/%s: %w", bucketSecrets, key, err)
	}
	return json.Marshal(encryptedRecord{Encrypted: &encryptedValue{KeyID: c.cipher.KeyID(), Ciphertext: ct}})
}

// decode reads a bucket value; keyID is the key it was encrypted under,
// "" for a record written in the clear.
func (c secretCodec) decode(key string, data []byte) (rec SecretRecord, keyID string, err error) {
	plain := data
	if bytes.HasPrefix(data, encryptedPrefix) {
		var enc encryptedRecord
		if err := json.Unmarshal(data, &enc); err != nil || enc.Encrypted == nil {
			return rec, "", fmt.Errorf("decode %s/%s: malformed encrypted record", bucketSecrets, key)
		}
		keyID = enc.Encrypted.KeyID
		if c.cipher == nil {
			return rec, keyID, fmt.Errorf("%s/%s: %w %q: the controller has no secret encryption key (secret-encryption-key-file)",
				bucketSecrets, key, ErrSecretKey, keyID)
		}
		if plain, err = c.cipher.Decrypt(keyID, enc.Encrypted.Ciphertext, secretAAD(key)); err != nil {
			return rec, keyID, fmt.Errorf("%s/%s: %w", bucketSecrets, key, err)
		}
	}
	if err := json.Unmarshal(plain, &rec); err != nil {
		return rec, keyID, fmt.Errorf("decode %s/%s: %w", bucketSecrets, key, err)
	}
	return rec, keyID, nil
}

// get is getJSON for a Secret record.
func (c secretCodec) get(tx *boltTx, key string) (rec SecretRecord, found bool, err error) {
	b, err := bucket(tx, bucketSecrets)
	if err != nil {
		return rec, false, err
	}
	data := b.Get([]byte(key))
	if data == nil {
		return rec, false, nil
	}
	rec, _, err = c.decode(key, data)
	return rec, true, err
}

// put is putJSON for a Secret record.
func (c secretCodec) put(tx *boltTx, key string, rec SecretRecord) error {
	data, err := c.encode(key, rec)
	if err != nil {
		return err
	}
	b, err := bucket(tx, bucketSecrets)
	if err != nil {
		return err
	}
	if err := b.Put([]byte(key), data); err != nil {
		return fmt.Errorf("write %s/%s: %w", bucketSecrets, key, err)
	}
	return nil
}

// list is listJSON for the Secret records.
func (c secretCodec) list(tx *boltTx) ([]SecretRecord, error) {
	b, err := bucket(tx, bucketSecrets)
	if err != nil {
		return nil, err
	}
	var out []SecretRecord
	err = b.ForEach(func(k, data []byte) error {
		if data == nil {
			return nil
		}
		rec, _, err := c.decode(string(k), data)
		out = append(out, rec)
		return err
	})
	return out, err
}

// RewrapSecrets rewrites, in one transaction, every Secret record not
// encrypted under the cipher's current key: those written before
// encryption, and those under a key being retired. It returns how many
// it rewrote. Without a cipher it does nothing. A record under a key the
// cipher does not hold fails the whole call, naming it.
func (s *Store) RewrapSecrets() (n int, err error) {
	c := secretCodec{cipher: s.secrets}
	if c.cipher == nil {
		return 0, nil
	}
	err = s.update(func(tx *boltTx) error {
		n = 0
		b, err := bucket(tx, bucketSecrets)
		if err != nil {
			return err
		}
		var stale []SecretRecord
		var keys []string
		err = b.ForEach(func(k, data []byte) error {
			rec, keyID, err := c.decode(string(k), data)
			if err == nil && keyID != c.cipher.KeyID() {
				stale, keys = append(stale, rec), append(keys, string(k))
			}
			return err
		})
		if err != nil {
			return err
		}
		for i, rec := range stale {
			if err := c.put(tx, keys[i], rec); err != nil {
				return err
			}
		}
		if n = len(stale); n == 0 {
			return errNoWrite
		}
		return nil
	})
	return n, s.wrap(err, "rewrap secrets")
}
