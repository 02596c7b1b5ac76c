package main

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCLIServerThatIsNotHTTP: a --server that accepts the connection but
// does not answer in HTTP is not "unreachable" and gets no "is
// edgeset-controller running?" hint: one that closes at once (the MQTT
// port: the broker drops a packet that is not CONNECT) is said to have
// closed without an answer, one that answers something else (an SSH
// banner) is named as not an edgeset controller.
func TestCLIServerThatIsNotHTTP(t *testing.T) {
	for name, tc := range map[string]struct{ answer, want string }{
		"closes at once": {"", " closed the connection without an HTTP answer"},
		"ssh banner":     {"SSH-2.0-OpenSSH_9.6\r\n", " is not an edgeset controller"},
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					buf := make([]byte, 512)
					_, _ = c.Read(buf)
					_, _ = c.Write([]byte(tc.answer))
					_ = c.Close()
				}
			}()
			t.Cleanup(func() { ln.Close(); wg.Wait() })
			server := "http://" + ln.Addr().String()
			code, _, errOut := cli{t: t, server: server, token: "x"}.run("get", "nodes")
			assert.Equal(t, 1, code)
			assert.Contains(t, errOut, server+tc.want)
			assert.NotContains(t, errOut, "unreachable")
			assert.NotContains(t, errOut, "make run")
		})
	}
}
