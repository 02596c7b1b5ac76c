package access

import (
	"fmt"
	"testing"
)

// BenchmarkAuthenticate measures one bearer-token check against a user
// table of n users: the hash of the token compared with every user's in
// constant time (the cost of every API request).
func BenchmarkAuthenticate(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("users=%d", n), func(b *testing.B) {
			users, err := NewUsers(newMemStore(), Limits{MaxUsers: n + 1}, "admin-token-0123456789abcdef", nil)
			if err != nil {
				b.Fatal(err)
			}
			var token string
			for i := range n - 1 {
				_, tok, err := users.Create(Spec{Name: fmt.Sprintf("u%d", i), Role: RoleViewer}, "admin")
				if err != nil {
					b.Fatal(err)
				}
				token = tok
			}
			if token == "" {
				token = "admin-token-0123456789abcdef"
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := users.Authenticate(token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
