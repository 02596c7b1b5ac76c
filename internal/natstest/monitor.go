package natstest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// What the members report on their HTTP monitoring endpoints (nats-server's
// monitor.go), decoded into the few fields the tests read.

// monitorClient bounds each request to a member's monitoring endpoint.
var monitorClient = &http.Client{Timeout: 10 * time.Second}

// getJSON decodes the JSON a monitoring endpoint of the member (path and
// query) answers into v.
func (p *Proc) getJSON(path string, v any) error {
	u := p.Monitor(path)
	resp, err := monitorClient.Get(u)
	if err != nil {
		return fmt.Errorf("nats-server %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("nats-server %s: GET %s: %s: %s", p.name, u, resp.Status, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("nats-server %s: GET %s: %w", p.name, u, err)
	}
	return nil
}

// Interest reports whether the member knows of a subscriber in account
// to subject (a literal subject, as published), connected to it (/subsz)
// or to a peer whose interest crossed the routes (/routez): whether a
// message published on the member is delivered to someone.
func (p *Proc) Interest(account, subject string) (bool, error) {
	var subsz struct {
		Total int `json:"total"`
	}
	q := url.Values{"subs": {"1"}, "acc": {account}, "test": {subject}}
	if err := p.getJSON("/subsz?"+q.Encode(), &subsz); err != nil {
		return false, err
	}
	if subsz.Total > 0 {
		return true, nil
	}
	var routez struct {
		Routes []struct {
			Account string `json:"account"` // set on a route pinned to one account
			Subs    []struct {
				Subject string `json:"subject"`
				Sid     string `json:"sid"`
			} `json:"subscriptions_list_detail"`
		} `json:"routes"`
	}
	if err := p.getJSON("/routez?subs=detail", &routez); err != nil {
		return false, err
	}
	for _, r := range routez.Routes {
		for _, s := range r.Subs {
			if routedAccount(r.Account, s.Sid, s.Subject) == account && subjectMatches(s.Subject, subject) {
				return true, nil
			}
		}
	}
	return false, nil
}

// routedAccount is the account of a subscription a peer sent over a
// route: the route's own when it is pinned to one account, otherwise the
// field before the subject in the subscription's key ("R ACCOUNT SUBJECT
// [QUEUE]", or "ACCOUNT SUBJECT" from older peers). "" when neither names
// one.
func routedAccount(routeAccount, sid, subject string) string {
	if routeAccount != "" {
		return routeAccount
	}
	fields := strings.Fields(sid)
	for i := 1; i < len(fields); i++ {
		if fields[i] == subject {
			return fields[i-1]
		}
	}
	return ""
}

// subjectMatches reports whether a subscription to filter (with '*' for
// one token and a final '>' for one or more) receives a message published
// on the literal subject.
func subjectMatches(filter, subject string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" && i == len(ft)-1 {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}

// interestTimeout bounds the wait for a subscription to reach every
// member.
const interestTimeout = 30 * time.Second

// WaitInterest waits until each of members (indexes into Procs; every
// member when none is given) knows of a subscriber in account to subject:
// a subscription made on one member reaches the others over the routes a
// moment later, and a message published there before that is not
// delivered to it.
func (c *Procs) WaitInterest(t testing.TB, account, subject string, members ...int) {
	t.Helper()
	if len(members) == 0 {
		for i := range c.Procs {
			members = append(members, i)
		}
	}
	checkfor.Eventually(t, interestTimeout, 10*time.Millisecond, func() error {
		for _, i := range members {
			ok, err := c.Procs[i].Interest(account, subject)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s has no subscriber to %s in account %s yet", c.Procs[i].name, subject, account)
			}
		}
		return nil
	})
}

// WaitForResponder waits until every member knows of a subscriber to the
// auth callout subject: a responder subscribed on one member is known to
// the others only once its interest has crossed the routes, and until
// then their clients are refused at the auth timeout.
func (c *Procs) WaitForResponder(t testing.TB) {
	t.Helper()
	c.WaitInterest(t, AuthAccount, AuthCalloutSubject)
}

// Stream is what a member reports of one of its JetStream streams (/jsz).
type Stream struct {
	Name    string     `json:"name"`
	Cluster *RaftGroup `json:"cluster"`
	State   struct {
		Consumers int `json:"consumer_count"`
	} `json:"state"`
	// Consumers are listed only when asked for (Streams).
	Consumers []Consumer `json:"consumer_detail"`
}

// Consumer is what a member reports of one of a stream's consumers.
type Consumer struct {
	Name    string     `json:"name"`
	Cluster *RaftGroup `json:"cluster"`
}

// RaftGroup is a replicated stream's or consumer's group as a member sees
// it: its leader's server name and the other replicas.
type RaftGroup struct {
	Leader   string `json:"leader"`
	Replicas []struct {
		Name string `json:"name"`
	} `json:"replicas"`
}

// Streams returns the streams of account that the member holds, each
// with its consumers listed when withConsumers is set.
func (p *Proc) Streams(account string, withConsumers bool) ([]Stream, error) {
	q := url.Values{"acc": {account}, "accounts": {"true"}, "streams": {"true"}}
	if withConsumers {
		q.Set("consumers", "true")
	}
	var jsz struct {
		Accounts []struct {
			Name    string   `json:"name"`
			Streams []Stream `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := p.getJSON("/jsz?"+q.Encode(), &jsz); err != nil {
		return nil, err
	}
	var streams []Stream
	for _, a := range jsz.Accounts {
		if a.Name == account {
			streams = append(streams, a.Streams...)
		}
	}
	return streams, nil
}

// StreamLeader waits until a member reports itself the leader of
// account's stream name and returns its index.
func (c *Procs) StreamLeader(t testing.TB, account, name string) int {
	t.Helper()
	leader := -1
	checkfor.Eventually(t, interestTimeout, 10*time.Millisecond, func() error {
		for i, p := range c.Procs {
			streams, err := p.Streams(account, false)
			if err != nil {
				return err
			}
			for _, s := range streams {
				if s.Name == name && s.Cluster != nil && s.Cluster.Leader == p.name {
					leader = i
					return nil
				}
			}
		}
		return fmt.Errorf("no member leads stream %s of account %s", name, account)
	})
	return leader
}
