package controller

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/signing"
)

// device is an API client without a token, as a device that enrolls is.
func (tc *testController) device() *api.Client {
	return api.NewClient("http://"+tc.APIAddr().String(), "", nil)
}

func statusCode(err error) int {
	var se *api.StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

// TestEnrollAdmitsADeviceOnce: a code for one node admits that node once,
// without a token; the credential it gives connects to the broker, the
// code's labels are on the node, and the code is used up afterwards.
func TestEnrollAdmitsADeviceOnce(t *testing.T) {
	tc := startController(t, Config{})
	ctx := context.Background()
	code, err := tc.api.CreateEnrollment(ctx, api.EnrollmentRequest{Node: "gw-7", TTL: "1h", Labels: map[string]string{"site": "berlin"}})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(code.Code, "esn1_"), code.Code)

	got, err := tc.device().Enroll(ctx, api.EnrollRequest{Code: code.Code})
	require.NoError(t, err)
	assert.Equal(t, "gw-7", got.Node)
	assert.Equal(t, []string{tc.brokerURL()}, got.BrokerURLs, "the embedded broker on the host the device reached the API at")
	assert.Equal(t, map[string]string{"site": "berlin"}, got.Labels)

	// The credential is one the broker accepts.
	connected := make(chan struct{}, 1)
	cl, err := mqttclient.New(mqttclient.Options{BrokerURLs: got.BrokerURLs, ClientID: got.Node, Username: got.Username, Password: got.Token,
		OnConnect: func(context.Context) { connected <- struct{}{} }, FirstConnectJitter: time.Millisecond})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cl.Run(cctx) }()
	select {
	case <-connected:
	case <-time.After(wait):
		t.Fatal("the enrolled credential did not connect")
	}
	cancel()
	<-done

	// The labels are the node's once it announces itself.
	gw := startNode(t, tc.brokerURL(), tc.secret, gateway("gw-7", nil))
	defer gw.stop()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		n, err := tc.api.GetNode(ctx, "gw-7")
		if err != nil {
			return err
		}
		if n.Labels["site"] != "berlin" {
			return fmt.Errorf("labels %v", n.Labels)
		}
		return nil
	})

	_, err = tc.device().Enroll(ctx, api.EnrollRequest{Code: code.Code})
	require.Error(t, err)
	assert.Equal(t, http.StatusForbidden, statusCode(err))
	assert.Contains(t, err.Error(), "used up")
	list, err := tc.api.ListEnrollments(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Empty(t, list[0].Code, "a listed code has no secret")
	assert.Equal(t, []string{"gw-7"}, list[0].Enrolled)
}

// TestEnrollRefusals: every way a code does not admit a device is a 403
// and enrolls nothing.
func TestEnrollRefusals(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tc := startController(t, Config{Clock: clock, APIAuthFailureLimit: 100})
	ctx := context.Background()
	shared, err := tc.api.CreateEnrollment(ctx, api.EnrollmentRequest{NamePrefix: "gw-", Uses: 3, TTL: "1h"})
	require.NoError(t, err)
	single, err := tc.api.CreateEnrollment(ctx, api.EnrollmentRequest{Node: "gw-1"})
	require.NoError(t, err)
	known := startNode(t, tc.brokerURL(), tc.secret, gateway("gw-known", nil))
	defer known.stop()
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error { _, err := tc.api.GetNode(ctx, "gw-known"); return err })

	wrong := shared.Code[:len(shared.Code)-4] + "aaaa"
	if wrong == shared.Code {
		wrong = shared.Code[:len(shared.Code)-4] + "bbbb"
	}
	for _, tt := range []struct {
		name string
		req  api.EnrollRequest
		want string
	}{
		{"no code", api.EnrollRequest{Node: "gw-2"}, "not an enrollment code"},
		{"a token for a code", api.EnrollRequest{Code: tc.Token(), Node: "gw-2"}, "not an enrollment code"},
		{"a wrong secret", api.EnrollRequest{Code: wrong, Node: "gw-2"}, "unknown or wrong code"},
		{"an unknown id", api.EnrollRequest{Code: "esn1_aaaaaaaa_" + strings.Repeat("a", 32), Node: "gw-2"}, "unknown or wrong code"},
		{"a name outside the prefix", api.EnrollRequest{Code: shared.Code, Node: "sensor-2"}, `names starting with "gw-"`},
		{"an invalid name", api.EnrollRequest{Code: shared.Code, Node: "gw-UPPER"}, "node name"},
		{"an existing node's name", api.EnrollRequest{Code: shared.Code, Node: "gw-known"}, "exists"},
		{"another node's code", api.EnrollRequest{Code: single.Code, Node: "gw-2"}, "enrolls node gw-1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tc.device().Enroll(ctx, tt.req)
			require.Error(t, err)
			assert.Equal(t, http.StatusForbidden, statusCode(err), err.Error())
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	list, err := tc.api.ListEnrollments(ctx)
	require.NoError(t, err)
	for _, c := range list {
		assert.Empty(t, c.Enrolled, "code %s", c.ID)
	}

	// Expiry, on the controller's clock.
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	_, err = tc.device().Enroll(ctx, api.EnrollRequest{Code: shared.Code, Node: "gw-3"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "expired")

	// A revoked code admits nobody.
	require.NoError(t, tc.api.DeleteEnrollment(ctx, single.ID))
	_, err = tc.device().Enroll(ctx, api.EnrollRequest{Code: single.Code})
	assert.Contains(t, err.Error(), "unknown or wrong code")
	assert.Equal(t, http.StatusNotFound, statusCode(tc.api.DeleteEnrollment(ctx, single.ID)))

	// The operator's routes need the token; a device's has none.
	_, err = tc.device().CreateEnrollment(ctx, api.EnrollmentRequest{Node: "gw-9"})
	assert.ErrorIs(t, err, api.ErrUnauthorized)
	_, err = tc.device().ListEnrollments(ctx)
	assert.ErrorIs(t, err, api.ErrUnauthorized)
}

// TestEnrollCodeValidation: a request for a code names its bad field.
func TestEnrollCodeValidation(t *testing.T) {
	tc := startController(t, Config{})
	for _, tt := range []struct {
		req  api.EnrollmentRequest
		want string
	}{
		{api.EnrollmentRequest{TTL: "forever"}, "ttl"},
		{api.EnrollmentRequest{TTL: "1000h"}, "ttl"},
		{api.EnrollmentRequest{Node: "gw-1", Uses: 2}, "uses"},
		{api.EnrollmentRequest{Uses: 100000}, "uses"},
		{api.EnrollmentRequest{Node: "Not_A_Name"}, "node"},
		{api.EnrollmentRequest{Node: "gw-1", NamePrefix: "gw-"}, "namePrefix"},
		{api.EnrollmentRequest{Labels: map[string]string{"bad key!": "x"}}, "labels"},
	} {
		_, err := tc.api.CreateEnrollment(context.Background(), tt.req)
		require.Error(t, err, "%+v", tt.req)
		assert.Equal(t, http.StatusBadRequest, statusCode(err), err.Error())
		assert.Contains(t, err.Error(), tt.want)
	}
}

// TestEnrollRaceForTheLastUse: devices racing for a code's uses get
// exactly as many admissions as it has.
func TestEnrollRaceForTheLastUse(t *testing.T) {
	tc := startController(t, Config{})
	ctx := context.Background()
	code, err := tc.api.CreateEnrollment(ctx, api.EnrollmentRequest{Uses: 3})
	require.NoError(t, err)
	const devices = 12
	var wg sync.WaitGroup
	results := make([]error, devices)
	for i := range devices {
		wg.Go(func() {
			_, results[i] = tc.device().Enroll(ctx, api.EnrollRequest{Code: code.Code, Node: fmt.Sprintf("dev-%02d", i)})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range results {
		if err == nil {
			ok++
		} else {
			assert.Equal(t, http.StatusForbidden, statusCode(err), err.Error())
		}
	}
	assert.Equal(t, 3, ok)
	list, err := tc.api.ListEnrollments(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Len(t, list[0].Enrolled, 3)
}

// TestEnrollGuessingIsThrottled: refused codes count as failed
// authentications of their source, which is then refused for a while,
// right code or not.
func TestEnrollGuessingIsThrottled(t *testing.T) {
	tc := startController(t, Config{APIAuthFailureLimit: 3})
	ctx := context.Background()
	code, err := tc.api.CreateEnrollment(ctx, api.EnrollmentRequest{Node: "gw-1"})
	require.NoError(t, err)
	for range 3 {
		_, err := tc.device().Enroll(ctx, api.EnrollRequest{Code: "esn1_aaaaaaaa_" + strings.Repeat("b", 32)})
		require.Equal(t, http.StatusForbidden, statusCode(err))
	}
	_, err = tc.device().Enroll(ctx, api.EnrollRequest{Code: code.Code})
	assert.Equal(t, http.StatusTooManyRequests, statusCode(err), "%v", err)
}

// TestEnrollGivesTheFleetRoot: a controller that knows the fleet root
// (signing-trust-root) hands it to the devices it enrolls, which pin it.
func TestEnrollGivesTheFleetRoot(t *testing.T) {
	root, err := signing.GenerateKey()
	require.NoError(t, err)
	pub := root.Public().(ed25519.PublicKey)
	rootFile := filepath.Join(t.TempDir(), "root.pub")
	require.NoError(t, signing.WritePublicKeyFile(rootFile, pub))
	tc := startController(t, Config{Signing: true, SigningTrustRoot: rootFile})
	ctx := context.Background()
	code, err := tc.api.CreateEnrollment(ctx, api.EnrollmentRequest{Node: "gw-1"})
	require.NoError(t, err)
	got, err := tc.device().Enroll(ctx, api.EnrollRequest{Code: code.Code})
	require.NoError(t, err)
	assert.Equal(t, signing.FormatPublicKey(pub), got.TrustRoot)

	plain := startController(t, Config{})
	code, err = plain.api.CreateEnrollment(ctx, api.EnrollmentRequest{Node: "gw-1"})
	require.NoError(t, err)
	got, err = plain.device().Enroll(ctx, api.EnrollRequest{Code: code.Code})
	require.NoError(t, err)
	assert.Empty(t, got.TrustRoot, "no root known, none given")
}
