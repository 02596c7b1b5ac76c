package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Environment of the helper process started by TestKill9Durability.
const (
	helperEnv     = "EDGESET_STORE_HELPER"
	helperPathEnv = "EDGESET_STORE_HELPER_PATH"
	helperAcks    = 50
)

// TestHelperProcess is not a test: started by TestKill9Durability with
// helperEnv set, it opens the store, puts daemonsets one by one, each with
// a ConfigMap and a Secret of the same name in the same transaction (as one
// apply request), printing "ack <key>" after each put returns, prints "ok"
// after helperAcks of them and keeps writing until it is killed.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "kill9" {
		t.Skip("helper process for TestKill9Durability")
	}
	s, err := Open(os.Getenv(helperPathEnv), Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	deadline := time.Now().Add(2 * time.Minute) // parent gone: stop
	for i := 0; time.Now().Before(deadline); i++ {
		name := fmt.Sprintf("ds-%04d", i)
		var rec DaemonSetRecord
		err := s.Update(false, func(tx *Txn) (err error) {
			if _, _, err = tx.PutConfigMap(testConfigMap(name, map[string]string{"k": name}), "", t0); err != nil {
				return err
			}
			if _, _, err = tx.PutSecret(testSecret(name, map[string]string{"k": name}), "", t0); err != nil {
				return err
			}
			rec, _, err = tx.PutDaemonSet(testDaemonSet(name, "img:1"), t0)
			return err
		})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("ack", rec.Key())
		if i+1 == helperAcks {
			fmt.Println("ok")
		}
	}
	os.Exit(3)
}

func TestKill9Durability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a subprocess")
	}
	path := t.TempDir() + "/edgeset.db"
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"=kill9", helperPathEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	acked := readAcks(t, bufio.NewScanner(stdout))

	// While the child holds the store, another process cannot open it.
	err = openAsync(t, path, Options{LockTimeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), path)

	// The child is still writing: kill it mid-transaction.
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	killed = true

	s, err := Open(path, Options{LockTimeout: 5 * time.Second})
	require.NoError(t, err, "reopen after kill -9")
	defer s.Close()
	for _, key := range acked {
		rec, err := s.GetDaemonSet(key)
		if assert.NoError(t, err, "acknowledged %s lost", key) {
			assert.Equal(t, int64(1), rec.Generation)
		}
	}
	all, err := s.ListDaemonSets()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(all), len(acked))
	// Each request landed whole or not at all, the killed one included.
	cms, err := s.ListConfigMaps()
	require.NoError(t, err)
	secrets, err := s.ListSecrets()
	require.NoError(t, err)
	require.Len(t, cms, len(all))
	require.Len(t, secrets, len(all))
	for i, ds := range all {
		assert.Equal(t, ds.Key(), cms[i].Object.Key())
		assert.Equal(t, ds.Key(), secrets[i].Object.Key())
	}
	t.Logf("%d acknowledged before ok, %d stored after kill -9", len(acked), len(all))
}

// readAcks collects the keys the helper acknowledged up to its "ok" line.
func readAcks(t *testing.T, sc *bufio.Scanner) []string {
	t.Helper()
	var acked []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "ok":
			require.Len(t, acked, helperAcks)
			return acked
		case strings.HasPrefix(line, "ack "):
			acked = append(acked, strings.TrimPrefix(line, "ack "))
		default:
			t.Fatalf("helper: %s", line)
		}
	}
	t.Fatalf("helper exited before ok (read error %v)", sc.Err())
	return nil
}
