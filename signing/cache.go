package signing

import (
	"crypto/ed25519"
	"crypto/sha256"
	"sync"
)

// SignatureCache remembers Ed25519 signatures that verified, so that
// receivers sharing it verify each signature once: the simulator's
// thousands of devices in one process, which all receive the same
// revision and, four by four, the same batch signature (batch.go). A
// device on its own CPU verifies its few documents itself and has no use
// for one.
//
// Only verifications that succeeded are kept, each under the SHA-256 of
// the public key, the signed message and the signature together, so a hit
// means ed25519.Verify returned true for exactly these bytes; what a
// document is checked against besides its signature (key revocation and
// expiry, topic, node, generation, expiry) is checked on every document,
// hit or not. The cache holds at most its size: when full, it forgets an
// arbitrary entry for each new one. Safe for concurrent use.
type SignatureCache struct {
	max int

	mu       sync.Mutex
	verified map[[sha256.Size]byte]struct{}
	hits     uint64
	misses   uint64
}

// NewSignatureCache returns a cache of at most size signatures (at least
// one).
func NewSignatureCache(size int) *SignatureCache {
	size = max(size, 1)
	return &SignatureCache{max: size, verified: make(map[[sha256.Size]byte]struct{}, min(size, 1024))}
}

// verify is ed25519.Verify(pub, msg, sig), answered from c when c has
// seen it succeed. A nil c verifies every time.
func (c *SignatureCache) verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if c == nil || len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return ed25519.Verify(pub, msg, sig)
	}
	k := cacheKey(pub, msg, sig)
	c.mu.Lock()
	_, hit := c.verified[k]
	if hit {
		c.hits++
	} else {
		c.misses++
	}
	c.mu.Unlock()
	if hit {
		return true
	}
	if !ed25519.Verify(pub, msg, sig) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.verified) >= c.max {
		for old := range c.verified { // map iteration starts at random
			delete(c.verified, old)
			break
		}
	}
	c.verified[k] = struct{}{}
	return true
}

// Stats returns how many verifications c answered from memory (hits) and
// how many it computed (misses), and how many signatures it holds.
func (c *SignatureCache) Stats() (hits, misses uint64, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses, len(c.verified)
}

// cacheKey binds the public key, the message and the signature: the key
// and the signature are of fixed sizes and the message is hashed first, so
// no two triples share a key.
func cacheKey(pub ed25519.PublicKey, msg, sig []byte) [sha256.Size]byte {
	m := sha256.Sum256(msg)
	h := sha256.New()
	h.Write(pub)
	h.Write(m[:])
	h.Write(sig)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}
