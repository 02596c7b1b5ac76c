package schema

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// nodeNameCases reads testdata/nodenames/names.txt, the table every entry
// point taking a node name runs.
func nodeNameCases(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("testdata/nodenames/names.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cases := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		verdict, name, _ := strings.Cut(line, " ")
		cases[name] = verdict == "valid"
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestNodeNameRule: the one rule, and every schema path that takes a node
// name (wire messages, node files) applies it.
func TestNodeNameRule(t *testing.T) {
	cases := nodeNameCases(t)
	cases[strings.Repeat("a", 253)] = true
	cases[strings.Repeat("a", 254)] = false
	cases[""] = false
	for name, valid := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ValidNodeName(name); got != valid {
				t.Errorf("ValidNodeName(%q) = %v, want %v", name, got, valid)
			}
			if problem := NodeNameProblem(name); (problem == "") != valid {
				t.Errorf("NodeNameProblem(%q) = %q", name, problem)
			}
			payload := `{"schemaVersion":1,"node":` + quote(name) + `,"online":true,"session":1}`
			if _, err := DecodePresence([]byte(payload)); (err == nil) != valid {
				t.Errorf("DecodePresence with node %q: err = %v, want valid=%v", name, err, valid)
			}
		})
	}
}

func quote(s string) string { return `"` + s + `"` }
