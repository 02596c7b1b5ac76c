package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/edgeset/edgeset/controller/store"
)

// effectKind is what an effect does to etcd.
type effectKind uint8

const (
	effectPut         effectKind = iota + 1 // key = value
	effectDelete                            // delete key
	effectDeleteRange                       // delete [key, end)
)

// effect is one etcd write of a reduced write set.
type effect struct {
	kind  effectKind
	key   string
	value []byte // effectPut
	end   string // effectDeleteRange
}

// size is what the effect adds to a request, its keys and value plus a
// generous allowance for the protobuf framing.
func (e effect) size() int { return len(e.key) + len(e.value) + len(e.end) + opOverhead }

// opOverhead is the framing allowance of one op in a request;
// stagingOverhead what a staged chunk adds around one effect (its key,
// the effect's own framing).
const (
	opOverhead      = 32
	stagingOverhead = 256
)

func (e effect) op() clientv3.Op {
	switch e.kind {
	case effectPut:
		return clientv3.OpPut(e.key, string(e.value))
	case effectDeleteRange:
		return clientv3.OpDelete(e.key, clientv3.WithRange(e.end))
	default:
		return clientv3.OpDelete(e.key)
	}
}

// reduce turns a write set into its net effect on etcd: at most one
// effect per key, and range deletes (a deleted bucket's subtree) that
// leave out the keys put after them. etcd refuses a transaction that
// writes a key twice or puts a key inside a range it deletes; the reduced
// set has neither, its effects commute, and so any split of it into
// batches, applied in any order and any number of times, ends in the
// same state.
func reduce(l layout, ws *store.WriteSet) ([]effect, error) {
	var r reducer
	r.points = make(map[string]effect, len(ws.Ops))
	for i, op := range ws.Ops {
		if len(op.Bucket) == 0 {
			return nil, fmt.Errorf("write set op %d (%s): no bucket", i, op.Kind)
		}
		switch op.Kind {
		case store.OpPut:
			r.point(effect{kind: effectPut, key: l.key(op.Bucket, op.Key), value: op.Value})
		case store.OpDelete:
			r.point(effect{kind: effectDelete, key: l.key(op.Bucket, op.Key)})
		case store.OpCreateBucket:
			r.point(effect{kind: effectPut, key: l.bucketKey(op.Bucket), value: []byte{}})
		case store.OpSetSequence:
			r.point(effect{kind: effectPut, key: l.seqKey(op.Bucket), value: binary.BigEndian.AppendUint64(nil, op.Seq)})
		case store.OpDeleteBucket:
			r.deleteTree(l.dir(op.Bucket))
		default:
			return nil, fmt.Errorf("write set op %d: unknown kind %s", i, op.Kind)
		}
	}
	return r.effects(), nil
}

// reducer folds a write set's ops, in order, into their net effect.
type reducer struct {
	points map[string]effect // key -> its last put or delete
	trees  []string          // prefixes deleted, none inside another
}

func (r *reducer) point(e effect) { r.points[e.key] = e }

// deleteTree deletes every key under prefix: the points under it are
// dropped, and so are trees inside it.
func (r *reducer) deleteTree(prefix string) {
	for k := range r.points {
		if strings.HasPrefix(k, prefix) {
			delete(r.points, k)
		}
	}
	for _, t := range r.trees {
		if strings.HasPrefix(prefix, t) {
			return // an earlier delete covers it; what was put since is gone now
		}
	}
	r.trees = slices.DeleteFunc(r.trees, func(t string) bool { return strings.HasPrefix(t, prefix) })
	r.trees = append(r.trees, prefix)
}

// effects returns the puts, the deletes no tree covers, and each tree's
// delete split around the keys put under it after it.
func (r *reducer) effects() []effect {
	keys := make([]string, 0, len(r.points))
	for k := range r.points {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]effect, 0, len(keys)+len(r.trees))
	for _, k := range keys {
		if e := r.points[k]; e.kind == effectPut || !r.covered(k) {
			out = append(out, e)
		}
	}
	for _, t := range r.trees {
		out = append(out, splitRange(t, prefixEnd(t), keys, r.points)...)
	}
	return out
}

func (r *reducer) covered(k string) bool {
	for _, t := range r.trees {
		if strings.HasPrefix(k, t) {
			return true
		}
	}
	return false
}

// splitRange deletes [start, end) but for the keys put in it: the ranges
// between them. keys is sorted.
func splitRange(start, end string, keys []string, points map[string]effect) []effect {
	var out []effect
	from := start
	i := sort.SearchStrings(keys, start)
	for ; i < len(keys) && keys[i] < end; i++ {
		if points[keys[i]].kind != effectPut {
			continue
		}
		if from < keys[i] {
			out = append(out, effect{kind: effectDeleteRange, key: from, end: keys[i]})
		}
		from = keys[i] + "\x00"
	}
	if from < end {
		out = append(out, effect{kind: effectDeleteRange, key: from, end: end})
	}
	return out
}

// limits bound one etcd request of a write set.
type limits struct {
	ops   int // effects per transaction
	bytes int // bytes per request
}

// errTooLarge: one write alone exceeds what etcd takes in a request.
var errTooLarge = errors.New("write exceeds etcd's request size")

// batches splits effects into transactions within l, in order.
func batches(effects []effect, l limits) ([][]effect, error) {
	var out [][]effect
	start, size := 0, 0
	for i, e := range effects {
		if e.size()+stagingOverhead > l.bytes {
			return nil, fmt.Errorf("%w: %q is %d bytes, at most %d per request (the replica's MaxRequestBytes)",
				errTooLarge, e.key, e.size(), l.bytes-stagingOverhead)
		}
		if i-start == l.ops || size+e.size() > l.bytes {
			out = append(out, effects[start:i])
			start, size = i, 0
		}
		size += e.size()
	}
	if start < len(effects) {
		out = append(out, effects[start:])
	}
	return out, nil
}

// encodeChunks packs effects into chunks of at most maxBytes each (an
// effect larger than that alone in its chunk; batches refuses those
// first): kind, uvarint-length-prefixed key, then value or range end.
func encodeChunks(effects []effect, maxBytes int) [][]byte {
	var chunks [][]byte
	var cur []byte
	for _, e := range effects {
		rec := binary.AppendUvarint([]byte{byte(e.kind)}, uint64(len(e.key)))
		rec = append(rec, e.key...)
		tail := e.value
		if e.kind == effectDeleteRange {
			tail = []byte(e.end)
		}
		rec = binary.AppendUvarint(rec, uint64(len(tail)))
		rec = append(rec, tail...)
		if len(cur) > 0 && len(cur)+len(rec) > maxBytes {
			chunks = append(chunks, cur)
			cur = nil
		}
		cur = append(cur, rec...)
	}
	if len(cur) > 0 {
		chunks = append(chunks, cur)
	}
	return chunks
}

// decodeChunk appends the effects packed in chunk to out.
func decodeChunk(out []effect, chunk []byte) ([]effect, error) {
	for len(chunk) > 0 {
		kind := effectKind(chunk[0])
		key, rest, err := readBytes(chunk[1:])
		if err != nil {
			return nil, err
		}
		tail, rest, err := readBytes(rest)
		if err != nil {
			return nil, err
		}
		e := effect{kind: kind, key: string(key)}
		switch kind {
		case effectPut:
			e.value = tail
		case effectDelete:
		case effectDeleteRange:
			e.end = string(tail)
		default:
			return nil, fmt.Errorf("staged effect of unknown kind %d", kind)
		}
		out = append(out, e)
		chunk = rest
	}
	return out, nil
}

func readBytes(b []byte) (field, rest []byte, err error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return nil, nil, errors.New("staged chunk truncated")
	}
	return b[w : w+int(n)], b[w+int(n):], nil
}
