package schema

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// The hand-written matchers of the hot validation paths against the
// regular expressions they replace: equal on edge cases and on random
// strings over an alphabet that reaches every branch.
func TestMatchersAgreeWithRegexps(t *testing.T) {
	cases := []struct {
		name  string
		re    *regexp.Regexp
		match func(string) bool
	}{
		{"dns1123 label", regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`), isDNS1123Label},
		{"revision hash", regexp.MustCompile(`^[0-9a-f]{20}$`), isRevisionHash},
	}
	edge := []string{"", "a", "-", "a-", "-a", "a-b", "A", "a.b", "0", "00000000000000000000", "0000000000000000000g",
		"000000000000000000000", "abcdefabcdefabcdefab", "ABCDEFABCDEFABCDEFAB", "a\n", "é"}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abfgz09-._A\n"
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inputs := append([]string(nil), edge...)
			for range 20000 {
				b := make([]byte, r.IntN(24))
				for i := range b {
					b[i] = alphabet[r.IntN(len(alphabet))]
				}
				inputs = append(inputs, string(b))
			}
			for _, s := range inputs {
				if got, want := tc.match(s), tc.re.MatchString(s); got != want {
					t.Fatalf("%q: matcher says %t, regexp %t", s, got, want)
				}
			}
		})
	}
}
