package scale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"runtime/metrics"
	rpprof "runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/edgeset/edgeset/controller"
)

// HostInfo is the line a controller host writes to its stdout once it
// serves: where to reach it.
type HostInfo struct {
	PID   int    `json:"pid"`
	API   string `json:"api"`
	MQTT  string `json:"mqtt"`
	Token string `json:"token"`
	Debug string `json:"debug"`
}

// HeapInfo is the host's heap right after a forced garbage collection.
type HeapInfo struct {
	// LiveBytes is runtime/metrics /gc/heap/live:bytes: the heap the last
	// GC marked live.
	LiveBytes uint64 `json:"liveBytes"`
	// HeapAlloc is runtime.MemStats.HeapAlloc after the GC (the
	// go_memstats_heap_alloc_bytes figure).
	HeapAlloc uint64 `json:"heapAlloc"`
	// Goroutines at that moment.
	Goroutines int `json:"goroutines"`
}

// HostOptions select the controller host's broker.
type HostOptions struct {
	// BrokerURL, when set, is an external broker the controller uses
	// instead of its embedded one, authenticating with the password in
	// BrokerPasswordFile. HostInfo.MQTT is then empty.
	BrokerURL          string // one, or several separated by commas
	BrokerPasswordFile string
	// NATSAuth, when its URLs are set, has the controller serve the auth
	// callout of the NATS cluster behind BrokerURL (controller.Config's
	// NATSAuth fields).
	NATSAuth NATSAuth
	// Signing has the controller sign what it publishes
	// (controller.Config.Signing).
	Signing bool
}

// NATSAuth is what the controller needs to serve a NATS cluster's auth
// callout: the cluster's client URLs, the callout user's password file and
// the issuer's seed file.
type NATSAuth struct {
	URLs                   []string
	PasswordFile, SeedFile string
}

// Host runs a controller with its embedded broker on loopback (or the
// external broker of opts) in dataDir for the benchmark, plus a debug listener (/heap, /cpuprofile/start,
// /cpuprofile/stop, /debug/pprof/). It writes one HostInfo JSON line to out
// once serving and runs until ctx ends.
func Host(ctx context.Context, dataDir string, opts HostOptions, out io.Writer) error {
	if err := RaiseFDLimit(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := controller.New(controller.Config{DataDir: dataDir, MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
		BrokerURLs: brokerURLs(opts.BrokerURL), BrokerPasswordFile: opts.BrokerPasswordFile,
		NATSAuthURLs: opts.NATSAuth.URLs, NATSAuthPasswordFile: opts.NATSAuth.PasswordFile,
		NATSAuthIssuerSeedFile: opts.NATSAuth.SeedFile, Signing: opts.Signing,
		// Every simulated device connects from loopback, thousands at once.
		MQTTExemptSources: []string{"127.0.0.0/8"}, MQTTMaxPendingConnections: 1 << 20}, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("debug listener: %w", err)
	}
	srv := newDebugServer()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.Run(ctx) })
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		return srv.Close()
	})
	select {
	case <-c.Synced():
		info := HostInfo{PID: os.Getpid(), API: c.APIAddr().String(), Token: c.Token(), Debug: ln.Addr().String()}
		if addr := c.MQTTAddr(); addr != nil {
			info.MQTT = addr.String()
		}
		if err := json.NewEncoder(out).Encode(info); err != nil {
			return err
		}
	case <-ctx.Done():
	}
	return g.Wait()
}

// debugMux serves the heap figure, a start/stop CPU profile and pprof.
// newDebugServer returns the debug listener's http.Server. Its requests
// are the benchmark's own GETs and POSTs without a body, but it listens
// on loopback where anything can reach it, so no client can hold it: a
// request must arrive within the read timeouts, an idle connection is
// closed. The write timeout leaves room for a CPU profile of a few
// minutes (/debug/pprof/profile refuses a duration past it) and the forced
// collection of /heap.
func newDebugServer() *http.Server {
	return &http.Server{
		Handler:           debugMux(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

func debugMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /heap", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(gcHeap())
	})
	var mu sync.Mutex // guards prof
	var prof *os.File
	mux.HandleFunc("POST /cpuprofile/start", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.Create(r.URL.Query().Get("file"))
		if err == nil {
			if err = rpprof.StartCPUProfile(f); err != nil {
				_ = f.Close()
			}
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		prof = f
	})
	mux.HandleFunc("POST /cpuprofile/stop", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if prof != nil {
			rpprof.StopCPUProfile()
			_ = prof.Close()
			prof = nil
		}
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}

func gcHeap() HeapInfo {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return HeapInfo{LiveBytes: s[0].Value.Uint64(), HeapAlloc: ms.HeapAlloc, Goroutines: runtime.NumGoroutine()}
}

// RaiseFDLimit raises the open-file soft limit to the hard limit.
func RaiseFDLimit() error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read open-file limit: %w", err)
	}
	if lim.Cur == lim.Max {
		return nil
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raise open-file limit to %d: %w", lim.Max, err)
	}
	return nil
}

// brokerURLs splits a comma-separated list of broker URLs; none for the
// embedded broker.
func brokerURLs(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(list, ",")
}
