package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/edgeset/edgeset/sim"
)

// devices are the simulated devices of one run: a fleet in this process,
// or shares of it in several device processes (one process may hold
// 20,000 open files here, so a larger fleet needs several).
type devices interface {
	// RampDone is closed once every device was launched, in every process.
	RampDone() <-chan struct{}
	// RampSeconds is how long the slowest ramp took; valid after RampDone.
	RampSeconds() float64
	// PIDs are the device processes, whose CPU time is the simulator's
	// besides this process's; none for a fleet in this process.
	PIDs() []int
	// Stop takes the final report, then disconnects every device and
	// waits for them (and their processes) to end.
	Stop() (sim.Report, error)
}

// localDevices is the fleet in this process.
type localDevices struct {
	fleet  *sim.Fleet
	cancel context.CancelFunc
	done   chan error
}

func startLocal(ctx context.Context, opts sim.Options) (*localDevices, error) {
	fleet, err := sim.New(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &localDevices{fleet: fleet, cancel: cancel, done: make(chan error, 1)}
	go func() { l.done <- fleet.Run(ctx) }()
	return l, nil
}

func (l *localDevices) RampDone() <-chan struct{} { return l.fleet.RampDone() }
func (l *localDevices) RampSeconds() float64      { return l.fleet.Report().RampSeconds }
func (l *localDevices) PIDs() []int               { return nil }

func (l *localDevices) Stop() (sim.Report, error) {
	r := l.fleet.Report()
	l.cancel()
	err := <-l.done
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return r, err
}

// deviceLine is one line a device process writes on its stdout: first
// when its ramp is done, last its final report with the connect times.
type deviceLine struct {
	RampSeconds *float64    `json:"rampSeconds,omitempty"`
	Report      *sim.Report `json:"report,omitempty"`
	Samples     []float64   `json:"samples,omitempty"`
	Error       string      `json:"error,omitempty"`
}

// RunDevices is a device process of a benchmark run (the command in
// Options.DeviceCommand): it runs the fleet opts describes, writes one
// line on stdout when its ramp is done, and when stdin closes (or ctx
// ends) its final report, then disconnects the devices and returns.
func RunDevices(ctx context.Context, opts sim.Options, stdin io.Reader, stdout io.Writer) error {
	if err := RaiseFDLimit(); err != nil {
		return err
	}
	fleet, err := sim.New(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fleet.Run(ctx) }()
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	enc := json.NewEncoder(stdout)
	select {
	case <-fleet.RampDone():
		ramp := fleet.Report().RampSeconds
		if err := enc.Encode(deviceLine{RampSeconds: &ramp}); err != nil {
			return err
		}
	case <-eof:
	case <-ctx.Done():
	}
	select {
	case <-eof:
	case <-ctx.Done():
	}
	r, samples := fleet.ReportSamples()
	cancel()
	runErr := <-done
	line := deviceLine{Report: &r, Samples: samples}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		line.Error = runErr.Error()
	}
	return enc.Encode(line)
}

// procDevices are device processes, each running its share of the fleet.
type procDevices struct {
	procs    []*deviceProc
	rampDone chan struct{}
}

// deviceProc is one device process and what it has written.
type deviceProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan deviceLine // what it writes, closed at its EOF
	ramp  float64
}

// deviceShare is the part of the fleet process k of procs runs.
type deviceShare struct {
	nodes  int
	prefix string
	// brokerURLs are every broker, comma-separated, starting at broker k
	// modulo their number: the process's device i starts on broker
	// k+i modulo their number (sim.Options.BrokerURLs) and fails over to
	// the others.
	brokerURLs string
}

// shares splits nodes over procs processes: names sim-K-NNNNN, each
// process's devices spread over every broker, so a broker cluster's
// members hold equal parts of the fleet whatever the number of
// processes (one process per member put 25,000 devices of 50,000 in four
// processes on one member, beyond the files one process may hold).
func shares(nodes, procs int, brokers []string) []deviceShare {
	out := make([]deviceShare, procs)
	for k := range out {
		start := k % len(brokers)
		rotated := append(append([]string(nil), brokers[start:]...), brokers[:start]...)
		out[k] = deviceShare{nodes: nodes / procs, prefix: "sim-" + strconv.Itoa(k) + "-", brokerURLs: strings.Join(rotated, ",")}
		if k < nodes%procs {
			out[k].nodes++
		}
	}
	return out
}

// startProcs starts one device process per share: command, then the
// share's flags (edgeset-sim's --nodes, --name-prefix, --broker-url,
// --ramp and --fleet-secret-file).
func startProcs(ctx context.Context, command []string, secretFile string, ramp float64, parts []deviceShare) (*procDevices, error) {
	p := &procDevices{rampDone: make(chan struct{})}
	for _, sh := range parts {
		args := append(append([]string(nil), command[1:]...),
			"--nodes", strconv.Itoa(sh.nodes), "--name-prefix", sh.prefix, "--broker-url", sh.brokerURLs,
			"--ramp", strconv.FormatFloat(ramp/float64(len(parts)), 'g', -1, 64), "--fleet-secret-file", secretFile)
		proc, err := startProc(ctx, command[0], args)
		if err != nil {
			_, _ = p.Stop()
			return nil, err
		}
		p.procs = append(p.procs, proc)
	}
	go p.awaitRamps()
	return p, nil
}

func startProc(ctx context.Context, name string, args []string) (*deviceProc, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start device process: %w", err)
	}
	proc := &deviceProc{cmd: cmd, stdin: stdin, lines: make(chan deviceLine, 2)}
	go proc.read(stdout)
	return proc, nil
}

// read decodes the process's lines until its stdout ends; a line that is
// not one is reported as an error line.
func (d *deviceProc) read(stdout io.Reader) {
	defer close(d.lines)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 64<<20) // a final report carries every connect time
	for sc.Scan() {
		var line deviceLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			line = deviceLine{Error: fmt.Sprintf("device process %d wrote %q: %v", d.cmd.Process.Pid, truncate(sc.Text(), 200), err)}
		}
		d.lines <- line
	}
}

// awaitRamps closes rampDone once every process reported its ramp done
// (or ended).
func (p *procDevices) awaitRamps() {
	for _, proc := range p.procs {
		if line, ok := <-proc.lines; ok && line.RampSeconds != nil {
			proc.ramp = *line.RampSeconds
		}
	}
	close(p.rampDone)
}

func (p *procDevices) RampDone() <-chan struct{} { return p.rampDone }

func (p *procDevices) RampSeconds() float64 {
	var s float64
	for _, proc := range p.procs {
		s = max(s, proc.ramp)
	}
	return s
}

func (p *procDevices) PIDs() []int {
	pids := make([]int, len(p.procs))
	for i, proc := range p.procs {
		pids[i] = proc.cmd.Process.Pid
	}
	return pids
}

// Stop closes every process's stdin, collects the final reports and
// waits for the processes.
func (p *procDevices) Stop() (sim.Report, error) {
	var reports []sim.Report
	var samples [][]float64
	var errs []error
	for _, proc := range p.procs {
		_ = proc.stdin.Close()
	}
	for _, proc := range p.procs {
		for line := range proc.lines {
			if line.Error != "" {
				errs = append(errs, errors.New(line.Error))
			}
			if line.Report != nil {
				reports = append(reports, *line.Report)
				samples = append(samples, line.Samples)
			}
		}
		if err := proc.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("device process %d: %w", proc.cmd.Process.Pid, err))
		}
	}
	return sim.MergeReports(reports, samples), errors.Join(errs...)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
