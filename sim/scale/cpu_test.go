package scale

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	tail := " S 1 2 3 4 5 6 7 8 9 10 %s %s 13 14 15"
	tests := []struct {
		name    string
		line    string
		want    CPUTime
		wantErr string
	}{
		{"plain", "42 (edgeset-sim)" + fmt.Sprintf(tail, "250", "75"), CPUTime{UserSeconds: 2.5, SystemSeconds: 0.75}, ""},
		{"name with spaces and parentheses", "42 (a (b) c)" + fmt.Sprintf(tail, "1", "2"), CPUTime{UserSeconds: 0.01, SystemSeconds: 0.02}, ""},
		{"no command name", "42 edgeset-sim S 1", CPUTime{}, "no command name"},
		{"too few fields", "42 (x) S 1 2 3", CPUTime{}, "want at least 13"},
		{"not ticks", "42 (x)" + fmt.Sprintf(tail, "u", "2"), CPUTime{}, "not tick counts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat(tc.line, "/proc/42/stat")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "/proc/42/stat") {
					t.Fatalf("error = %v, want one naming /proc/42/stat and containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !closeTo(got, tc.want) {
				t.Fatalf("parseProcStat = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func closeTo(a, b CPUTime) bool {
	return math.Abs(a.UserSeconds-b.UserSeconds) < 1e-9 && math.Abs(a.SystemSeconds-b.SystemSeconds) < 1e-9
}

func TestParseMachineStat(t *testing.T) {
	busy, idle, err := parseMachineStat("cpu  100 20 30 400 50 6 7 8 0 0")
	want := CPUTime{UserSeconds: 1.2, SystemSeconds: 0.51}
	if err != nil || !closeTo(busy, want) || math.Abs(idle-4.5) > 1e-9 {
		t.Fatalf("parseMachineStat = %+v, %v, %v; want %+v, 4.5", busy, idle, err, want)
	}
	for _, line := range []string{"cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, _, err := parseMachineStat(line); err == nil || !strings.Contains(err.Error(), "/proc/stat") {
			t.Errorf("parseMachineStat(%q) = %v, want an error naming /proc/stat", line, err)
		}
	}
}

// TestReadCPU reads this process as both controller and simulator: every
// figure is non-negative and the machine was busy at least as long as the
// process (at /proc's 10 ms resolution).
func TestReadCPU(t *testing.T) {
	start, err := readCPU(os.Getpid(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := 0.0
	for i := range 20_000_000 {
		x += math.Sqrt(float64(i))
	}
	end, err := readCPU(os.Getpid(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := end.since(start)
	if p.Controller.UserSeconds < 0 || p.Controller.SystemSeconds < 0 || p.Simulator.UserSeconds < 0 ||
		p.Simulator.SystemSeconds < 0 || p.WallSeconds <= 0 || p.MachineSeconds+1e-9 < p.MachineBusySeconds {
		t.Fatalf("phase %+v (sum %g): negative or inconsistent figures", p, x)
	}
	if p.MachineBusySeconds+0.02 < p.Controller.Total() {
		t.Errorf("machine busy %.3fs, less than the process's %.3fs", p.MachineBusySeconds, p.Controller.Total())
	}
	if _, err := ProcessCPU(-1); err == nil {
		t.Error("ProcessCPU of no process must fail")
	}
}

func TestPhaseProfile(t *testing.T) {
	tests := []struct{ path, want string }{
		{"cpu.pprof", "cpu.apply.pprof"},
		{"bin/bench-scale-1000-2.pprof", "bin/bench-scale-1000-2.apply.pprof"},
		{"dir.d/cpu", "dir.d/cpu.apply"},
	}
	for _, tc := range tests {
		if got := PhaseProfile(tc.path, "apply"); got != tc.want {
			t.Errorf("PhaseProfile(%q, apply) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestPhaseCPULine(t *testing.T) {
	p := PhaseCPU{WallSeconds: 1.5, Controller: CPUTime{0.5, 0.25}, Simulator: CPUTime{1, 0.5},
		MachineBusySeconds: 2.75, MachineSeconds: 3}
	want := "apply: 1.50s wall; controller 0.75s CPU (0.50 user, 0.25 sys), simulator 1.50s CPU (1.00 user, 0.50 sys); machine busy 2.75s of 3.00s, 0.50s outside both"
	if got := p.Line("apply"); got != want {
		t.Errorf("Line:\n got %s\nwant %s", got, want)
	}
	if got := p.Line("register"); !strings.HasPrefix(got, "register: 1.50s wall (ramp included); ") {
		t.Errorf("register line %q does not say the ramp is included", got)
	}
	p.Brokers, p.MachineBusySeconds = &CPUTime{0.25, 0.25}, 3
	want = "apply: 1.50s wall; controller 0.75s CPU (0.50 user, 0.25 sys), simulator 1.50s CPU (1.00 user, 0.50 sys), brokers 0.50s CPU (0.25 user, 0.25 sys); machine busy 3.00s of 3.00s, 0.25s outside all"
	if got := p.Line("apply"); got != want {
		t.Errorf("Line with brokers:\n got %s\nwant %s", got, want)
	}
}

// TestBrokersCountEveryBrokerProcess: the brokers' CPU time is the sum
// of every broker process's since the first reading; none named, none
// reported.
func TestBrokersCountEveryBrokerProcess(t *testing.T) {
	start := cpuReading{brokers: []CPUTime{{UserSeconds: 1}, {SystemSeconds: 2}}}
	end := cpuReading{brokers: []CPUTime{{UserSeconds: 1.5, SystemSeconds: 0.5}, {UserSeconds: 1, SystemSeconds: 2.25}}}
	p := end.since(start)
	if p.Brokers == nil || *p.Brokers != (CPUTime{UserSeconds: 1.5, SystemSeconds: 0.75}) {
		t.Fatalf("brokers %+v, want 1.5 s user and 0.75 s system", p.Brokers)
	}
	if p := (cpuReading{}).since(cpuReading{}); p.Brokers != nil {
		t.Errorf("no broker process named, brokers %+v; want none", p.Brokers)
	}
}

// TestSimulatorCountsDeviceProcesses: a device process's CPU time counts
// as the simulator's, from zero when it started after the first reading.
func TestSimulatorCountsDeviceProcesses(t *testing.T) {
	start := cpuReading{self: CPUTime{UserSeconds: 1}, devices: map[int]CPUTime{}}
	end := cpuReading{self: CPUTime{UserSeconds: 1.5}, devices: map[int]CPUTime{7: {UserSeconds: 2, SystemSeconds: 0.25}}}
	p := end.since(start)
	if p.Simulator.UserSeconds != 2.5 || p.Simulator.SystemSeconds != 0.25 {
		t.Fatalf("simulator %+v, want 2.5 s user and 0.25 s system", p.Simulator)
	}
}
