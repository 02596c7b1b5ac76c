package replica

import (
	"fmt"
	"strconv"
	"strings"
)

// layout maps bbolt buckets and keys to etcd keys under one prefix (see
// the package documentation):
//
//	<prefix>/d/                          the root (top-level buckets)
//	<dir>b/<escaped name>/               a nested bucket's directory
//	<dir>!                               the bucket exists (empty value)
//	<dir>#                               the bucket's sequence, 8 bytes
//	<dir>k/<key>                         a key of the bucket, raw bytes
//	<prefix>/txn/<id>/<chunk>            a staged transaction's chunks
//	<prefix>/txn/<id>/commit             its commit marker
//
// A name is escaped so that it holds no '/', so a bucket's directory is a
// prefix of its own subtree's keys and of nobody else's.
type layout struct {
	prefix string // without a trailing slash
}

func (l layout) root() string { return l.prefix + "/d/" }

// dir is the directory of the bucket at path.
func (l layout) dir(path []string) string {
	var b strings.Builder
	b.WriteString(l.root())
	for _, name := range path {
		b.WriteString("b/")
		b.WriteString(escape(name))
		b.WriteByte('/')
	}
	return b.String()
}

func (l layout) bucketKey(path []string) string { return l.dir(path) + "!" }
func (l layout) seqKey(path []string) string    { return l.dir(path) + "#" }
func (l layout) key(path []string, key []byte) string {
	return l.dir(path) + "k/" + string(key)
}

func (l layout) staging() string             { return l.prefix + "/txn/" }
func (l layout) stagingDir(id string) string { return l.staging() + id + "/" }
func (l layout) chunkKey(id string, n int) string {
	return fmt.Sprintf("%s%08d", l.stagingDir(id), n)
}
func (l layout) markerKey(id string) string { return l.stagingDir(id) + "commit" }

// entryKind is what an etcd key under the root stands for.
type entryKind uint8

const (
	entryBucket entryKind = iota + 1 // <dir>!
	entrySeq                         // <dir>#
	entryKey                         // <dir>k/<key>
)

// entry is a parsed etcd key under the root.
type entry struct {
	kind entryKind
	path []string
	key  []byte // entryKey only
}

// parse reads an etcd key under the root back into its bucket path and
// what it is.
func (l layout) parse(key string) (entry, error) {
	rest, ok := strings.CutPrefix(key, l.root())
	if !ok {
		return entry{}, fmt.Errorf("key %q: not under %s", key, l.root())
	}
	var path []string
	for {
		switch {
		case rest == "!" && len(path) > 0:
			return entry{kind: entryBucket, path: path}, nil
		case rest == "#" && len(path) > 0:
			return entry{kind: entrySeq, path: path}, nil
		case strings.HasPrefix(rest, "k/") && len(path) > 0:
			return entry{kind: entryKey, path: path, key: []byte(rest[2:])}, nil
		case strings.HasPrefix(rest, "b/"):
			name, tail, ok := strings.Cut(rest[2:], "/")
			if !ok {
				return entry{}, fmt.Errorf("key %q: bucket name without its '/'", key)
			}
			n, err := unescape(name)
			if err != nil {
				return entry{}, fmt.Errorf("key %q: %w", key, err)
			}
			path = append(path, n)
			rest = tail
		default:
			return entry{}, fmt.Errorf("key %q: not a bucket, sequence or key entry", key)
		}
	}
}

// escape percent-encodes '%', '/' and bytes outside printable ASCII.
func escape(name string) string {
	var b strings.Builder
	for i := range len(name) {
		c := name[i]
		if c == '%' || c == '/' || c <= ' ' || c > '~' {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("bucket name %q: truncated escape", s)
		}
		c, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bucket name %q: bad escape %q", s, s[i:i+3])
		}
		b.WriteByte(byte(c))
		i += 2
	}
	return b.String(), nil
}

// prefixEnd is the end of the range of keys that start with p, as
// clientv3.GetPrefixRangeEnd.
func prefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return "\x00"
}
