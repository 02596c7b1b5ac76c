package replica

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/store"
)

func TestLayoutParsesWhatItWrites(t *testing.T) {
	l := newLayout("/edgeset/store/")
	cases := []struct {
		name string
		key  string
		want entry
	}{
		{"top-level key", l.key([]string{"meta"}, []byte("schemaVersion")), entry{kind: entryKey, path: []string{"meta"}, key: []byte("schemaVersion")}},
		{"nested bucket with slash and percent", l.bucketKey([]string{"revisions", "ns/a%b"}), entry{kind: entryBucket, path: []string{"revisions", "ns/a%b"}}},
		{"sequence", l.seqKey([]string{"events"}), entry{kind: entrySeq, path: []string{"events"}}},
		{"binary key with slashes", l.key([]string{"events"}, []byte{0, '/', 0xff, 'k', '/'}), entry{kind: entryKey, path: []string{"events"}, key: []byte{0, '/', 0xff, 'k', '/'}}},
		{"binary bucket name", l.key([]string{"a", "\x00 \xff"}, []byte("k")), entry{kind: entryKey, path: []string{"a", "\x00 \xff"}, key: []byte("k")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := l.parse(tc.key)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{"/other/x", l.root() + "k/x", l.root() + "b/a", l.root() + "b/a%2/k/x", l.root() + "b/a/z"} {
		_, err := l.parse(bad)
		assert.Error(t, err, bad)
	}
}

// TestLayoutSubtreeIsOnePrefix: a bucket's directory prefixes all of its
// subtree and nothing of a sibling whose name it prefixes; existence
// sorts first.
func TestLayoutSubtreeIsOnePrefix(t *testing.T) {
	l := newLayout("")
	a := l.dir([]string{"revisions", "a"})
	for _, k := range []string{l.bucketKey([]string{"revisions", "a"}), l.seqKey([]string{"revisions", "a"}),
		l.key([]string{"revisions", "a"}, []byte("h")), l.bucketKey([]string{"revisions", "a", "x"})} {
		assert.True(t, strings.HasPrefix(k, a), k)
	}
	for _, k := range []string{l.bucketKey([]string{"revisions", "ab"}), l.key([]string{"revisions", "a/b"}, []byte("h")),
		l.key([]string{"revisions"}, []byte("a")), l.bucketKey([]string{"revisions"})} {
		assert.False(t, strings.HasPrefix(k, a), k)
	}
	p := []string{"b"}
	assert.Less(t, l.bucketKey(p), l.seqKey(p))
	assert.Less(t, l.seqKey(p), l.bucketKey([]string{"b", "c"}))
	assert.Less(t, l.bucketKey([]string{"b", "c"}), l.key(p, []byte{0}))
}

func TestReduce(t *testing.T) {
	l := newLayout("/p")
	put := func(path []string, k, v string) store.Op {
		return store.Op{Kind: store.OpPut, Bucket: path, Key: []byte(k), Value: []byte(v)}
	}
	del := func(path []string, k string) store.Op {
		return store.Op{Kind: store.OpDelete, Bucket: path, Key: []byte(k)}
	}
	bucket := func(kind store.OpKind, path ...string) store.Op { return store.Op{Kind: kind, Bucket: path} }
	x := []string{"r", "x"}
	cases := []struct {
		name string
		ops  []store.Op
		want []effect
	}{
		{"last write wins", []store.Op{put(x, "k", "1"), put(x, "k", "2"), put(x, "j", "3")}, []effect{
			{kind: effectPut, key: l.key(x, []byte("j")), value: []byte("3")},
			{kind: effectPut, key: l.key(x, []byte("k")), value: []byte("2")}}},
		{"put then delete", []store.Op{put(x, "k", "1"), del(x, "k")}, []effect{{kind: effectDelete, key: l.key(x, []byte("k"))}}},
		{"bucket delete swallows earlier writes", []store.Op{put(x, "k", "1"), bucket(store.OpDeleteBucket, x...)}, []effect{
			{kind: effectDeleteRange, key: l.dir(x), end: prefixEnd(l.dir(x))}}},
		{"recreated bucket keeps what is put after", []store.Op{bucket(store.OpDeleteBucket, x...), bucket(store.OpCreateBucket, x...), put(x, "k", "1"), del(x, "gone")}, []effect{
			{kind: effectPut, key: l.bucketKey(x), value: []byte{}},
			{kind: effectPut, key: l.key(x, []byte("k")), value: []byte("1")},
			{kind: effectDeleteRange, key: l.dir(x), end: l.bucketKey(x)},
			{kind: effectDeleteRange, key: l.bucketKey(x) + "\x00", end: l.key(x, []byte("k"))},
			{kind: effectDeleteRange, key: l.key(x, []byte("k")) + "\x00", end: prefixEnd(l.dir(x))}}},
		{"outer delete covers inner", []store.Op{bucket(store.OpDeleteBucket, x...), bucket(store.OpDeleteBucket, "r")}, []effect{
			{kind: effectDeleteRange, key: l.dir([]string{"r"}), end: prefixEnd(l.dir([]string{"r"}))}}},
		{"sequence", []store.Op{{Kind: store.OpSetSequence, Bucket: x, Seq: 1}, {Kind: store.OpSetSequence, Bucket: x, Seq: 2}}, []effect{
			{kind: effectPut, key: l.seqKey(x), value: []byte{0, 0, 0, 0, 0, 0, 0, 2}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reduce(l, &store.WriteSet{Ops: tc.ops})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestChunksRoundTrip(t *testing.T) {
	effects := []effect{
		{kind: effectPut, key: "a", value: []byte(strings.Repeat("v", 300))},
		{kind: effectDelete, key: "b"},
		{kind: effectDeleteRange, key: "c", end: "d"},
		{kind: effectPut, key: "e", value: []byte{}},
	}
	chunks := encodeChunks(effects, 200)
	require.Len(t, chunks, 2, "the large put alone, then the rest")
	var got []effect
	for _, c := range chunks {
		var err error
		got, err = decodeChunk(got, c)
		require.NoError(t, err)
	}
	assert.Equal(t, effects, got)
	_, err := decodeChunk(nil, chunks[1][:len(chunks[1])-1])
	assert.Error(t, err, "a truncated chunk")
}
