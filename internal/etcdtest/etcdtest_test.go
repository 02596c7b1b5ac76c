package etcdtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestServerServesPutAndGet(t *testing.T) {
	srv := Start(t)
	cli := srv.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, "k", "v")
	require.NoError(t, err)
	require.Equal(t, []byte("v"), Get(t, cli, "k"))
	require.Nil(t, Get(t, cli, "missing"))
}

func TestProxyCutPartitionsAndRestoreHeals(t *testing.T) {
	srv := Start(t)
	p := NewProxy(t, srv.Endpoint())
	cli := NewClient(t, p.Endpoint())
	put := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		_, err := cli.Put(ctx, "k", "v")
		return err
	}
	require.NoError(t, put(5*time.Second))

	p.Cut()
	require.Error(t, put(300*time.Millisecond), "a put through a cut proxy")

	p.Restore()
	require.NoError(t, put(5*time.Second), "a put after Restore")
}
