package natstest

import "testing"

func TestSubjectMatches(t *testing.T) {
	tests := []struct {
		filter, subject string
		want            bool
	}{
		{"a.b.c", "a.b.c", true},
		{"a.b.c", "a.b.d", false},
		{"a.b", "a.b.c", false},
		{"a.b.c", "a.b", false},
		{"a.*.c", "a.b.c", true},
		{"a.*", "a.b.c", false},
		{"*", "a", true},
		{"a.>", "a.b.c", true},
		{"a.>", "a.b", true},
		{"a.>", "a", false},
		{">", "a.b", true},
		{"a.*.>", "a.b", false},
		{"a.*.>", "a.b.c", true},
		{"$SYS.REQ.USER.AUTH", "$SYS.REQ.USER.AUTH", true},
		{"$SYS.REQ.USER.*", "$SYS.REQ.USER.AUTH", true},
		{"$SYS.REQ.SERVER.*", "$SYS.REQ.USER.AUTH", false},
		{"bench.r0.*", "bench.r0.000000", true},
	}
	for _, tc := range tests {
		t.Run(tc.filter+" "+tc.subject, func(t *testing.T) {
			if got := subjectMatches(tc.filter, tc.subject); got != tc.want {
				t.Errorf("subjectMatches(%q, %q) = %t, want %t", tc.filter, tc.subject, got, tc.want)
			}
		})
	}
}

func TestRoutedAccount(t *testing.T) {
	tests := []struct {
		name, route, sid, subject, want string
	}{
		{"pooled route", "", "R EDGESET bench.r0.*", "bench.r0.*", "EDGESET"},
		{"pooled route, queue", "", "R AUTH $SYS.REQ.USER.AUTH q", "$SYS.REQ.USER.AUTH", "AUTH"},
		{"older peer", "", "EDGESET a.b", "a.b", "EDGESET"},
		{"pinned route", "$SYS", "R $SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING", "$SYS"},
		{"no account", "", "a.b", "a.b", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := routedAccount(tc.route, tc.sid, tc.subject); got != tc.want {
				t.Errorf("routedAccount(%q, %q, %q) = %q, want %q", tc.route, tc.sid, tc.subject, got, tc.want)
			}
		})
	}
}
