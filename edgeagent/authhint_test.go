package edgeagent

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAuthRefusedHintNamesRevocationFile: the hint names the controller's
// revocation file as it is called (credential.RevokedFile), so an operator
// can look at it.
func TestAuthRefusedHintNamesRevocationFile(t *testing.T) {
	hint := authRefusedHint("gw-1", "tcp://ctl:1883")
	assert.Contains(t, hint, "DATA_DIR/revoked-tokens on the controller")
	assert.Contains(t, hint, "edgesetctl token create gw-1")
	assert.Contains(t, hint, "tcp://ctl:1883")
}
