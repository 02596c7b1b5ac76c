package audit

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestRetentionDrop(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ret := Retention{MaxEntries: 10, MaxAge: 24 * time.Hour}
	cases := []struct {
		name   string
		ret    Retention
		count  int
		oldest time.Time
		drop   bool
	}{
		{"within both", ret, 10, now.Add(-time.Hour), false},
		{"one too many", ret, 11, now, true},
		{"too old", ret, 1, now.Add(-25 * time.Hour), true},
		{"exactly the age", ret, 1, now.Add(-24 * time.Hour), false},
		{"defaults keep a day-old entry", Retention{}, DefaultMaxEntries, now.Add(-24 * time.Hour), false},
		{"defaults drop past the count", Retention{}, DefaultMaxEntries + 1, now, true},
		{"defaults drop past the age", Retention{}, 1, now.Add(-DefaultMaxAge - time.Second), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.drop, tc.ret.Drop(tc.count, tc.oldest, now))
		})
	}
}

func TestFilterMatch(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	e := Entry{Seq: 5, Time: at, User: "ops"}
	cases := []struct {
		name string
		f    Filter
		want bool
	}{
		{"all", Filter{}, true},
		{"after an earlier seq", Filter{SinceSeq: 4}, true},
		{"not after itself", Filter{SinceSeq: 5}, false},
		{"since its time", Filter{Since: at}, true},
		{"since later", Filter{Since: at.Add(time.Second)}, false},
		{"its user", Filter{User: "ops"}, true},
		{"another user", Filter{User: "ci"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.f.Match(e)) })
	}
}

func TestClipKeepsRunesWhole(t *testing.T) {
	assert.Equal(t, "short", Clip("  short\n"))
	long := strings.Repeat("é", MaxMessage) // 2 bytes each
	c := Clip(long)
	assert.LessOrEqual(t, len(c), MaxMessage)
	assert.True(t, utf8.ValidString(c))
	assert.True(t, strings.HasSuffix(c, "..."))
}

func TestResult(t *testing.T) {
	assert.Equal(t, "unknown (not answered)", Entry{}.Result())
	assert.Equal(t, "403 Forbidden", Entry{Status: 403}.Result())
}
