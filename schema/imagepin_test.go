package schema

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	manifestDigest = "sha256:" + strings.Repeat("ab", 32)
	configDigest   = "sha256:" + strings.Repeat("cd", 32)
)

// pinnedTemplate is sampleTemplate with an init container and the given
// annotation value.
func pinnedTemplate(pins string) PodTemplateSpec {
	t := sampleTemplate()
	t.Spec.InitContainers = []Container{{Name: "setup", Image: "example.com/setup:2"}}
	t.Metadata.Annotations = map[string]string{ImagePinsAnnotation: pins}
	return t
}

func TestImagePins(t *testing.T) {
	good := `[{"image":"example.com/agent:1.0","digest":"` + manifestDigest + `","config":"` + configDigest + `"}]`
	tests := []struct {
		name string
		pins string
		want []ImagePin
		err  string
	}{
		{"one pin", good, []ImagePin{{Image: "example.com/agent:1.0", Digest: manifestDigest, Config: configDigest}}, ""},
		{"init container's image, manifest digest only",
			`[{"image":"example.com/setup:2","digest":"` + manifestDigest + `"}]`,
			[]ImagePin{{Image: "example.com/setup:2", Digest: manifestDigest}}, ""},
		{"not JSON", "sha256:ab", nil, "want a JSON list of {image, digest, config}"},
		{"trailing data", good + good, nil, "want a JSON list"},
		{"unknown field", `[{"image":"example.com/agent:1.0","digest":"` + manifestDigest + `","size":3}]`, nil, `unknown field "size"`},
		{"empty list", `[]`, nil, "0 pins: want 1 to 64"},
		{"image no container uses", `[{"image":"evil/miner:1","digest":"` + manifestDigest + `"}]`, nil,
			`[0].image: "evil/miner:1" is not the image of any container`},
		{"pinned twice", `[{"image":"example.com/agent:1.0","digest":"` + manifestDigest + `"},{"image":"example.com/agent:1.0","digest":"` + manifestDigest + `"}]`,
			nil, `[1].image: "example.com/agent:1.0" is pinned twice`},
		{"bad digest", `[{"image":"example.com/agent:1.0","digest":"sha256:AB"}]`, nil, `[0].digest: "sha256:AB": want sha256: and 64 lowercase hex digits`},
		{"bad config", `[{"image":"example.com/agent:1.0","digest":"` + manifestDigest + `","config":"md5:1"}]`, nil, `[0].config: "md5:1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ImagePins(pinnedTemplate(tc.pins))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "metadata.annotations[edgeset.io/image-pins]")
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestImagePinsNone(t *testing.T) {
	pins, err := ImagePins(sampleTemplate())
	require.NoError(t, err)
	assert.Empty(t, pins)
}

func TestWithImagePins(t *testing.T) {
	base := sampleTemplate()
	base.Metadata.Annotations = map[string]string{"team": "edge", ImagePinsAnnotation: "stale"}
	pins := []ImagePin{{Image: "example.com/agent:1.0", Digest: manifestDigest, Config: configDigest}}

	pinned := WithImagePins(base, pins)
	got, err := ImagePins(pinned)
	require.NoError(t, err)
	assert.Equal(t, pins, got, "round trip")
	assert.Equal(t, "edge", pinned.Metadata.Annotations["team"], "other annotations kept")
	assert.Equal(t, "stale", base.Metadata.Annotations[ImagePinsAnnotation], "the input is not changed")
	assert.NotEqual(t, TemplateHash(base), TemplateHash(pinned), "the hash covers the pins")

	unpinned := WithImagePins(pinned, nil)
	assert.NotContains(t, unpinned.Metadata.Annotations, ImagePinsAnnotation)
	assert.Nil(t, WithImagePins(sampleTemplate(), nil).Metadata.Annotations, "no annotations left: nil, as decoded")
	assert.Equal(t, TemplateHash(sampleTemplate()), TemplateHash(WithImagePins(sampleTemplate(), nil)), "no pins: the author's hash")

	pin, ok := PinOf(got, "example.com/agent:1.0")
	assert.True(t, ok)
	assert.Equal(t, configDigest, pin.Config)
	_, ok = PinOf(got, "example.com/other:1")
	assert.False(t, ok)
}

func TestTemplateImages(t *testing.T) {
	tmpl := pinnedTemplate("")
	tmpl.Spec.Containers = append(tmpl.Spec.Containers, Container{Name: "b", Image: "example.com/setup:2"})
	assert.Equal(t, []string{"example.com/setup:2", "example.com/agent:1.0"}, TemplateImages(tmpl))
}
