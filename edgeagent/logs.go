package edgeagent

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/edgeset/edgeset/schema"
)

// Defaults of LogServerOptions.
const (
	DefaultLogStreams   = 4
	DefaultLogFollowMax = 10 * time.Minute
)

// LogServerOptions configure a LogServer. Zero fields take the defaults
// documented on each.
type LogServerOptions struct {
	// NodeName is this node; requests naming another node are ignored.
	NodeName string
	// Runtime reads the logs; Conn publishes the chunks.
	Runtime Runtime
	Conn    Conn
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// MaxStreams bounds concurrent streams; default DefaultLogStreams. A
	// request beyond it is answered with an error chunk.
	MaxStreams int
	// FollowMax ends every stream, following or not, after this long;
	// default DefaultLogFollowMax.
	FollowMax time.Duration
	// PublishTimeout bounds each chunk's publish; default 10 s.
	PublishTimeout time.Duration
	// PreviousRunSince, when set, returns where the log of container id's
	// run before the one that started at current begins
	// (Agent.PreviousRunSince), so that --previous serves that run alone;
	// without it, or when it does not know, --previous serves every
	// earlier run.
	PreviousRunSince func(id string, current time.Time) (time.Time, bool)
}

// LogServer answers a node's log requests (schema.LogRequest on its
// logs/request topic) with schema.LogChunk messages on its logs/response
// topic, streaming one container's log per request from the Runtime.
// Handle never blocks; each stream runs in its own goroutine, joined by Run.
type LogServer struct {
	opts LogServerOptions
	log  *slog.Logger
	wg   sync.WaitGroup
	// spare admits one goroutine at a time to refuse requests over the
	// MaxStreams limit, so a flood of requests spawns nothing more.
	spare chan struct{}

	mu       sync.Mutex                    // guards closed and sessions
	closed   bool                          // Run returned: no new streams
	sessions map[string]context.CancelFunc // running streams by request ID
	base     context.Context               // parent of every stream
	stop     context.CancelFunc            // cancels base, when Run ends
}

// NewLogServer returns a LogServer. It serves requests from the start, so
// none is lost while the agent starts up; Run must be called to end the
// streams and wait for them.
func NewLogServer(opts LogServerOptions) *LogServer {
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultLogStreams
	}
	if opts.FollowMax <= 0 {
		opts.FollowMax = DefaultLogFollowMax
	}
	if opts.PublishTimeout <= 0 {
		opts.PublishTimeout = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, stop := context.WithCancel(context.Background())
	return &LogServer{
		opts: opts, log: log, spare: make(chan struct{}, 1),
		sessions: map[string]context.CancelFunc{}, base: base, stop: stop,
	}
}

// Topic is the request topic to subscribe to.
func (s *LogServer) Topic() string { return schema.NodeTopic(s.opts.NodeName, schema.TopicLogsRequest) }

func (s *LogServer) responseTopic() string {
	return schema.NodeTopic(s.opts.NodeName, schema.TopicLogsResponse)
}

// Run serves until ctx ends, then cancels every stream and waits for them.
func (s *LogServer) Run(ctx context.Context) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("log server: Run called twice")
	}
	<-ctx.Done()
	s.mu.Lock()
	s.closed = true
	s.stop()
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Handle takes one logs/request payload, as Agent.OpenRequest returns it
// (verified, when the agent pins a trust root). It never blocks on I/O:
// a stream starts in its own goroutine, a cancel only cancels.
func (s *LogServer) Handle(payload []byte) {
	req, err := schema.DecodeLogRequest(payload)
	if err != nil {
		s.log.Warn("dropping malformed log request", "err", err)
		return
	}
	if req.Node != s.opts.NodeName {
		s.log.Warn("dropping log request for another node", "node", req.Node)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.base.Err() != nil {
		return
	}
	if cancel, ok := s.sessions[req.ID]; ok {
		if req.Cancel || !req.Follow {
			cancel()
		}
		return // a cancel, or a redelivered request
	}
	if req.Cancel {
		return // the stream already ended
	}
	if len(s.sessions) >= s.opts.MaxStreams {
		s.refuseLocked(req)
		return
	}
	ctx, cancel := context.WithTimeout(s.base, s.opts.FollowMax)
	s.sessions[req.ID] = cancel
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.end(req.ID, cancel)
		s.stream(ctx, req)
	}()
}

// refuseLocked answers a request over the limit with an error chunk, from
// the single spare goroutine; when that is busy the request is dropped and
// the controller times out.
func (s *LogServer) refuseLocked(req schema.LogRequest) {
	select {
	case s.spare <- struct{}{}:
	default:
		s.log.Warn("dropping log request: too many streams", "id", req.ID)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.spare }()
		msg := fmt.Sprintf("too many log streams on node %s (limit %d); try again later", s.opts.NodeName, s.opts.MaxStreams)
		s.finish(s.base, req.ID, 0, "", msg)
	}()
}

func (s *LogServer) end(id string, cancel context.CancelFunc) {
	cancel()
	s.mu.Lock()
	delete(s.sessions, id)
	s.mu.Unlock()
}

// stream answers one request: it finds the container, copies its log in
// chunks and ends the stream with an EOF or error chunk.
func (s *LogServer) stream(ctx context.Context, req schema.LogRequest) {
	c, err := findContainer(ctx, s.opts.Runtime, s.opts.NodeName, req.DaemonSet, req.Container)
	if err != nil {
		s.finish(ctx, req.ID, 0, "", err.Error())
		return
	}
	limit := req.MaxBytes
	if limit == 0 {
		limit = schema.DefaultLogBytes
	}
	src, closeLog, err := s.openLog(ctx, c, req, limit)
	if err != nil {
		s.finish(ctx, req.ID, 0, "", err.Error())
		return
	}
	defer closeLog()
	seq, note, err := s.copyChunks(ctx, req.ID, src, limit)
	errMsg := ""
	switch {
	case s.base.Err() != nil || errors.Is(ctx.Err(), context.Canceled):
		return // shut down or cancelled: nobody is listening
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		note = fmt.Sprintf("\n[edgeset: log stream ended after %s]\n", s.opts.FollowMax)
	case err != nil:
		s.log.Debug("log stream aborted", "id", req.ID, "err", err)
		errMsg = fmt.Sprintf("read logs of container %s: %v", c.Name, err)
	}
	s.finish(ctx, req.ID, seq, note, errMsg)
}

// openLog opens c's log as req asks; closeLog closes it, and ctx ending
// closes it early.
func (s *LogServer) openLog(ctx context.Context, c ContainerState, req schema.LogRequest, limit int) (src io.Reader, closeLog func(), err error) {
	opts, ownTail, err := logOptions(c, req, s.opts.PreviousRunSince)
	if err != nil {
		return nil, nil, err
	}
	rc, err := s.opts.Runtime.Logs(ctx, c.ID, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("read logs of container %s: %v", c.Name, err)
	}
	stopClose := context.AfterFunc(ctx, func() { rc.Close() })
	closeLog = func() {
		if stopClose() {
			rc.Close()
		}
	}
	if ownTail == 0 {
		return rc, closeLog, nil
	}
	tail, err := lastLines(rc, ownTail, limit)
	if err != nil {
		closeLog()
		return nil, nil, fmt.Errorf("read logs of container %s: %v", c.Name, err)
	}
	return tail, closeLog, nil
}

// copyChunks publishes rc in chunks of at most schema.MaxLogChunkBytes,
// up to limit bytes, and returns the next sequence number and, when the
// limit cut the log short, a note saying so.
func (s *LogServer) copyChunks(ctx context.Context, id string, rc io.Reader, limit int) (seq int, note string, err error) {
	buf := make([]byte, schema.MaxLogChunkBytes)
	carry := 0 // bytes of an incomplete rune kept at the start of buf
	sent := 0
	for sent < limit {
		n, rerr := rc.Read(buf[carry:min(len(buf), carry+limit-sent)])
		n += carry
		text, rest := completeRunes(buf[:n], rerr != nil)
		if len(text) > 0 {
			if err := s.publish(ctx, schema.LogChunk{ID: id, Seq: seq, Data: strings.ToValidUTF8(string(text), "\uFFFD")}); err != nil {
				return seq, "", err
			}
			seq++
			sent += len(text)
		}
		carry = copy(buf, rest)
		if errors.Is(rerr, io.EOF) {
			return seq, "", nil
		}
		if rerr != nil {
			return seq, "", rerr
		}
	}
	return seq, fmt.Sprintf("\n[edgeset: log output truncated at %d bytes]\n", limit), nil
}

// completeRunes splits b before a trailing incomplete UTF-8 sequence, which
// is kept for the next read unless final.
func completeRunes(b []byte, final bool) (text, rest []byte) {
	if final {
		return b, nil
	}
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], b[i:]
			}
			break
		}
	}
	return b, nil
}

// finish publishes the last chunk of a stream; it outlives ctx's
// cancellation by deadline so that a stream cut by FollowMax still ends
// cleanly.
func (s *LogServer) finish(ctx context.Context, id string, seq int, data, errMsg string) {
	ctx = context.WithoutCancel(ctx)
	if err := s.publish(ctx, schema.LogChunk{ID: id, Seq: seq, Data: data, EOF: true, Error: errMsg}); err != nil {
		s.log.Debug("publish last log chunk", "id", id, "err", err)
	}
}

func (s *LogServer) publish(ctx context.Context, c schema.LogChunk) error {
	c.SchemaVersion, c.Node = schema.WireVersion, s.opts.NodeName
	payload, err := schema.Encode(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.PublishTimeout)
	defer cancel()
	return s.opts.Conn.Publish(ctx, s.responseTopic(), payload, false)
}

// logOptions maps a request to the engine's log options. For the previous
// run of a container restarted in place it returns the tail for the agent
// to apply itself (ownTail): an engine applies tail before until, so it
// would tail the current run and then cut it away.
func logOptions(c ContainerState, req schema.LogRequest, prevSince func(string, time.Time) (time.Time, bool)) (opts LogOptions, ownTail int, err error) {
	opts = LogOptions{Tail: req.Tail, Follow: req.Follow}
	if !req.Previous {
		return opts, 0, nil
	}
	if opts, err = previousRun(c, opts, prevSince); err != nil {
		return opts, 0, err
	}
	if !opts.Until.IsZero() {
		ownTail, opts.Tail = opts.Tail, 0
	}
	return opts, ownTail, nil
}

// lastLines reads r to its end and returns its last n lines, keeping no
// more than about limit bytes of them (a single longer line is kept whole,
// for copyChunks to cut).
func lastLines(r io.Reader, n, limit int) (io.Reader, error) {
	br := bufio.NewReader(r)
	var lines []string
	size := 0
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			lines = append(lines, line)
			size += len(line)
			for len(lines) > n || len(lines) > 1 && size > limit {
				size -= len(lines[0])
				lines = lines[1:]
			}
		}
		if errors.Is(err, io.EOF) {
			return strings.NewReader(strings.Join(lines, "")), nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// previousRun selects the log of c's last terminated run. For an exited
// container it is its last run, from a moment before it started. For a
// container restarted in place (running, with the FinishedAt of an
// earlier run) it ends at the boundary of that run and the current one
// (runBoundary) and begins where
// prevSince says that run's log begins, when it knows (else it holds every
// earlier run). Neither follows. A container that has not terminated yet
// has no previous run.
func previousRun(c ContainerState, opts LogOptions, prevSince func(string, time.Time) (time.Time, bool)) (LogOptions, error) {
	opts.Follow = false
	switch {
	case !c.Running && !c.StartedAt.IsZero():
		opts.Since = c.StartedAt.Add(-runStartSlack)
		return opts, nil
	case c.Running && !c.FinishedAt.IsZero():
		opts.Until = c.StartedAt
		if c.FinishedAt.Before(c.StartedAt) {
			opts.Until = runBoundary(c.FinishedAt, c.StartedAt)
		}
		if prevSince != nil {
			if since, ok := prevSince(c.ID, c.StartedAt); ok {
				opts.Since = since
			}
		}
		return opts, nil
	}
	return opts, fmt.Errorf("container %q of daemonset %s has no terminated run on this node", c.Labels[LabelContainer], c.Labels[LabelDaemonSet])
}

// findContainer returns the container of daemonset ds on node named
// container, or its first container when container is empty. Of several
// instances (during a surge) it prefers a running one, then the newest.
func findContainer(ctx context.Context, rt Runtime, node, ds, container string) (ContainerState, error) {
	all, err := rt.List(ctx, node)
	if err != nil {
		return ContainerState{}, fmt.Errorf("list containers: %v", err)
	}
	var mine, match []ContainerState
	for _, c := range all {
		if c.Labels[LabelDaemonSet] != ds {
			continue
		}
		mine = append(mine, c)
		if (container == "" && c.Labels[LabelIndex] == "0") || (container != "" && c.Labels[LabelContainer] == container) {
			match = append(match, c)
		}
	}
	if len(mine) == 0 {
		return ContainerState{}, fmt.Errorf("no instance of daemonset %s on this node", ds)
	}
	if len(match) == 0 {
		return ContainerState{}, fmt.Errorf("daemonset %s has no container %q on this node (containers: %s)", ds, container, containerNames(mine))
	}
	slices.SortFunc(match, func(a, b ContainerState) int {
		if a.Running != b.Running {
			if a.Running {
				return -1
			}
			return 1
		}
		return b.Created.Compare(a.Created)
	})
	return match[0], nil
}

func containerNames(cs []ContainerState) string {
	var names []string
	for _, c := range cs {
		if n := c.Labels[LabelContainer]; !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, cmp.Compare)
	return strings.Join(names, ", ")
}
