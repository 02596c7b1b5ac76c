package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/sim/scale"
)

// envAsMain makes the test binary run as edgeset-sim itself, so a test can
// start it as the benchmark's controller host and device processes.
const envAsMain = "EDGESET_SIM_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envAsMain) == "1" {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "edgeset-sim:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBenchDeviceProcesses runs a small benchmark with its devices in
// three processes: every device of every process registers, runs the
// daemonset and its update, and the processes' reports add up to the
// fleet.
func TestBenchDeviceProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a controller and three device processes")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	t.Setenv(envAsMain, "1")
	const nodes = 61
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := scale.Run(ctx, scale.Options{
		Nodes: nodes, Ramp: 500, HostCommand: []string{exe, "--controller-host"},
		DeviceProcesses: 3, DeviceCommand: []string{exe, "--bench-devices"}, Timeout: time.Minute,
	})
	require.NoError(t, err)
	assert.Equal(t, nodes, res.Fleet.Nodes, "the processes' reports add up to the fleet")
	assert.Equal(t, nodes, res.Fleet.Final.Announced, "every device announced itself")
	assert.Equal(t, nodes, res.Fleet.ConnectSeconds.Count, "one connect time per device")
	assert.Zero(t, res.Fleet.NeverConnected)
	assert.Positive(t, res.ApplySeconds)
	assert.Positive(t, res.RolloutSeconds)
	assert.Positive(t, res.RampSeconds)
	assert.GreaterOrEqual(t, res.RegisterSeconds+res.SettleSeconds, edgeagent.DefaultSettleInterval.Seconds(),
		"the apply waits for the devices' second announcement")
	var instances, ready int
	for _, revs := range res.Fleet.Final.DaemonSets {
		for _, c := range revs {
			instances += c.Instances
			ready += c.Ready
		}
	}
	assert.Equal(t, nodes, instances, "the merged snapshot counts one instance per device")
	assert.Equal(t, nodes, ready)
}

// TestBenchSigning runs a small signed benchmark, its devices in this
// process and in two device processes: every device pins the run's fleet
// root and applies only what the controller signed under it, so the
// apply and rollout complete only if the host signs, its key is
// delegated and the root reaches every device. The devices of a process
// share the signatures they verified, unless --verify-each.
func TestBenchSigning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a controller and device processes")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	t.Setenv(envAsMain, "1")
	for _, tc := range []struct {
		procs      int
		verifyEach bool
	}{{1, false}, {2, false}, {2, true}} {
		t.Run(fmt.Sprintf("%d device processes, verify each %v", tc.procs, tc.verifyEach), func(t *testing.T) {
			const nodes = 20
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := scale.Run(ctx, scale.Options{
				Nodes: nodes, Ramp: 500, HostCommand: []string{exe, "--signing", "--controller-host"}, Signing: true,
				DeviceProcesses: tc.procs, DeviceCommand: []string{exe, "--bench-devices"}, Timeout: time.Minute,
				SettleWait: -1, // TestBenchDeviceProcesses waits
				VerifyEach: tc.verifyEach,
			})
			require.NoError(t, err)
			fin := res.Fleet.Final
			assert.Equal(t, nodes, fin.Announced)
			assert.Positive(t, res.ApplySeconds)
			assert.Positive(t, res.RolloutSeconds)
			if tc.verifyEach {
				assert.Zero(t, fin.SignaturesVerified+fin.SignaturesShared, "no shared cache")
				return
			}
			// Each process's devices verify one signature per batch of
			// four desired states and per revision, and share it.
			assert.Positive(t, fin.SignaturesVerified)
			assert.Greater(t, fin.SignaturesShared, fin.SignaturesVerified)
		})
	}
}

// TestBenchSigningNeedsASigningHost: a signed benchmark against a host
// that does not sign says so instead of waiting for devices that refuse
// everything.
func TestBenchSigningNeedsASigningHost(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	t.Setenv(envAsMain, "1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = scale.Run(ctx, scale.Options{Nodes: 1, HostCommand: []string{exe, "--controller-host"}, Signing: true})
	require.ErrorContains(t, err, "does not sign")
}
