package store

import (
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/audit"
)

// BenchmarkAuditEntry measures what the audit log adds to one mutating
// API call: the entry written ahead (AppendAudit) and completed
// (FinishAudit), two fsynced transactions, on a log at its retention
// limit so every append also drops the oldest entry.
func BenchmarkAuditEntry(b *testing.B) {
	s, _ := openTempUnmirrored(b, Options{})
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ret := audit.Retention{MaxEntries: 1000, MaxAge: 24 * time.Hour}
	e := audit.Entry{User: "ops", Role: "operator", Via: audit.ViaAPI, Method: "PATCH",
		Path: "/api/v1/nodes/gw-0042", Action: "PATCH /api/v1/nodes/{name}", Remote: "192.0.2.10:51234", Time: now}
	for range 1000 {
		if _, err := s.AppendAudit(e, ret, now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		seq, err := s.AppendAudit(e, ret, now)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.FinishAudit(seq, 200, "", time.Millisecond); err != nil {
			b.Fatal(err)
		}
	}
}
