// Package enrollment makes and checks the one-time codes that admit a
// device to the fleet without a shell on the controller: an operator
// creates a code (edgesetctl enrollment create), the device presents it
// once (edgeset-agent enroll), and the controller answers with the
// device's node name, its MQTT credential and the broker URLs.
//
// A code is "esn1_" + an ID + "_" + a secret. The ID names the record
// (it is listed, and revoked by it); the secret, 160 random bits, is kept
// only as its SHA-256, so neither the store nor a backup of it can be used
// to enroll. A code is bound to one node name, or admits a number of
// devices that name themselves (within a prefix), and it expires. The
// checks are pure: the controller runs Claim inside the store transaction
// that records the use, so two devices racing for a code's last use
// cannot both have it.
package enrollment

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

const (
	// codePrefix starts every code, so a code pasted where a token is
	// expected (or the reverse) is recognised.
	codePrefix  = "esn1_"
	idBytes     = 5  // 8 base32 characters
	secretBytes = 20 // 160 bits, 32 base32 characters

	// DefaultTTL is a code's lifetime when the operator gives none.
	DefaultTTL = 24 * time.Hour
	// MaxTTL bounds a code's lifetime: a code is a password that admits
	// devices, not a standing credential.
	MaxTTL = 30 * 24 * time.Hour
	// MaxUses bounds the devices one code admits.
	MaxUses = 10000
	// MaxCodes bounds the codes the controller holds, used up and expired
	// ones included until they are deleted or pruned (Prunable).
	MaxCodes = 1000
	// MaxLabels bounds the labels a code sets on its nodes.
	MaxLabels = 64
	// MaxDescription bounds the operator's note, in bytes.
	MaxDescription = 256
	// KeepExpired is how long a code stays listed after it expired or was
	// used up, so an operator sees what it enrolled.
	KeepExpired = 7 * 24 * time.Hour
)

var encoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// ErrRefused is a code that does not admit the device: unknown, wrong,
// expired or used up. The message says which only once the secret
// matched, so it tells nothing to whoever guesses.
var ErrRefused = errors.New("enrollment refused")

// Spec is what an operator asks a code to be.
type Spec struct {
	// Node binds the code to one node name; empty for a code that admits
	// Uses devices naming themselves.
	Node string `json:"node,omitempty"`
	// NamePrefix, without Node, is the prefix the names it admits must have.
	NamePrefix string `json:"namePrefix,omitempty"`
	// Uses is how many devices the code admits: 1 with Node (the
	// default), at most MaxUses without.
	Uses int `json:"uses,omitempty"`
	// TTL is the code's lifetime (DefaultTTL when zero, at most MaxTTL).
	TTL time.Duration `json:"ttl,omitempty"`
	// Labels are set on every node the code admits.
	Labels      map[string]string `json:"labels,omitempty"`
	Description string            `json:"description,omitempty"`
}

// Validate reports the first problem of s, naming its field, after
// filling the defaults it leaves out (Uses, TTL).
func (s *Spec) Validate() error {
	if s.Uses == 0 {
		s.Uses = 1
	}
	if s.TTL == 0 {
		s.TTL = DefaultTTL
	}
	switch {
	case s.Node != "" && schema.NodeNameProblem(s.Node) != "":
		return fmt.Errorf("node: %s", schema.NodeNameProblem(s.Node))
	case s.Node != "" && s.NamePrefix != "":
		return errors.New("namePrefix: a code bound to one node (node) admits no other name")
	case s.Node != "" && s.Uses != 1:
		return fmt.Errorf("uses: a code bound to one node admits it once, got %d", s.Uses)
	case s.Uses < 1 || s.Uses > MaxUses:
		return fmt.Errorf("uses: must be 1 to %d, got %d", MaxUses, s.Uses)
	case s.TTL < time.Minute || s.TTL > MaxTTL:
		return fmt.Errorf("ttl: must be 1m to %s, got %s", MaxTTL, s.TTL)
	case len(s.Labels) > MaxLabels:
		return fmt.Errorf("labels: at most %d, got %d", MaxLabels, len(s.Labels))
	case len(s.Description) > MaxDescription:
		return fmt.Errorf("description: at most %d bytes, got %d", MaxDescription, len(s.Description))
	}
	if s.NamePrefix != "" && schema.NodeNameProblem(s.NamePrefix+"x") != "" {
		return fmt.Errorf("namePrefix: %q cannot start a node name: %s", s.NamePrefix, schema.NodeNameProblem(s.NamePrefix+"x"))
	}
	for _, k := range sortedKeys(s.Labels) {
		if p := schema.LabelKeyProblem(k); p != "" {
			return fmt.Errorf("labels: key %q: %s", k, p)
		}
		if p := schema.LabelValueProblem(s.Labels[k]); p != "" {
			return fmt.Errorf("labels[%s]: %s", k, p)
		}
	}
	return nil
}

// New makes a code for spec (validated: Validate) at now, from random,
// and the record to store: the code itself is returned once, never
// stored.
func New(spec Spec, createdBy string, now time.Time, random io.Reader) (code string, rec store.EnrollmentRecord, err error) {
	if err := spec.Validate(); err != nil {
		return "", rec, err
	}
	b := make([]byte, idBytes+secretBytes)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", rec, fmt.Errorf("make enrollment code: %w", err)
	}
	id, secret := strings.ToLower(encoding.EncodeToString(b[:idBytes])), b[idBytes:]
	sum := sha256.Sum256(secret)
	rec = store.EnrollmentRecord{
		ID: id, SecretHash: sum[:], Node: spec.Node, NamePrefix: spec.NamePrefix, Labels: spec.Labels,
		Uses: spec.Uses, Description: spec.Description, CreatedBy: createdBy,
		CreatedAt: now, ExpiresAt: now.Add(spec.TTL),
	}
	return codePrefix + id + "_" + strings.ToLower(encoding.EncodeToString(secret)), rec, nil
}

// Parse splits code into its ID and secret.
func Parse(code string) (id string, secret []byte, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(code), codePrefix)
	idPart, secretPart, ok2 := strings.Cut(rest, "_")
	if !ok || !ok2 {
		return "", nil, fmt.Errorf("%w: not an enrollment code (they start with %q)", ErrRefused, codePrefix)
	}
	if len(idPart) != encoding.EncodedLen(idBytes) || len(secretPart) != encoding.EncodedLen(secretBytes) {
		return "", nil, fmt.Errorf("%w: malformed enrollment code", ErrRefused)
	}
	raw, err := encoding.DecodeString(strings.ToUpper(secretPart))
	idRaw, idErr := encoding.DecodeString(strings.ToUpper(idPart))
	if err != nil || idErr != nil || len(raw) != secretBytes || len(idRaw) != idBytes {
		return "", nil, fmt.Errorf("%w: malformed enrollment code", ErrRefused)
	}
	return idPart, raw, nil
}

// Claim checks that rec (found says whether there is one) admits node
// with secret at now and, if so, records the use in rec. known reports
// whether the controller already knows a node by that name: a code that
// admits devices naming themselves never hands out the credential of a
// node that exists (the name would be another device's identity); a code
// bound to one node does, which is how a reimaged device is readmitted.
func Claim(rec *store.EnrollmentRecord, found bool, secret []byte, node string, known bool, now time.Time) error {
	if !found {
		return fmt.Errorf("%w: unknown or wrong code", ErrRefused)
	}
	sum := sha256.Sum256(secret)
	if subtle.ConstantTimeCompare(sum[:], rec.SecretHash) != 1 {
		return fmt.Errorf("%w: unknown or wrong code", ErrRefused)
	}
	switch {
	case !now.Before(rec.ExpiresAt):
		return fmt.Errorf("%w: code %s expired at %s", ErrRefused, rec.ID, rec.ExpiresAt.UTC().Format(time.RFC3339))
	case len(rec.Enrolled) >= rec.Uses:
		return fmt.Errorf("%w: code %s is used up (%d of %d)", ErrRefused, rec.ID, len(rec.Enrolled), rec.Uses)
	case rec.Node != "" && node != rec.Node:
		return fmt.Errorf("%w: code %s enrolls node %s, not %s", ErrRefused, rec.ID, rec.Node, node)
	case rec.Node == "" && node == "":
		return fmt.Errorf("%w: code %s is shared by several devices: each names itself (edgeset-agent enroll --node NAME)", ErrRefused, rec.ID)
	case rec.Node == "" && schema.NodeNameProblem(node) != "":
		return fmt.Errorf("%w: node name %q: %s", ErrRefused, node, schema.NodeNameProblem(node))
	case rec.Node == "" && !strings.HasPrefix(node, rec.NamePrefix):
		return fmt.Errorf("%w: code %s enrolls names starting with %q, not %s", ErrRefused, rec.ID, rec.NamePrefix, node)
	case rec.Node == "" && (known || slices.Contains(rec.Enrolled, node)):
		return fmt.Errorf("%w: node %s exists; a shared code admits new names only (an admin makes a code for that node to readmit it)", ErrRefused, node)
	}
	rec.Enrolled = append(rec.Enrolled, node)
	rec.UsedAt = now
	return nil
}

// Prunable reports whether rec may be deleted at now to make room: it
// expired, or was used up, KeepExpired ago.
func Prunable(rec store.EnrollmentRecord, now time.Time) bool {
	end := rec.ExpiresAt
	if len(rec.Enrolled) >= rec.Uses && rec.UsedAt.Before(end) {
		end = rec.UsedAt
	}
	return !now.Before(end.Add(KeepExpired))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
