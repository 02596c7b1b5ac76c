package natstest

import (
	"os"
	"testing"

	"github.com/nats-io/nats.go"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBinary()
	os.Exit(code)
}

// TestInterestAndReload: a subscription made on one member is reported
// there (/subsz) and on the others once it crossed the routes (/routez),
// for its account and the subjects it matches only; a reload by SIGHUP is
// seen in the member's log and keeps the configuration's own users
// connected.
func TestInterestAndReload(t *testing.T) {
	c := StartCluster(t, 3)
	requireInterest := func(account, subject string, want bool) {
		t.Helper()
		for _, p := range c.Procs {
			got, err := p.Interest(account, subject)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s: interest in %s of account %s: %t, want %t", p.Name(), subject, account, got, want)
			}
		}
	}
	requireInterest(AuthAccount, AuthCalloutSubject, false)
	requireInterest(AuthAccount, "edgeset-test.a", false)

	nc, err := nats.Connect(c.Clients[0], nats.UserInfo(AuthUser, c.AuthPassword), nats.NoReconnect())
	if err != nil {
		t.Fatalf("connect as %s: %v", AuthUser, err)
	}
	defer nc.Close()
	if _, err := nc.SubscribeSync("edgeset-test.*"); err != nil {
		t.Fatal(err)
	}
	c.WaitInterest(t, AuthAccount, "edgeset-test.a")
	requireInterest(AuthAccount, "edgeset-test.b", true)
	requireInterest(AuthAccount, "edgeset-test.a.b", false)
	requireInterest(Account, "edgeset-test.a", false)
	requireInterest(AuthAccount, AuthCalloutSubject, false)

	c.Procs[0].Reload(t)
	if err := nc.Flush(); err != nil {
		t.Fatalf("the auth user's connection after the reload: %v", err)
	}
}
