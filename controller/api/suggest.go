package api

import "slices"

// Suggest returns up to max names close to name (by edit distance, at most
// a third of name's length, and at least 2), closest first: the
// "did you mean" of an unknown node or daemonset.
func Suggest(name string, names []string, max int) []string {
	limit := max3(len(name)/3, 2)
	type match struct {
		name string
		dist int
	}
	var ms []match
	for _, n := range names {
		if d := distance(name, n); d <= limit && n != name {
			ms = append(ms, match{n, d})
		}
	}
	slices.SortStableFunc(ms, func(a, b match) int { return a.dist - b.dist })
	out := make([]string, 0, max)
	for i := 0; i < len(ms) && i < max; i++ {
		out = append(out, ms[i].name)
	}
	return out
}

func max3(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
