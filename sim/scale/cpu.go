package scale

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/PID/stat and /proc/stat:
// the kernel's USER_HZ, 100 on every Linux architecture Go supports
// (sysconf(_SC_CLK_TCK) needs cgo to ask).
const userHZ = 100

// CPUTime is CPU time a process (or the machine) spent, in seconds.
type CPUTime struct {
	UserSeconds   float64 `json:"userSeconds"`
	SystemSeconds float64 `json:"systemSeconds"`
}

// Total is user plus system time.
func (c CPUTime) Total() float64 { return c.UserSeconds + c.SystemSeconds }

// Sub returns c minus d: the time spent between two readings.
func (c CPUTime) Sub(d CPUTime) CPUTime {
	return CPUTime{UserSeconds: c.UserSeconds - d.UserSeconds, SystemSeconds: c.SystemSeconds - d.SystemSeconds}
}

// PhaseCPU is the CPU time each process spent during one phase of the
// benchmark, and the wall time of the window it was measured over.
type PhaseCPU struct {
	// WallSeconds is the measured window: for registration it includes
	// the ramp, for apply and rollout it is the phase itself plus the
	// API call that starts it.
	WallSeconds float64 `json:"wallSeconds"`
	// Controller is the controller host subprocess: controller, embedded
	// broker and store.
	Controller CPUTime `json:"controller"`
	// Simulator is the benchmark process, with its device processes when
	// the devices run in their own (Options.DeviceProcesses): the
	// simulated agents, plus the benchmark's own polling of the
	// controller's API.
	Simulator CPUTime `json:"simulator"`
	// MachineBusySeconds is the busy time of every CPU of the machine
	// (from /proc/stat), of MachineSeconds (wall time times CPUs): what
	// is left after Controller and Simulator is other work.
	MachineBusySeconds float64 `json:"machineBusySeconds"`
	MachineSeconds     float64 `json:"machineSeconds"`
	// Brokers is the external broker's processes (Options.BrokerPIDs),
	// nil when the run names none: with the embedded broker its time is
	// the controller's.
	Brokers *CPUTime `json:"brokers,omitempty"`
	// Profile splits the controller host's CPU profile of the phase by
	// owner; nil unless Options.CPUProfile is set.
	Profile *ProfileSplit `json:"profile,omitempty"`
}

// OtherSeconds is the machine's busy time spent outside the controller,
// the simulator and the external broker's processes.
func (p PhaseCPU) OtherSeconds() float64 {
	other := p.MachineBusySeconds - p.Controller.Total() - p.Simulator.Total()
	if p.Brokers != nil {
		other -= p.Brokers.Total()
	}
	return other
}

// Line is the phase's CPU figures on one line, for instance
//
//	apply: 1.54s wall; controller 0.76s CPU (0.54 user, 0.22 sys), simulator 0.63s CPU (0.41 user, 0.22 sys); machine busy 3.05s of 3.07s, 1.66s outside both
//
// With an external broker's processes it names them too, and "outside
// all" is what none of them spent.
func (p PhaseCPU) Line(phase string) string {
	window := ""
	if phase == "register" {
		window = " (ramp included)"
	}
	brokers, outside := "", "both"
	if p.Brokers != nil {
		brokers = fmt.Sprintf(", brokers %.2fs CPU (%.2f user, %.2f sys)", p.Brokers.Total(), p.Brokers.UserSeconds, p.Brokers.SystemSeconds)
		outside = "all"
	}
	return fmt.Sprintf("%s: %.2fs wall%s; controller %.2fs CPU (%.2f user, %.2f sys), simulator %.2fs CPU (%.2f user, %.2f sys)%s; machine busy %.2fs of %.2fs, %.2fs outside %s",
		phase, p.WallSeconds, window,
		p.Controller.Total(), p.Controller.UserSeconds, p.Controller.SystemSeconds,
		p.Simulator.Total(), p.Simulator.UserSeconds, p.Simulator.SystemSeconds, brokers,
		p.MachineBusySeconds, p.MachineSeconds, p.OtherSeconds(), outside)
}

// cpuReading is one reading of every figure a PhaseCPU is the difference of.
type cpuReading struct {
	at                 time.Time
	controller, self   CPUTime
	devices            map[int]CPUTime // by device process
	brokers            []CPUTime       // by broker process; nil when none is named
	machine            CPUTime         // busy time as user and system
	machineIdleSeconds float64
}

// readCPU takes a reading of the controller host pid, this process, the
// device processes, the external broker's processes and the machine.
func readCPU(pid int, devices, brokers []int) (cpuReading, error) {
	r := cpuReading{at: time.Now(), devices: make(map[int]CPUTime, len(devices))}
	var err error
	if r.controller, err = ProcessCPU(pid); err != nil {
		return r, err
	}
	if r.self, err = SelfCPU(); err != nil {
		return r, err
	}
	for _, d := range devices {
		if r.devices[d], err = ProcessCPU(d); err != nil {
			return r, fmt.Errorf("device process: %w", err)
		}
	}
	for _, b := range brokers {
		c, err := ProcessCPU(b)
		if err != nil {
			return r, fmt.Errorf("broker process: %w", err)
		}
		r.brokers = append(r.brokers, c)
	}
	r.machine, r.machineIdleSeconds, err = MachineCPU()
	return r, err
}

// since is the PhaseCPU from reading start to r.
func (r cpuReading) since(start cpuReading) PhaseCPU {
	busy := r.machine.Sub(start.machine).Total()
	p := PhaseCPU{
		WallSeconds:        r.at.Sub(start.at).Seconds(),
		Controller:         r.controller.Sub(start.controller),
		Simulator:          r.simulator().Sub(start.simulator()),
		MachineBusySeconds: busy,
		MachineSeconds:     busy + r.machineIdleSeconds - start.machineIdleSeconds,
	}
	if r.brokers != nil {
		var sum CPUTime
		for i, c := range r.brokers {
			d := c.Sub(start.brokers[i])
			sum.UserSeconds += d.UserSeconds
			sum.SystemSeconds += d.SystemSeconds
		}
		p.Brokers = &sum
	}
	return p
}

// simulator is this process's CPU time plus its device processes'. A
// device process started after a reading counts from zero in it.
func (r cpuReading) simulator() CPUTime {
	sum := r.self
	for _, c := range r.devices {
		sum.UserSeconds += c.UserSeconds
		sum.SystemSeconds += c.SystemSeconds
	}
	return sum
}

// ProcessCPU returns the user and system time of pid so far, from
// /proc/PID/stat (10 ms resolution).
func ProcessCPU(pid int) (CPUTime, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return CPUTime{}, err
	}
	return parseProcStat(string(data), path)
}

// parseProcStat reads utime and stime, fields 14 and 15 of a
// /proc/PID/stat line. The command name (field 2, in parentheses) may
// hold spaces and parentheses, so fields count from its last ')'.
func parseProcStat(line, path string) (CPUTime, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return CPUTime{}, fmt.Errorf("%s: no command name in %q", path, line)
	}
	fields := strings.Fields(line[i+1:]) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return CPUTime{}, fmt.Errorf("%s: %d fields after the command name, want at least 13", path, len(fields))
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return CPUTime{}, fmt.Errorf("%s: utime %q, stime %q: not tick counts", path, fields[11], fields[12])
	}
	return CPUTime{UserSeconds: float64(utime) / userHZ, SystemSeconds: float64(stime) / userHZ}, nil
}

// SelfCPU returns this process's user and system time so far
// (getrusage, microsecond resolution).
func SelfCPU() (CPUTime, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPUTime{}, fmt.Errorf("getrusage: %w", err)
	}
	sec := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	return CPUTime{UserSeconds: sec(ru.Utime), SystemSeconds: sec(ru.Stime)}, nil
}

// MachineCPU returns the busy time of all CPUs so far, as user (user and
// nice) and system (system, irq, softirq, steal) time, and their idle time
// (idle and iowait), from the first line of /proc/stat.
func MachineCPU() (busy CPUTime, idleSeconds float64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTime{}, 0, err
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return parseMachineStat(first)
}

// parseMachineStat reads the aggregate "cpu" line of /proc/stat.
func parseMachineStat(line string) (CPUTime, float64, error) {
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return CPUTime{}, 0, fmt.Errorf("/proc/stat: first line %q is not the cpu total", line)
	}
	var t [8]float64 // user nice system idle iowait irq softirq steal
	for i := range t {
		n, err := strconv.ParseUint(fields[i+1], 10, 64)
		if err != nil {
			return CPUTime{}, 0, fmt.Errorf("/proc/stat: cpu field %d %q: %w", i+1, fields[i+1], err)
		}
		t[i] = float64(n) / userHZ
	}
	busy := CPUTime{UserSeconds: t[0] + t[1], SystemSeconds: t[2] + t[5] + t[6] + t[7]}
	return busy, t[3] + t[4], nil
}
