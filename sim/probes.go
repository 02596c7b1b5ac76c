package sim

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"time"
)

// probeAnswerTimeout bounds how long a simulated daemon waits for a probe's
// request before it hangs up.
const probeAnswerTimeout = 5 * time.Second

// dialDaemon is the agents' edgeagent.Config.ProbeDial: a simulated
// device's containers have made-up addresses on no network, so an httpGet
// or tcpSocket probe (or hook) must never reach the network. It connects
// the probe to a healthy daemon inside the process instead: a TCP probe
// succeeds, and every HTTP request is answered 200 OK. The goroutine
// answering ends when either side closes the connection or the timeout
// passes.
func dialDaemon(ctx context.Context, _, _ string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	client, daemon := net.Pipe()
	go answerProbe(daemon)
	return client, nil
}

// answerProbe serves HTTP requests on conn with 200 OK until the client is
// done.
func answerProbe(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		_ = conn.SetDeadline(time.Now().Add(probeAnswerTimeout))
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		resp := &http.Response{StatusCode: http.StatusOK, ProtoMajor: 1, ProtoMinor: 1, Request: req, Close: req.Close}
		if err := resp.Write(conn); err != nil || req.Close {
			return
		}
	}
}
