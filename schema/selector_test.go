package schema

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSelectorMatches(t *testing.T) {
	labels := map[string]string{"site": "berlin", "role": "gateway", "tier": "3", "example.com/zone": "a"}
	cases := []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"site=berlin", true},
		{"site==berlin", true},
		{"site = berlin", true},
		{"site!=berlin", false},
		{"site!=paris", true},
		{"zone!=a", true},
		{"site=paris", false},
		{"role", true},
		{"!role", false},
		{"!zone", true},
		{"site=berlin,role=gateway", true},
		{"site=berlin,role=sensor", false},
		{"site in (berlin,paris)", true},
		{"site in (paris)", false},
		{"site in ( paris , berlin )", true},
		{"zone in (a)", false},
		{"site notin (paris)", true},
		{"site notin (paris,berlin)", false},
		{"zone notin (a)", true},
		{"example.com/zone in (a),role,!zone,site!=x", true},
		{"tier>2", true},
		{"tier>3", false},
		{"tier<4", true},
		{"site>1", false},
		{"empty=", false},
	}
	for _, tc := range cases {
		t.Run(tc.sel, func(t *testing.T) {
			sel, err := ParseSelector(tc.sel)
			require.NoError(t, err)
			assert.Equal(t, tc.want, sel.Matches(labels))
		})
	}
}

func TestParseSelectorErrors(t *testing.T) {
	cases := []struct{ sel, want string }{
		{"site in (a,b", "unable to parse requirement: found '', expected: ',', or ')'"},
		{"site in a", "unable to parse requirement: found 'a', expected: '('"},
		{"site in ()", "a set needs at least one value"},
		{"a,,b", "found ',', expected: identifier after ','"},
		{"a,", "found '', expected: identifier after ','"},
		{",a", "found ',', expected: !, identifier, or 'end of string'"},
		{"site (a)", "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"},
		{"site=a b", "found 'b', expected: ',' or 'end of string'"},
		{"-bad=x", `invalid label key "-bad"`},
		{"site=-x", `invalid label value "-x"`},
		{"site in (ok,-x)", `invalid label value "-x"`},
		{"tier>x", "the value must be an integer"},
		{"!", "found '', expected: identifier"},
	}
	for _, tc := range cases {
		t.Run(tc.sel, func(t *testing.T) {
			_, err := ParseSelector(tc.sel)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
