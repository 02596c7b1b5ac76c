package schema

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestImageSourceDecodes: imageSource decodes under edgeset.io/v1 and an
// unknown value is refused naming the field.
func TestImageSourceDecodes(t *testing.T) {
	const manifest = `apiVersion: edgeset.io/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      imageSource: %s
      containers: [{name: app, image: "app:v1"}]
`
	objs, _, err := Decode("ds.yaml", []byte(fmt.Sprintf(manifest, "controller")))
	require.NoError(t, err)
	ds := objs[0].DaemonSet
	assert.Equal(t, ImageSourceController, ds.Spec.Template.Spec.ImageSource)

	_, _, err = Decode("ds.yaml", []byte(fmt.Sprintf(manifest, "nowhere")))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.template.spec.imageSource")
}
