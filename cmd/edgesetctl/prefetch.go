package main

import (
	"fmt"
	"strconv"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/schema"
)

// prefetchNote says how far a rollout's downloads are under
// spec.rollout.prefetch, for rollout status and describe:
// "; prefetched 812 / 1,000 (2 downloading: 12.3 MiB / 40.0 MiB), 188
// waiting for their download". Empty without prefetch, or once complete.
func prefetchNote(r api.RolloutStatus, ins []api.Instance) string {
	p := r.Prefetch
	if p == nil || r.Complete {
		return ""
	}
	s := fmt.Sprintf("; prefetched %s / %s", grouped(p.Done), grouped(p.Nodes))
	if p.Downloading > 0 {
		s += fmt.Sprintf(" (%s downloading", grouped(p.Downloading))
		if done, total := downloadBytes(r.Target, ins); total > 0 {
			s += fmt.Sprintf(": %s / %s", telemetry.Bytes(done), telemetry.Bytes(total))
		}
		s += ")"
	}
	if r.WaitingForPrefetch > 0 {
		s += fmt.Sprintf(", %s waiting for their download", grouped(r.WaitingForPrefetch))
	}
	if p.Unsupported > 0 {
		s += fmt.Sprintf("; %s not prefetching (agent without prefetch support)", grouped(p.Unsupported))
	}
	return s
}

// downloadBytes sums the bytes of the downloads of revision target under
// way on the instances' nodes.
func downloadBytes(target string, ins []api.Instance) (done, total int64) {
	for _, in := range ins {
		if p := in.Prefetch; p != nil && p.Revision == target && !p.Done {
			done += p.BytesDone
			total += p.BytesTotal
		}
	}
	return done, total
}

// instancePrefetch is one node's download for describe's instance table:
// "prefetch 12.3 MiB / 40.0 MiB", "prefetched", or the download's error.
func instancePrefetch(p *api.InstancePrefetch) string {
	switch {
	case p == nil:
		return ""
	case p.Done:
		return "prefetched " + shortHash(p.Revision)
	case p.Error != "":
		return "prefetch " + shortHash(p.Revision) + " failed: " + p.Error
	case p.BytesTotal > 0:
		return fmt.Sprintf("prefetch %s: %s / %s", shortHash(p.Revision), telemetry.Bytes(p.BytesDone), telemetry.Bytes(p.BytesTotal))
	}
	return "prefetch " + shortHash(p.Revision) + ": starting"
}

// grouped formats n with thousands separators: 1,000.
func grouped(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + grouped(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// prefetchPolicyString renders spec.rollout.prefetch for describe.
func prefetchPolicyString(p *schema.PrefetchPolicy) string {
	s := fmt.Sprintf("before switching, at most %d nodes per site", p.Concurrency())
	if p.TopologyKey != "" {
		s += " (sites by label " + p.TopologyKey + ")"
	}
	return s
}
