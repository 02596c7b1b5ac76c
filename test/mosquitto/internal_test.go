package mosquitto

import (
	"encoding/base64"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

func TestHashPasswordMatchesMosquittoPasswd(t *testing.T) {
	// Produced by mosquitto_passwd 2.0.11: mosquitto_passwd -b pw alice secret.
	const line = "alice:$7$101$26ZUebz2v7KjbnJm$EsJLcBuagwDYnTyypQ+rJXqXbO/QjyRzYe6A1GtRqgSoJ1oqF/dMMVNDkKCcusbtWcRPv1wHkbUOtCoYbL4rYA=="
	tests := []struct {
		name, password string
		match          bool
	}{
		{"right password", "secret", true},
		{"wrong password", "Secret", false},
	}
	user, want, _ := strings.Cut(line, ":")
	salt, err := base64.StdEncoding.DecodeString(strings.Split(want, "$")[3])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := HashPassword(tc.password, salt)
			if err != nil {
				t.Fatal(err)
			}
			if (got == want) != tc.match {
				t.Errorf("HashPassword(%q) for %s = %s; match with mosquitto_passwd = %v, want %v", tc.password, user, got, got == want, tc.match)
			}
		})
	}
}

func TestPasswordLine(t *testing.T) {
	tests := []struct {
		user    string
		wantErr bool
	}{
		{"node-1", false},
		{"", true},
		{"a:b", true},
		{"a\nb", true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.user), func(t *testing.T) {
			line, err := PasswordLine(tc.user, "pw")
			if (err != nil) != tc.wantErr {
				t.Fatalf("PasswordLine error = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && !strings.HasPrefix(line, tc.user+":$7$101$") {
				t.Errorf("line = %q, want %q prefix", line, tc.user+":$7$101$")
			}
		})
	}
	a, _ := PasswordLine("n", "pw")
	b, _ := PasswordLine("n", "pw")
	if a == b {
		t.Error("two lines for one password are equal: salt is not random")
	}
}

func TestACL(t *testing.T) {
	acl := ACL("ctl")
	want := []string{
		"pattern write edgeset/v1/nodes/%u/status",
		"pattern write edgeset/v1/nodes/%u/online",
		"pattern write edgeset/v1/nodes/%u/observed",
		"pattern write edgeset/v1/nodes/%u/events",
		"pattern read edgeset/v1/nodes/%u/desired",
		"pattern read edgeset/v1/revisions/#",
		"pattern read edgeset/v1/nodes/%u/secrets/+",
		"pattern read edgeset/v1/nodes/%u/exec/input/+",
		"pattern read edgeset/v1/configmaps/#",
		"user ctl",
		"topic readwrite edgeset/#",
	}
	lines := strings.Split(acl, "\n")
	for _, w := range want {
		if !containsLine(lines, w) {
			t.Errorf("ACL lacks line %q:\n%s", w, acl)
		}
	}
	// Every grant before the user line must be a pattern: a "topic" line
	// there would apply to anonymous clients only.
	for _, l := range lines {
		if strings.HasPrefix(l, "user ") {
			break
		}
		if strings.HasPrefix(l, "topic ") {
			t.Errorf("topic line %q before the first user line", l)
		}
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// fakeTB records Skip and Fatal instead of ending the real test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
}

func (f *fakeTB) Helper()                      {}
func (f *fakeTB) Skip(...any)                  { f.skipped = true; runtime.Goexit() }
func (f *fakeTB) Skipf(string, ...any)         { f.skipped = true; runtime.Goexit() }
func (f *fakeTB) Fatal(...any)                 { f.failed = true; runtime.Goexit() }
func (f *fakeTB) Fatalf(string, ...any)        { f.failed = true; runtime.Goexit() }
func (f *fakeTB) Errorf(string, ...any)        { f.failed = true }
func (f *fakeTB) Logf(format string, a ...any) {}

func TestLocateWithoutMosquitto(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		wantSkip  bool
		wantFatal bool
	}{
		{"absent skips", nil, true, false},
		{"absent under CI fails", map[string]string{"CI": "true"}, false, true},
		{"absent when required fails", map[string]string{"EDGESET_REQUIRE_MOSQUITTO": "1"}, false, true},
		{"bad EDGESET_MOSQUITTO fails", map[string]string{"EDGESET_MOSQUITTO": "/nonexistent/mosquitto"}, false, true},
	}
	saved := fallbackBinary
	t.Cleanup(func() { fallbackBinary = saved })
	fallbackBinary = "/nonexistent/sbin/mosquitto"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", t.TempDir())
			t.Setenv("CI", "")
			t.Setenv("EDGESET_REQUIRE_MOSQUITTO", "")
			t.Setenv("EDGESET_MOSQUITTO", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if _, err := exec.LookPath("mosquitto"); err == nil {
				t.Fatal("mosquitto still on PATH")
			}
			f := &fakeTB{TB: t}
			done := make(chan string)
			go func() {
				var got string
				defer func() { done <- got }()
				got = locate(f)
			}()
			if got := <-done; got != "" {
				t.Fatalf("locate returned %q", got)
			}
			if f.skipped != tc.wantSkip || f.failed != tc.wantFatal {
				t.Errorf("skipped=%v failed=%v, want skipped=%v failed=%v", f.skipped, f.failed, tc.wantSkip, tc.wantFatal)
			}
		})
	}
}
