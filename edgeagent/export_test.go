package edgeagent

import "time"

// SetProbeSecond shortens the probe time unit (initialDelaySeconds,
// periodSeconds, timeoutSeconds) for tests. Call it before Run.
func SetProbeSecond(a *Agent, d time.Duration) { a.probes.second = d }

// TerminationLogPath is terminationLogPath, for tests that write a
// container's termination message.
var TerminationLogPath = terminationLogPath
