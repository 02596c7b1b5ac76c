package imagefetch

import (
	"io"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// meter reports a fetch's progress: the bytes of the blobs present of
// their total. A nil meter reports nothing. It is used by one fetch at a
// time (Fetcher serialises them).
type meter struct {
	progress func(done, total int64)
	total    int64
	done     int64 // bytes of the blobs completed
}

// newMeter meters a fetch of blobs; nil when progress is nil.
func newMeter(progress func(done, total int64), blobs []ocispec.Descriptor) *meter {
	if progress == nil {
		return nil
	}
	m := &meter{progress: progress}
	for _, d := range blobs {
		m.total += d.Size
	}
	m.progress(0, m.total)
	return m
}

// blobDone counts a blob of size bytes as present.
func (m *meter) blobDone(size int64) {
	if m == nil {
		return
	}
	m.done += size
	m.progress(m.done, m.total)
}

// partial reports the blob under way at off bytes.
func (m *meter) partial(off int64) {
	if m != nil {
		m.progress(m.done+off, m.total)
	}
}

// writer wraps w, the blob under way from off, to report each write.
func (m *meter) writer(w io.Writer, off int64) io.Writer {
	if m == nil {
		return w
	}
	return &meteredWriter{w: w, m: m, at: off}
}

type meteredWriter struct {
	w  io.Writer
	m  *meter
	at int64
}

func (mw *meteredWriter) Write(b []byte) (int, error) {
	n, err := mw.w.Write(b)
	mw.at += int64(n)
	mw.m.progress(mw.m.done+mw.at, mw.m.total)
	return n, err
}
