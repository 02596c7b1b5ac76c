package api

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stallBackend is a Backuper whose store copy is larger than any socket
// buffer; Backup reports when it returns.
type stallBackend struct {
	fakeBackend
	returned chan error
}

func (b *stallBackend) Backup(_ context.Context, w io.Writer, started func(int64)) error {
	const size = 256 << 20
	started(size)
	chunk := make([]byte, 64<<10)
	var err error
	for n := 0; n < size && err == nil; n += len(chunk) {
		_, err = w.Write(chunk)
	}
	b.returned <- err
	return err
}

// TestBackupClientThatStopsReadingIsCut: the store copy runs inside one
// read transaction, which holds up every write that must grow the file.
// A backup is not cut by the write timeout as a whole (a large store takes
// longer), but each chunk gets it afresh: a client that stops reading is
// cut, and the transaction ends, instead of being held for good.
func TestBackupClientThatStopsReadingIsCut(t *testing.T) {
	b := &stallBackend{returned: make(chan error, 1)}
	addr := startLimited(t, b, Limits{WriteTimeout: 300 * time.Millisecond}, nil)
	conn := dialRaw(t, addr)
	_, err := fmt.Fprintf(conn, "GET /api/v1/backup HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
	require.NoError(t, err)
	// The client reads nothing.
	select {
	case err := <-b.returned:
		require.Error(t, err, "the copy was cut")
	case <-time.After(10 * time.Second):
		t.Fatal("a backup whose client stopped reading is still being written after 10 s")
	}
}
